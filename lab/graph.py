"""A graph declared in the lab, node by node, and built with the native `GraphBuilder`.

`@g.node` collects `BaseNode` subclasses; declaring a class with the same node id again
replaces it, which is how a notebook cell is re-run. `build()` reads every node's return hint,
builds the native graph from them, checks the serial engine's contract, and pins a manifest
revision in the store.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import typing
from collections.abc import Callable, Sequence
from types import NoneType
from typing import TYPE_CHECKING, Any, TypeVar, get_args, get_origin

from pydantic_graph import BaseNode, End, Graph, GraphBuilder
from pydantic_graph.join import Join, JoinNode
from pydantic_graph.node import Fork
from pydantic_graph.step import NodeStep, StepNode

from .builder import StepDeclarations, StepDeclaring
from .built import BuiltGraph, is_gate, qualname, start_run, station_kind
from .codec import SnapshotCodec
from .display_hooks import show
from .engine.blocking import set_blocking
from .errors import EntryStationError, GraphDefinitionError, UnsupportedTopologyError
from .limits import DEFAULT_STEP_LIMIT, UNSET
from .manifest import END, Manifest, Station, check_key, source_fingerprint
from .records import Durability
from .retry import Retry, StationPolicies
from .type_hints import return_hint, union_args

if TYPE_CHECKING:
    from .lab import Lab
    from .run import Run
    from .waits import Budgets

__all__ = ("LabGraph", "BuiltGraph", "check_serial_topology", "start_run", "station_kind")

N = TypeVar("N", bound=type)


class Drawable:
    """Drawing for every graph handle (declared or adopted): DOT, Mermaid, SVG, `display(g)`.

    The drawing is a view (`lab.render`, registered by `lab.views` into `lab.display_hooks`): a
    graph calls it by name and never imports it.
    """

    def render(self, overlay: Any = None) -> str:
        """DOT text of the graph; a graph that cannot build yet is drawn from its declarations."""
        return show("graph.dot", self, overlay)

    def mermaid(self, overlay: Any = None) -> str:
        """Mermaid `stateDiagram-v2` text of the same drawing."""
        return show("graph.mermaid", self, overlay)

    def svg(self, overlay: Any = None) -> str:
        """SVG from the Graphviz `dot` program (laid out once per revision, restyled per overlay)."""
        return show("graph.svg", self, overlay)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return show("graph.mimebundle", self)

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self._repr_mimebundle_(), raw=True)


class LabGraph(Drawable, StationPolicies, StepDeclaring):
    """A graph being declared: collect nodes with `@g.node`, then `g.start(...)` a run.

    Or declare it as pydantic-graph's `GraphBuilder` does, cell by cell: `@g.step`, `g.join(...)`,
    `g.add(g.edge_from(g.start_node).map().to(step), ...)`, then `g.start(inputs=...)` (see
    `lab.builder`). Every declaration is kept by its name, so a re-run cell replaces it.
    """

    def __init__(
        self, lab: Lab, name: str, *, state_type: Any, deps_type: Any, output_type: Any, input_type: Any = NoneType
    ):
        self.lab = lab
        self.name = check_key(name)
        self.state_type = state_type
        self.deps_type = deps_type
        self.output_type = output_type
        self.input_type = input_type
        self._decl = StepDeclarations()
        self._nodes: dict[str, type] = {}
        self._built: BuiltGraph | None = None
        self._listeners: list[Callable[[LabGraph], None]] = []
        self.budgets: Budgets | None = None
        """Capability budgets for this graph's new runs (None: the lab's); a run records its own."""
        self.step_limit: int | None = DEFAULT_STEP_LIMIT
        """Steps one `run.run()` call of this graph's new runs may take (None: no limit); see lab.limits."""
        self.retry_policies: dict[str, Retry] = {}
        self.node_timeouts: dict[str, float] = {}
        self.entry: str | None = None
        """The declared entry station (`@g.node(entry=True)`): fresh runs start there; None: any node."""
        self.model: str | None = None
        """"superstep": nodes return updates folded by field reducers (lab.engine.model); None: pydantic-graph's model."""
        self.reducers: dict[str, Any] = {}
        self.isolate_state: str = "fanout"
        self.max_node_concurrency: int | None = None

    # -- declaring -----------------------------------------------------------------------

    @property
    def decorator(self) -> str:
        """What to type to declare a node here: `@g.node` with the notebook's own name for this
        graph (looked up in `__main__`), else `@g.node` explained with the graph's name."""
        spaces = [vars(sys.modules["__main__"])] if "__main__" in sys.modules else []
        ipython = sys.modules.get("IPython")  # a notebook's names live in the shell's user_ns
        shell = ipython.get_ipython() if ipython is not None else None
        if shell is not None:
            spaces.insert(0, shell.user_ns)
        for space in spaces:
            for name, value in list(space.items()):
                if value is self and name.isidentifier() and not name.startswith("_"):
                    return f"@{name}.node"
        return f"@g.node (g = lab.graph({self.name!r}, ...))"

    @typing.overload
    def node(self, cls: N) -> N: ...
    @typing.overload
    def node(
        self, *, retry: Retry | None = None, timeout: float | None = None, blocking: bool = False, entry: bool = False
    ) -> Callable[[N], N]: ...
    def node(
        self,
        cls: Any = None,
        *,
        retry: Retry | None = None,
        timeout: float | None = None,
        blocking: bool = False,
        entry: bool = False,
    ) -> Any:
        """Declare (or re-declare) a node class; use as a decorator above `@dataclass`.

        `@g.node(retry=Retry(max_attempts=3), timeout=30)` also gives the station a retry policy
        (tries inside the same step, lab.retry) and a time limit per try (`NodeTimeout`).
        `blocking=True` runs it on a thread of its own, for a node that blocks its thread
        (`time.sleep`, a synchronous client): timeouts and `cancel()` still stop the run at once,
        and other runs keep stepping (lab.engine.blocking says what happens to the node).
        `entry=True` makes it the graph's declared entry station: `g.start` refuses any other node
        unless asked with `at_any_station=True` (seed 001; docs/seed-differences.md).
        """
        if cls is None:
            return lambda c: self.node(c, retry=retry, timeout=timeout, blocking=blocking, entry=entry)
        if not (inspect.isclass(cls) and issubclass(cls, BaseNode)):
            raise GraphDefinitionError(
                f"{self.decorator} expects a BaseNode subclass, got {cls!r}; "
                "subclass pydantic_graph.BaseNode and decorate the class"
            )
        node_id = cls.get_node_id()
        self.set_policy(node_id, retry=retry, timeout=timeout, where=f"@g.node({node_id})")
        set_blocking(cls, bool(blocking))
        if entry:
            self.entry = node_id
        elif self.entry == node_id:  # its cell was re-run without entry=True
            self.entry = None
        self._nodes[node_id] = cls
        self.changed()
        return cls

    def model_spec(self) -> Any:
        """The super-step model's options as the engine takes them (lab.engine.model.ModelSpec)."""
        from .engine.model import ModelSpec

        return ModelSpec(
            reducers=dict(self.reducers),
            isolate_state=self.isolate_state,  # type: ignore[arg-type]
            max_node_concurrency=self.max_node_concurrency,
            order=tuple(self._decl.steps),
            gates=self.gate_steps,
        )

    def _station_object(self, node_id: str) -> Any:
        return self._nodes.get(node_id) or self._decl.steps.get(node_id)

    def remove(self, node_id: str) -> None:
        """Drop a declared node, step or join by id, or an edge by `"edge " + key` (a cell that declared it was deleted)."""
        self.retry_policies.pop(node_id, None)
        self.node_timeouts.pop(node_id, None)
        if self.entry == node_id:
            self.entry = None
        if self._nodes.pop(node_id, None) is None and not self._decl.drop(node_id):
            raise GraphDefinitionError(
                f"graph {self.name!r} has no node, step, join or edge {node_id!r}; it has {list(self.declarations())}"
            )
        self.changed()

    def declarations(self) -> dict[str, Any]:
        """Everything declared, by key: node, step and join ids, and `edge <key>` per edge."""
        return dict(self._nodes) | self._decl.items()

    def draft(self) -> Graph[Any, Any, Any, Any] | None:
        """The native graph the step-style declarations build now, unvalidated (for drawing); None without any."""
        return self._decl.native_graph(self, validate=False) if self._decl.active else None

    def on_change(self, callback: Callable[[LabGraph], None]) -> None:
        """Call `callback(graph)` whenever a node is declared or removed (live views use this)."""
        self._listeners.append(callback)

    def changed(self) -> None:
        """Forget the built revision and call the `on_change` listeners: a declaration changed (a node,
        a step, an edge, the graph's types or model); the next `build()` pins what is declared now."""
        self._built = None
        for cb in list(self._listeners):
            try:
                cb(self)
            except Exception:  # observers never break a declaration
                import logging

                logging.getLogger(__name__).exception("graph change listener failed")

    @property
    def nodes(self) -> dict[str, type]:
        """The declared node classes by node id, in declaration order."""
        return dict(self._nodes)

    # -- building ------------------------------------------------------------------------

    def build(self) -> BuiltGraph:
        """Build the native graph and pin its manifest revision (cached until a node changes)."""
        if self._built is None:
            self._built = self._build_revision()
        return self._built

    @property
    def manifest(self) -> Manifest:
        return self.build().manifest

    @property
    def revision(self) -> int:
        return self.build().revision

    # -- running -------------------------------------------------------------------------

    def start(
        self,
        node: BaseNode[Any, Any, Any] | None = None,
        *,
        inputs: Any = None,
        state: Any = None,
        deps: Any = None,
        durability: Durability | None = None,
        batch_size: int | None = None,
        breakpoints: dict[str, Sequence[str]] | None = None,
        step_limit: int | None = UNSET,
        timeout: float | None = UNSET,
        parent: tuple[str, int | None] | None = None,
        tags: dict[str, Any] | None = None,
        at_any_station: bool = False,
        total_step_limit: int | None = None,
    ) -> Run:
        """Create a run that will begin at `node` and write its first checkpoint.

        A graph with a declared entry (`@g.node(entry=True)`) starts only there, unless
        `at_any_station=True` says a start elsewhere is meant (seed 001: "Fresh execution must
        begin at the builder's declared entry station"); without one, any declared node starts.

        `breakpoints={"before": ["Send"], "after": ["Draft"]}` parks the run around those
        stations; `run.set_breakpoint` / `run.clear_breakpoint` change them later. A graph declared
        with steps and edges starts at its start node with `inputs` (as `Graph.run(inputs=...)`).
        `step_limit` bounds each `run.run()` of this run (default: the graph's, 100; None: none);
        `timeout` (seconds) each call's time, after which the run fails with `RunTimeout` (default none).
        `total_step_limit` caps the run's steps across all its calls (seed 002; default none).
        `tags` (JSON) ride in the run's `started` event, for SQL: `payload->'tags'` (a batch's id, say).
        """
        built = self.build()
        if self._decl.active and node is None:
            from .builder import start_entry

            entry = start_entry(self, built, inputs)
            return start_run(
                self, built, entry, state=state, deps=deps, durability=durability, batch_size=batch_size,
                breakpoints=breakpoints, step_limit=step_limit, timeout=timeout, parent=parent, tags=tags,
                total_step_limit=total_step_limit,
            )  # fmt: skip
        node_id = type(node).get_node_id() if isinstance(node, BaseNode) else None
        if node_id is None or node_id not in built.nodes:
            raise GraphDefinitionError(
                f"g.start needs an instance of one of the declared nodes {sorted(built.nodes)}, got {node!r}"
            )
        if type(node) is not built.nodes[node_id]:
            raise GraphDefinitionError(
                f"the {node_id} passed to g.start is an older definition of the class; "
                "re-run the cell that creates it after the cell that declares the node"
            )
        if self.entry is not None and node_id != self.entry and not at_any_station:
            raise EntryStationError(
                f"graph {self.name!r} declares {self.entry} as its entry station (@g.node(entry=True)), so a fresh "
                f"run starts there (seed 001); to start at {node_id} on purpose pass "
                f"g.start({node_id}(...), ..., at_any_station=True), or fork a stored checkpoint to continue mid-graph"
            )
        return start_run(
            self,
            built,
            node,
            state=state,
            deps=deps,
            durability=durability,
            batch_size=batch_size,
            breakpoints=breakpoints,
            step_limit=step_limit,
            timeout=timeout,
            parent=parent,
            tags=tags,
            total_step_limit=total_step_limit,
        )

    def _build_revision(self) -> BuiltGraph:
        """Build the native graph from the declarations and pin its manifest revision in the store."""
        if self.model == "superstep" and (self._nodes or not self._decl.active):
            raise GraphDefinitionError(
                f"graph {self.name!r} has model='superstep': declare its nodes with @self.step and its edges with self.add(...) / "
                "self.add_edge(...) (BaseNode classes run in pydantic-graph's own model: leave model out for them)"
            )
        if self._decl.active:
            return self._build_steps()
        if not self._nodes:
            raise GraphDefinitionError(f"graph {self.name!r} has no nodes yet; declare some with {self.decorator}")
        codec = SnapshotCodec(state_type=self.state_type, output_type=self.output_type, nodes=self._nodes)
        edges: list[tuple[str, str]] = []
        targets: dict[str, list[Any]] = {}
        for node_id, cls in self._nodes.items():
            dsts = self._return_targets(node_id, cls)
            targets[node_id] = dsts
            for dst in dsts:
                edges.append((node_id, END if dst is End else dst.get_node_id()))
        native = self._native_graph(targets)
        check_serial_topology(native)
        stations = tuple(
            Station(
                node_id=node_id,
                kind=station_kind(cls),
                qualname=cls.__qualname__,
                fields=tuple(codec.node(node_id).fields),
                source_hash=source_fingerprint(cls),
            )
            for node_id, cls in self._nodes.items()
        )
        schema_id = hashlib.sha256(codec.schema_id().encode()).hexdigest()[:16]
        manifest = Manifest(
            key=self.name,
            stations=stations,
            edges=tuple(sorted(set(edges))),
            schema_id=schema_id,
            state_type=qualname(self.state_type),
        )
        revision = self.lab.store.register_graph(manifest)
        return BuiltGraph(
            key=self.name,
            native=native,
            manifest=manifest.with_revision(revision),
            codec=codec,
            nodes=dict(self._nodes),
            state_type=self.state_type,
            deps_type=self.deps_type,
            output_type=self.output_type,
        )

    def _build_steps(self) -> BuiltGraph:
        """Pin the native graph the step-style declarations build, read exactly as `lab.adopt` reads one."""
        from .builder import pin_native

        return pin_native(self, self._decl.native_graph(self))

    def _return_targets(self, node_id: str, cls: type) -> list[Any]:
        """The declared classes (and End) a node's `run` (a gate's `decide`) return hint names."""
        method = "decide" if is_gate(cls) else "run"
        run = getattr(cls, method, None)
        localns = dict(self._nodes)
        try:
            hints = return_hint(run, localns)
        except NameError as exc:
            raise GraphDefinitionError(
                f"node {node_id}: its {method}() return hint names {exc.name!r}, which is not defined; "
                f"declare it with {self.decorator} or fix the name"
            ) from exc
        if "return" not in hints:
            raise GraphDefinitionError(
                f"node {node_id} has no return hint on {method}(); annotate it with the nodes it may return, "
                "e.g. `-> Next | End[int]`"
            )
        out: list[Any] = []
        for arg in union_args(hints["return"]):
            base = get_origin(arg) or arg
            if base is typing.Annotated:
                arg = get_args(arg)[0]
                base = get_origin(arg) or arg
            if base is End:
                out.append(End)
            elif base is JoinNode:
                raise UnsupportedTopologyError(
                    f"node {node_id} returns a JoinNode: joins and reducers need the super-step engine; "
                    "the serial engine runs one station at a time (seed 001)"
                )
            elif base is StepNode:
                raise UnsupportedTopologyError(
                    f"node {node_id} returns a StepNode; adopt the native graph with lab.adopt(...) to run "
                    "step functions"
                )
            elif inspect.isclass(base) and issubclass(base, BaseNode):
                target_id = base.get_node_id()
                if target_id not in self._nodes:
                    raise GraphDefinitionError(
                        f"node {node_id} returns {target_id}, which is not declared in graph {self.name!r}; "
                        f"decorate {target_id} with {self.decorator} (declared: {sorted(self._nodes)})"
                    )
                out.append(self._nodes[target_id])
            else:
                raise GraphDefinitionError(
                    f"node {node_id}: return hint part {arg!r} is neither a declared node nor End[...]; "
                    "list the node classes it may return"
                )
        return out

    def _native_graph(self, targets: dict[str, list[Any]]) -> Graph[Any, Any, Any, Any]:
        """The native graph, edges taken from the return hints just read (as `GraphBuilder.node` does)."""
        b: GraphBuilder[Any, Any, Any, Any] = GraphBuilder(
            name=self.name,
            state_type=self.state_type if self.state_type is not None else NoneType,
            deps_type=self.deps_type if self.deps_type is not None else NoneType,
            output_type=self.output_type,
            auto_instrument=False,
        )
        for node_id, dsts in targets.items():
            src = NodeStep(self._nodes[node_id])
            natives = [b.end_node if d is End else NodeStep(d) for d in dsts]
            if len(natives) == 1:
                b.add(b.edge_from(src).to(natives[0]))
            else:
                decision = b.decision(node_id=f"{node_id}__routes")
                for dst in natives:
                    decision = decision.branch(b.match(NoneType).to(dst))
                b.add(b.edge_from(src).to(decision))
        # Any declared node may be the entry: the start routes by the entry node's class. The lab
        # injects the entry station at the iterator's first boundary, so this route only registers the
        # start node and documents the entries; the native reachability check does not apply.
        entry = b.decision(node_id="__entry__")
        for cls in self._nodes.values():
            entry = entry.branch(b.match_node(cls))
        b.add(b.edge_from(b.start_node).to(entry))
        return b.build(validate_graph_structure=False)

    def __repr__(self) -> str:
        if self._decl.active:
            return f"<LabGraph {self.name!r} steps={list(self._decl.steps)} joins={list(self._decl.joins)} edges={len(self._decl.edges)}>"
        return f"<LabGraph {self.name!r} nodes={list(self._nodes)}>"


def check_serial_topology(native: Graph[Any, Any, Any, Any]) -> None:
    """Refuse broadcast, map/spread and joins by name: the serial engine has no contract for them."""
    for node_id, node in native.nodes.items():
        if isinstance(node, Fork):
            what = "a map/spread fork" if node.is_map else "a broadcast fork (parallel paths)"
            raise UnsupportedTopologyError(
                f"graph {native.name!r} has {what} at {node_id!r}; the serial engine runs one station at "
                "a time (seed 001) — use the super-step engine for parallel graphs"
            )
        if isinstance(node, Join):
            raise UnsupportedTopologyError(
                f"graph {native.name!r} has a join/reducer at {node_id!r}; the serial engine runs one "
                "station at a time (seed 001) — use the super-step engine for joins"
            )
