"""A subroutine definition compiled onto the lab's engine: one station per node.

Each node becomes a generated `BaseNode` dataclass whose one field is the payload it receives,
declared in a `SubroutineGraph` (a `LabGraph`), so a subroutine invocation is an ordinary run of
the serial engine with the same checkpoints, events, time travel, store and widget. The run's
state (`SubroutineState`) holds the invocation's params, every non-Feature node's node-local
state and every feature's value; the payload travels in the pending station's field.

A station (`_visit`) gives the visit a copy of its payload, its node's state and a
`VisitContext`; checks what it returns; routes by the commit rule (`routing.route`); and only
then writes the candidate node-local or feature state into the run's state and returns the
target station (or End with the payload at the Output port). A visit, a check or the routing
that raises fails the station: the run's head stays and the state is read back from it.

Every station's `run` return hint lists its edges with their conditions and effects as
`Edge(label=...)`, so the drawing labels them.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import TypeAdapter, ValidationError
from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.basenode import Edge
from typing_extensions import TypedDict

from ..events import running_run
from ..gates import Gate, station_context
from ..graph import LabGraph
from ..manifest import source_fingerprint
from . import sessions
from .context import VisitContext
from .definition import INPUT, OUTPUT, Definition, NodeDecl, caller_module
from .errors import SubroutineDefinitionError, VisitResultError
from .features import Proposal, current_proposal
from .routing import route
from .values import FeatureSuccess, Success, check_returned_state, isolated

if TYPE_CHECKING:
    from ..lab import Lab
    from ..records import CheckpointRecord
    from ..run import Run

__all__ = ("SubroutineGraph", "SubroutineState", "SubroutineNode", "subroutine_graph")


@dataclass
class SubroutineState:
    """A subroutine run's state: params, node-local state by node, feature values by feature.

    Each subroutine has its own generated subclass with the declared types.
    """

    params: Any = None
    nodes: dict[str, Any] = dataclasses.field(default_factory=dict)
    features: dict[str, Any] = dataclasses.field(default_factory=dict)


class SubroutineNode(BaseNode[Any, Any, Any]):
    """Base of the generated stations (never declared itself)."""

    __subroutine__: ClassVar[SubroutineGraph]
    __node__: ClassVar[str]
    payload: Any

    async def run(self, ctx: GraphRunContext[Any, Any]) -> Any:  # replaced per node
        return await _visit(self, ctx)


async def _run_template(self, ctx):  # type: ignore[no-untyped-def]
    return await _visit(self, ctx)


async def _visit(node: SubroutineNode, ctx: GraphRunContext[Any, Any]) -> Any:
    sub = type(node).__subroutine__
    definition = sub.definition
    decl = definition.nodes[type(node).__node__]
    state: SubroutineState = ctx.state
    before = dict(state.features)
    context = VisitContext(
        params=isolated(state.params),
        node=decl.name,
        deps=ctx.deps,
        graph=sub,
        feature_values=before,
        gate=decl.gate,
    )
    payload = isolated(node.payload)  # a visit that mutates its input cannot change the pending station
    run = _running()
    if run is not None:
        await sessions.enter(run, definition, state.params)  # the invocation's resource (seed 000): at its entry
    if decl.feature:
        proposal = Proposal(definition.features, dict(before), decl.name)
        token = current_proposal.set(proposal)
        try:
            result = await _maybe_await(decl.fn(payload, context))
        finally:
            current_proposal.reset(token)
        if not isinstance(result, FeatureSuccess):
            raise VisitResultError(
                f"Feature visit {decl.name} returned {result!r:.80}; a Feature visit returns FeatureSuccess() "
                "(the payload passes through) and proposes values with FeatureState.replace"
            )
        output, proposed, new_state = node.payload, proposal.values, None
    else:
        result = await _maybe_await(decl.fn(payload, state.nodes[decl.name], context))
        if not isinstance(result, Success):
            what = (
                "FeatureSuccess (only a Feature visit returns it)"
                if isinstance(result, FeatureSuccess)
                else f"{result!r:.80}"
            )
            raise VisitResultError(
                f"visit {decl.name} returned {what}; return Success(output=..., state=...)"
            )
        assert decl.state_type is not None
        new_state = check_returned_state(result.state, decl.state_type, node=decl.name)
        output, proposed = result.output, before
    edge = route(decl.name, definition.outgoing(decl.name), before, proposed)
    # the commit: only now does the candidate become the run's state
    if decl.feature:
        state.features = dict(proposed)
    else:
        state.nodes = {**state.nodes, decl.name: new_state}
    if edge.dst == OUTPUT:
        if run is not None:
            await sessions.leave(run)  # closed at the invocation's exit
        return End(output)
    return sub.station(edge.dst)(payload=output)


def _running() -> Run | None:
    station = station_context.get()
    return station.run if station is not None and station.run is not None else running_run.get()


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class SubroutineGraph(LabGraph):
    """A subroutine compiled onto the engine: `sub.start(input, params=...)` starts an invocation.

    Declare on it cell by cell (`sub.feature`, `@sub.node`, `@sub.feature_node`, `sub.edge`), or
    hand `lab.subroutine` a `Definition` kept in a module.
    """

    definition: Definition

    def __init__(self, lab: Lab, definition: Definition):
        super().__init__(
            lab,
            definition.name,
            state_type=SubroutineState,
            deps_type=Any,
            output_type=definition.output_type,
        )
        self.definition = definition
        self._declared_policies: set[str] = set()
        """The nodes whose declaration gave them a retry policy or a time limit (`_sync_policies`)."""
        definition.on_change(self._recompile)
        self._recompile()

    # -- declaring (delegated, so a notebook writes @sub.node) --------------------------------

    @property
    def input(self) -> str:
        return INPUT

    @property
    def output(self) -> str:
        return OUTPUT

    def feature(self, name: str, domain: Any) -> Any:
        return self.definition.feature(name, domain)

    def node(self, fn: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
        return self.definition.node(fn, **kwargs)

    def feature_node(self, fn: Any = None, **kwargs: Any) -> Any:
        return self.definition.feature_node(fn, **kwargs)

    def session(self, factory: Any) -> Any:
        """The invocation's provider conversation resource (`Definition.session`)."""
        return self.definition.session(factory)

    def edge(self, src: Any, dst: Any, **kwargs: Any) -> None:
        """Declare (or replace) the edge `src` -> `dst`: `when=` a condition, `effect=` one or more effects."""
        self.definition.edge(src, dst, **kwargs)

    def remove(self, name: str) -> None:  # type: ignore[override]
        """Drop a node, a feature (`"feature mode"`) or an edge (`"edge a -> b"`): a deleted or renamed cell."""
        self.definition.remove(name.removeprefix("edge ").removeprefix("feature "))

    def declarations(self) -> dict[str, Any]:  # type: ignore[override]
        """What the cells declared, by key: node names (their visit functions), `feature <name>`,
        `edge <src> -> <dst>` (the kernel extension drops what a re-run cell no longer declares)."""
        d = self.definition
        out: dict[str, Any] = {name: decl.fn for name, decl in d.nodes.items()}
        out.update({f"feature {name}": f for name, f in d.features.items()})
        out.update({f"edge {s} -> {t}": e for (s, t), e in d.edges.items()})
        return out

    @property
    def features(self) -> dict[str, Any]:
        return dict(self.definition.features)

    def station(self, node: str) -> type[SubroutineNode]:
        return self._nodes[node]  # type: ignore[return-value]

    # -- compiling ----------------------------------------------------------------------------

    def _recompile(self) -> None:
        d = self.definition
        self.output_type = d.output_type
        self.state_type = _state_type(d)
        order = sorted(d.nodes, key=lambda n: n != d.entry)  # the entry first: the drawing starts there
        classes: dict[str, type[SubroutineNode]] = {n: _station_class(self, d.nodes[n]) for n in order}
        for name, cls in classes.items():
            cls.run = _run_for(self, name, classes)  # type: ignore[method-assign]
            if issubclass(cls, Gate):
                # a gate's edges are read from `decide`; its visit asks context.consent()
                cls.decide = cls.run  # type: ignore[attr-defined]
        self._nodes.clear()
        self._nodes.update(classes)
        self._sync_policies()
        self.changed()

    def _sync_policies(self) -> None:
        """The declared nodes' `retry=` / `timeout=` as the station policies the kernel reads; a node
        re-declared without them (or removed) loses what its declaration gave it."""
        declared = self._declared_policies
        now = {
            n
            for n, decl in self.definition.nodes.items()
            if decl.retry is not None or decl.timeout is not None
        }
        for name in declared - now:
            self.retry_policies.pop(name, None)
            self.node_timeouts.pop(name, None)
        for name in now:
            decl = self.definition.nodes[name]
            self.set_policy(name, retry=decl.retry, timeout=decl.timeout, where=f"@sub.node({name})")
        self._declared_policies = now

    def build(self) -> Any:
        problems = self.definition.problems()
        if problems:
            raise SubroutineDefinitionError(
                f"subroutine {self.name!r} cannot build yet: " + "; ".join(problems)
            )
        return super().build()

    # -- running ------------------------------------------------------------------------------

    def initial_state(self, params: Any = None) -> SubroutineState:
        """Params validated, every node-local state constructed with no arguments, every feature None."""
        d = self.definition
        return self.state_type(
            params=check_params(d, params),
            nodes={n: decl.state_type() for n, decl in d.nodes.items() if not decl.feature},  # type: ignore[misc]
            features=dict.fromkeys(d.features),
        )

    def start(  # type: ignore[override]
        self,
        input: Any = None,
        *,
        inputs: Any = None,
        params: Any = None,
        deps: Any = None,
        state: Any = None,
        **options: Any,
    ) -> Run:
        """Start an invocation: the enter port's edge leads to the first visit, which gets `input`.

        `inputs=` is the same input under the name other graphs take (so `run_subgraph(sub,
        inputs=...)` starts one as a child; `parent=` and `deps=` pass through as for any graph).
        `state` is refused: the runtime initialises it (node-local states constructed, features None).
        """
        if state is not None:
            raise SubroutineDefinitionError(
                "a subroutine starts from its input and params: sub.start(input, params=...); its state is "
                "initialised by the runtime (node-local states constructed, features None)"
            )
        if input is not None and inputs is not None:
            raise SubroutineDefinitionError(
                f"sub.start got the input twice (input={input!r:.40} and inputs={inputs!r:.40}); pass one of them"
            )
        input = inputs if input is None else input
        built = self.build()
        entry = self.definition.entry
        assert entry is not None
        state = self.initial_state(params)
        run = super().start(built.nodes[entry](payload=input), state=state, deps=deps, **options)
        from .calls import fresh_run

        fresh_run(run)
        return run

    # -- reading ------------------------------------------------------------------------------

    def state_sections(self, rec: CheckpointRecord) -> list[tuple[str, Any]]:
        """A checkpoint's state as the seed names it (the run widget shows these sections)."""
        state = rec.state if isinstance(rec.state, Mapping) else {}
        if rec.status == "done":
            payload: tuple[str, Any] = ("payload (the output)", rec.output)
        elif rec.next:
            payload = (f"payload (input of {rec.next[0].node_id})", rec.next[0].fields.get("payload"))
        else:
            payload = ("payload", None)
        return [
            payload,
            ("params", state.get("params")),
            ("node-local state", state.get("nodes", {})),
            ("feature state", state.get("features", {})),
        ]

    def __repr__(self) -> str:
        d = self.definition
        return f"<SubroutineGraph {self.name!r} nodes={list(d.nodes)} features={list(d.features)} edges={len(d.edges)}>"


def check_params(d: Definition, params: Any) -> Any:
    """Params for one invocation, validated against the declared type (constructed when left out)."""
    tp = d.params_type
    if tp is None:
        if params is not None:
            raise SubroutineDefinitionError(
                f"subroutine {d.name!r} declares no params type; declare lab.subroutine(..., params=Type) to pass params"
            )
        return None
    if params is None:
        try:
            return tp()
        except TypeError as exc:
            raise SubroutineDefinitionError(
                f"subroutine {d.name!r}: its params type {getattr(tp, '__qualname__', tp)} has no default; pass params=..."
            ) from exc
    try:
        return TypeAdapter(tp).validate_python(params)
    except ValidationError as exc:
        raise SubroutineDefinitionError(
            f"params for subroutine {d.name!r} do not validate as {getattr(tp, '__qualname__', tp)}: {exc.errors()[0]['msg']}"
        ) from None


def _pyname(name: str) -> str:
    return (
        "".join(p.capitalize() for p in name.replace("-", "_").replace(".", "_").split("_") if p)
        or "Subroutine"
    )


def _state_type(d: Definition) -> type[SubroutineState]:
    """The run state type of this definition: params, nodes and features with their declared types."""
    base = _pyname(d.name)
    nodes = TypedDict(f"{base}Nodes", {n: decl.state_type for n, decl in d.nodes.items() if not decl.feature})  # type: ignore[misc]
    features = TypedDict(f"{base}Features", {n: f.value_type for n, f in d.features.items()})  # type: ignore[misc]
    for td in (nodes, features):
        td.__module__ = "lab.subroutine.states"
    params_type = d.params_type if d.params_type is not None else type(None)
    cls = dataclasses.make_dataclass(
        f"{base}State",
        [
            ("params", params_type, dataclasses.field(default=None)),
            ("nodes", nodes, dataclasses.field(default_factory=dict)),
            ("features", features, dataclasses.field(default_factory=dict)),
        ],
        bases=(SubroutineState,),
        namespace={"__module__": "lab.subroutine.states"},
    )
    return cls


def _describe(d: Definition, decl: NodeDecl) -> str:
    """The node's declared data, hashed into the manifest: kind, types, edges with labels."""
    st = decl.state_type
    body = {
        "kind": "feature" if decl.feature else "node",
        "input": repr(decl.input_type),
        "state": None
        if st is None
        else [st.__qualname__, [(f.name, repr(f.type), repr(f.default)) for f in dataclasses.fields(st)]],
        "edges": [[e.dst, e.label] for e in d.outgoing(decl.name)],
        "features": {n: f.domain_text for n, f in d.features.items()},
        "params": repr(d.params_type),
        "output": repr(d.output_type),
    }
    if decl.gate:  # only then: the revisions of subroutines declared before gates existed stay as they were
        body["gate"] = True
    return json.dumps(body, sort_keys=True)


def _station_class(sub: SubroutineGraph, decl: NodeDecl) -> type[SubroutineNode]:
    cls = dataclasses.make_dataclass(
        decl.name,
        [("payload", decl.input_type, dataclasses.field(default=None))],
        # a gate: the manifest, the drawing and the consent re-entry check see one
        bases=(SubroutineNode, Gate) if decl.gate else (SubroutineNode,),
        namespace={
            "__module__": "lab.subroutine.stations",
            "__subroutine__": sub,
            "__node__": decl.name,
            "declared": _describe(sub.definition, decl),
            "visit": source_fingerprint(decl.fn),
        },
    )
    return cls  # type: ignore[return-value]


def _run_for(sub: SubroutineGraph, name: str, classes: Mapping[str, type]) -> Any:
    """The station's `run`, annotated with its edges (labels: conditions and effects)."""
    targets: list[Any] = []
    for e in sub.definition.outgoing(name):
        if e.dst == OUTPUT:
            target: Any = End[sub.definition.output_type]
        else:
            target = classes.get(e.dst) or type(e.dst, (), {"__graphlab_missing__": True})
        targets.append(Annotated[target, Edge(label=e.label)] if e.label else target)
    union = typing.Union[tuple(targets)] if len(targets) > 1 else None  # noqa: UP007
    hint: Any = union or (targets[0] if targets else typing.NoReturn)
    t = _run_template
    fn = types.FunctionType(t.__code__, t.__globals__, "run", t.__defaults__, t.__closure__)
    fn.__qualname__ = f"{name}.run"
    fn.__module__ = __name__
    fn.__annotations__ = {"return": hint}
    return fn


def subroutine_graph(lab: Lab, source: Definition | str, **kwargs: Any) -> SubroutineGraph:
    """`lab.subroutine(...)`: a new subroutine by name, or a `Definition` compiled onto `lab`."""
    definition = source if isinstance(source, Definition) else Definition(source, **kwargs)
    if isinstance(source, Definition) and kwargs:
        raise SubroutineDefinitionError(
            "lab.subroutine(definition) takes no other arguments: the definition has its types"
        )
    if not isinstance(source, Definition):
        definition.module = caller_module(2)
    existing = lab.graphs.get(definition.name)
    if isinstance(existing, SubroutineGraph) and existing.definition is definition:
        return existing
    if existing is not None and not isinstance(existing, SubroutineGraph):
        raise SubroutineDefinitionError(
            f"the name {definition.name!r} is already a graph of this lab (not a subroutine); rename the subroutine"
        )
    sub = SubroutineGraph(lab, definition)
    lab.add_graph(sub)
    return sub
