"""Step-style declarations of a lab graph: `@g.step`, `g.join(...)`, `g.add(g.edge_from(...)...)`.

pydantic-graph's `GraphBuilder` declares a graph in one go. A notebook declares it one cell at
a time and re-runs cells, so every declaration here is kept by a name and a re-run replaces it:
a step and a join by their node id, an edge by its `edge_key` (its sources and path: labels,
`map`, `broadcast`, transforms, destinations). Edges hold node ids, not objects: at build time
each names the step, join or node class declared *now* under that id, so re-running a step's
cell changes the step every edge uses. `native_graph` replays the declarations into a fresh
`GraphBuilder` and builds it; nothing is copied from the builder between builds.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from pydantic_graph import BaseNode, Graph, GraphBuilder
from pydantic_graph.decision import Decision
from pydantic_graph.exceptions import GraphBuildingError, GraphSetupError
from pydantic_graph.id_types import ForkID, JoinID, NodeID, replace_placeholder_id
from pydantic_graph.join import Join
from pydantic_graph.node import EndNode, StartNode
from pydantic_graph.paths import (
    BroadcastMarker,
    DestinationMarker,
    EdgePath,
    EdgePathBuilder,
    LabelMarker,
    MapMarker,
    Path,
    PathBuilder,
    TransformMarker,
)
from pydantic_graph.step import NodeStep, Step
from pydantic_graph.util import get_callable_name

from .errors import ArgumentError, GraphDefinitionError

if TYPE_CHECKING:
    from .graph import LabGraph

__all__ = ("StepDeclarations", "edge_key", "EDGE_PREFIX")

EDGE_PREFIX = "edge "
"""Declaration keys of edges start with this (node ids are identifiers, so they never collide)."""

_NAMES = {StartNode.id: "start", EndNode.id: "end"}


def _name(node_id: str) -> str:
    return _NAMES.get(node_id, replace_placeholder_id(NodeID(node_id)))


def _path_text(path: Path) -> str:
    parts: list[str] = []
    for item in path.items:
        if isinstance(item, LabelMarker):
            parts.append(f"label({item.label!r})")
        elif isinstance(item, MapMarker):
            fid = replace_placeholder_id(item.fork_id)
            parts.append("map" if fid == "map" else f"map({fid})")
        elif isinstance(item, BroadcastMarker):
            parts.append("broadcast[" + " | ".join(_path_text(p) for p in item.paths) + "]")
        elif isinstance(item, TransformMarker):
            parts.append(f"transform({get_callable_name(item.transform)})")
        elif isinstance(item, DestinationMarker):
            parts.append(_name(item.destination_id))
    return " -> ".join(parts)


def edge_key(edge: EdgePath[Any, Any]) -> str:
    """What an edge is, as text: `square -> reduce_sum`, `start -> label('items') -> map -> square`.

    The same cell run twice gives the same key (fork ids pydantic-graph generates are left out),
    so re-adding an edge replaces it instead of doubling it.
    """
    sources = ",".join(_name(s.id) for s in edge.sources)
    return f"{sources} -> {_path_text(edge.path)}"


class StepDeclarations:
    """The steps, joins and edges declared into one `LabGraph`, each by its name."""

    def __init__(self) -> None:
        self.steps: dict[str, Step[Any, Any, Any, Any]] = {}
        self.joins: dict[str, Join[Any, Any, Any, Any]] = {}
        self.edges: dict[str, EdgePath[Any, Any]] = {}
        self.gates: set[str] = set()
        """The ids of the steps declared `gate=True` (their manifest kind is "gate")."""
        self._start: StartNode[Any] = StartNode()
        self._end: EndNode[Any] = EndNode()

    @property
    def active(self) -> bool:
        """Whether the graph is declared builder-style (a start node and edges) rather than by node classes."""
        return bool(self.steps or self.joins or self.edges)

    # -- declaring ------------------------------------------------------------------------

    def step(
        self, call: Callable[..., Any], *, node_id: str | None, label: str | None, gate: bool = False
    ) -> Step[Any, Any, Any, Any]:
        if not callable(call) or not inspect.iscoroutinefunction(call):
            raise GraphDefinitionError(
                f"@g.step expects an async function `async def name(ctx: StepContext[State, Deps, Input]) -> Output`, "
                f"got {call!r}"
            )
        s: Step[Any, Any, Any, Any] = Step(
            id=NodeID(node_id or get_callable_name(call)), call=call, label=label
        )
        self.steps[s.id] = s
        (self.gates.add if gate else self.gates.discard)(s.id)
        return s

    def join(
        self,
        reducer: Callable[..., Any],
        *,
        initial: Any,
        initial_factory: Callable[[], Any] | None,
        node_id: str | None,
        parent_fork_id: str | None,
        preferred_parent_fork: Literal["farthest", "closest"],
    ) -> Join[Any, Any, Any, Any]:
        if initial_factory is None:
            value = initial
            initial_factory = lambda: value  # noqa: E731 - as native `GraphBuilder.join(initial=...)`
        j: Join[Any, Any, Any, Any] = Join(
            id=JoinID(NodeID(node_id or get_callable_name(reducer))),
            reducer=reducer,
            initial_factory=initial_factory,
            parent_fork_id=ForkID(NodeID(parent_fork_id)) if parent_fork_id is not None else None,
            preferred_parent_fork=preferred_parent_fork,
        )
        self.joins[j.id] = j
        return j

    def add(self, edges: Iterable[Any]) -> list[str]:
        keys: list[str] = []
        for edge in edges:
            if not isinstance(edge, EdgePath):
                hint = (
                    " (finish it with .to(...) or .broadcast(...))"
                    if isinstance(edge, EdgePathBuilder)
                    else ""
                )
                raise GraphDefinitionError(
                    f"g.add expects edges made with g.edge_from(...)...to(...), got {edge!r}{hint}"
                )
            key = edge_key(edge)
            self.edges[key] = edge
            keys.append(key)
        return keys

    def edge_from(self, *sources: Any) -> EdgePathBuilder[Any, Any, Any]:
        if not sources:
            raise GraphDefinitionError(
                "g.edge_from needs at least one source: g.start_node, a step, a join or a node class"
            )
        resolved = [NodeStep(s) if inspect.isclass(s) and issubclass(s, BaseNode) else s for s in sources]
        return EdgePathBuilder(sources=resolved, path_builder=PathBuilder(working_items=[]))

    @property
    def start_node(self) -> StartNode[Any]:
        return self._start

    @property
    def end_node(self) -> EndNode[Any]:
        return self._end

    def items(self) -> dict[str, Any]:
        """Every declaration by its key: step and join ids, then `edge <key>`."""
        out: dict[str, Any] = dict(self.steps) | dict(self.joins)
        out.update({EDGE_PREFIX + k: e for k, e in self.edges.items()})
        return out

    def drop(self, key: str) -> bool:
        """Forget one declaration by its key; False when there is none."""
        if key.startswith(EDGE_PREFIX):
            return self.edges.pop(key.removeprefix(EDGE_PREFIX), None) is not None
        self.gates.discard(key)
        return self.steps.pop(key, None) is not None or self.joins.pop(key, None) is not None

    # -- building --------------------------------------------------------------------------

    def native_graph(self, g: LabGraph, *, validate: bool = True) -> Graph[Any, Any, Any, Any]:
        """A fresh `GraphBuilder` fed every declaration as it stands now, built."""
        from types import NoneType

        b: GraphBuilder[Any, Any, Any, Any] = GraphBuilder(
            name=g.name,
            state_type=g.state_type if g.state_type is not None else NoneType,
            deps_type=g.deps_type if g.deps_type is not None else NoneType,
            input_type=g.input_type if g.input_type is not None else NoneType,
            output_type=g.output_type,
            auto_instrument=False,
        )
        rebind = _Rebinder(g, self, b, lenient=not validate)
        try:
            for key, edge in self.edges.items():
                rebind.key = key
                b.add(
                    EdgePath(
                        sources=[rebind(s) for s in edge.sources],
                        path=copy.deepcopy(edge.path),
                        destinations=[rebind(d) for d in edge.destinations],
                    )
                )
            for node_id, cls in g.nodes.items():
                rebind.key = node_id
                edge = b.node(cls)
                b.add(EdgePath(edge.sources, edge.path, [rebind.hinted(d) for d in edge.destinations]))
            return b.build(validate_graph_structure=validate)
        except NameError as exc:
            raise GraphDefinitionError(
                f"graph {g.name!r}: a return hint in {rebind.key} names {exc.name!r}, which is not defined; "
                "declare it (or fix the name) and run the cell again"
            ) from exc
        except (GraphBuildingError, GraphSetupError, ValueError) as exc:
            raise GraphDefinitionError(f"graph {g.name!r} does not build: {exc}") from exc


class _Rebinder:
    """Maps a node an edge was declared with to the one declared now under the same id."""

    def __init__(
        self, g: LabGraph, decls: StepDeclarations, b: GraphBuilder[Any, Any, Any, Any], *, lenient: bool
    ):
        self.g, self.decls, self.b, self.lenient = g, decls, b, lenient
        self.key = ""
        self._done: dict[int, Any] = {}

    def __call__(self, node: Any) -> Any:
        hit = self._done.get(id(node))
        if hit is None:
            hit = self._done[id(node)] = self._rebind(node)
        return hit

    def _rebind(self, node: Any) -> Any:
        if isinstance(node, StartNode):
            return self.b.start_node
        if isinstance(node, EndNode):
            return self.b.end_node
        if isinstance(node, NodeStep):
            cls = self.g.nodes.get(node.id)
            return NodeStep(cls) if cls is not None else node
        if isinstance(node, Step):
            return self._current(self.decls.steps, node.id, "step", "@g.step")
        if isinstance(node, Join):
            return self._current(self.decls.joins, node.id, "join", "g.join(...)")
        if isinstance(node, Decision):
            branches = [
                replace(br, path=copy.deepcopy(br.path), destinations=[self(d) for d in br.destinations])
                for br in node.branches
            ]
            return Decision(id=node.id, branches=branches, note=node.note)
        return node

    def hinted(self, node: Any) -> Any:
        """A destination a node class's return hint names (`Annotated[JoinNode[...], a_join]`), as declared now.

        The hint holds the join or step object of the cell that defined the class; the graph
        holds the one declared under that id now (`g.join(...)` run again makes a new object),
        so the graph would have two nodes with one id. One nobody declares is kept as hinted.
        """
        if isinstance(node, Decision):
            branches = [replace(br, destinations=[self.hinted(d) for d in br.destinations]) for br in node.branches]
            return Decision(id=node.id, branches=branches, note=node.note)
        if isinstance(node, Join) and node.id in self.decls.joins:
            return self.decls.joins[node.id]
        if isinstance(node, Step) and not isinstance(node, NodeStep) and node.id in self.decls.steps:
            return self.decls.steps[node.id]
        return node

    def _current(self, table: dict[str, Any], node_id: str, what: str, how: str) -> Any:
        current = table.get(node_id)
        if current is None and self.lenient:  # a drawing shows it as missing instead
            if what == "join":
                return Join(id=JoinID(NodeID(node_id)), reducer=_undeclared, initial_factory=lambda: None)
            return Step(id=NodeID(node_id), call=_undeclared)
        if current is None:
            raise GraphDefinitionError(
                f"graph {self.g.name!r}: the edge {self.key} names {what} {node_id!r}, which is no longer declared; "
                f"declare it again with {how} or remove the edge (g.remove({EDGE_PREFIX + self.key!r}))"
            )
        return current


async def _undeclared(*_args: Any) -> None:  # pragma: no cover - drawn, never run
    """Stands in, in a drawing only, for a step or join an edge names but no cell declares now."""


_undeclared.__graphlab_missing__ = True  # type: ignore[attr-defined]


class StepDeclaring:
    """The builder-style half of `LabGraph`: the `GraphBuilder` API, one cell at a time.

    ```python
    @g.step
    async def square(ctx: StepContext[S, None, int]) -> int: ...
    collect = g.join(reduce_list_append, initial_factory=list[int])
    g.add(g.edge_from(g.start_node).map().to(square), g.edge_from(square).to(collect),
          g.edge_from(collect).to(g.end_node))
    run = g.start(inputs=[1, 2, 3])
    ```
    """

    name: str
    _decl: StepDeclarations

    def changed(self) -> None:  # pragma: no cover - LabGraph's
        raise NotImplementedError

    @property
    def start_node(self) -> StartNode[Any]:
        """Where a run's `inputs` enter: the source of the first edges (`g.edge_from(g.start_node)`)."""
        return self._decl.start_node

    @property
    def end_node(self) -> EndNode[Any]:
        """Where a value becomes the run's output (`.to(g.end_node)`)."""
        return self._decl.end_node

    def step(
        self,
        call: Callable[..., Any] | None = None,
        *,
        node_id: str | None = None,
        label: str | None = None,
        retry: Any = None,
        timeout: float | None = None,
        blocking: bool = False,
        gate: bool = False,
    ) -> Any:
        """Declare (or re-declare, by node id) a step function; use as `@g.step` or `@g.step(node_id=...)`.

        `retry=Retry(...)` and `timeout=` give the step a retry policy and a time limit per try;
        `blocking=True` runs it on a thread of its own (see `@g.node(blocking=True)`).
        `gate=True` declares a consent gate: the step calls `lab.consent(prompt, details)`, which
        parks the run until `run.approve()` / `run.deny()` and then returns the `Verdict`.
        """
        if call is None:
            return lambda fn: self.step(
                fn, node_id=node_id, label=label, retry=retry, timeout=timeout, blocking=blocking, gate=gate
            )
        if not isinstance(gate, bool):
            raise ArgumentError(
                f"@g.step(gate=...) takes True or False, got {gate!r}; a gate step asks with "
                "consent(prompt, details) inside its function"
            )
        if blocking:
            from .engine.blocking import in_thread

            call = in_thread(call)
        s = self._decl.step(call, node_id=node_id, label=label, gate=gate)
        self.set_policy(s.id, retry=retry, timeout=timeout, where=f"@g.step({s.id})")  # type: ignore[attr-defined]
        self.changed()
        return s

    def join(
        self,
        reducer: Callable[..., Any],
        *,
        initial: Any = None,
        initial_factory: Callable[[], Any] | None = None,
        node_id: str | None = None,
        parent_fork_id: str | None = None,
        preferred_parent_fork: Literal["farthest", "closest"] = "farthest",
    ) -> Join[Any, Any, Any, Any]:
        """Declare a join with a reducer, as `GraphBuilder.join`; its id is `node_id` or the reducer's name.

        Declaring a join with the same id again (a re-run cell) replaces it: give two joins that
        share a reducer their own `node_id`.
        """
        j = self._decl.join(
            reducer,
            initial=initial,
            initial_factory=initial_factory,
            node_id=node_id,
            parent_fork_id=parent_fork_id,
            preferred_parent_fork=preferred_parent_fork,
        )
        self.changed()
        return j

    def edge_from(self, *sources: Any) -> EdgePathBuilder[Any, Any, Any]:
        """Start an edge, as `GraphBuilder.edge_from`: `.label()`, `.map()`, `.transform()`, `.broadcast()`, `.to()`."""
        return self._decl.edge_from(*sources)

    def add(self, *edges: EdgePath[Any, Any]) -> None:
        """Add edges; an edge added again (the same sources and path) replaces the old one."""
        self._decl.add(edges)
        self.changed()

    def add_edge(self, source: Any, destination: Any, *, label: str | None = None) -> None:
        """One plain edge, as `GraphBuilder.add_edge`."""
        b = self.edge_from(source)
        self.add((b.label(label) if label is not None else b).to(destination))

    def add_mapping_edge(
        self,
        source: Any,
        map_to: Any,
        *,
        pre_map_label: str | None = None,
        post_map_label: str | None = None,
        downstream_join_id: str | None = None,
    ) -> None:
        """An edge that maps an iterable over parallel branches, as `GraphBuilder.add_mapping_edge`."""
        b = self.edge_from(source)
        if pre_map_label is not None:
            b = b.label(pre_map_label)
        b = b.map(downstream_join_id=JoinID(downstream_join_id) if downstream_join_id is not None else None)
        if post_map_label is not None:
            b = b.label(post_map_label)
        self.add(b.to(map_to))

    def decision(self, *, note: str | None = None, node_id: str | None = None) -> Decision[Any, Any, Any]:
        """A decision node to route by the value's type, as `GraphBuilder.decision` (use `g.match(...)`)."""
        return _scratch().decision(note=note, node_id=node_id)

    def match(self, source: Any, *, matches: Callable[[Any], bool] | None = None) -> Any:
        """A decision branch for values of type `source`, as `GraphBuilder.match`."""
        return _scratch().match(source, matches=matches)

    def match_node(
        self, source: type[BaseNode[Any, Any, Any]], *, matches: Callable[[Any], bool] | None = None
    ) -> Any:
        """A decision branch for a node class, as `GraphBuilder.match_node`."""
        return _scratch().match_node(source, matches=matches)

    @property
    def starts_from_inputs(self) -> bool:
        """True when declared with steps and edges: `g.start(inputs=...)` begins at the start node."""
        return self._decl.active

    @property
    def edges(self) -> list[str]:
        """The declared edges' keys (`g.remove("edge " + key)` drops one)."""
        return list(self._decl.edges)

    @property
    def steps(self) -> dict[str, Step[Any, Any, Any, Any]]:
        """The declared steps by id."""
        return dict(self._decl.steps)

    @property
    def joins(self) -> dict[str, Join[Any, Any, Any, Any]]:
        """The declared joins by id."""
        return dict(self._decl.joins)

    @property
    def gate_steps(self) -> frozenset[str]:
        """The ids of the steps declared `@g.step(gate=True)`: consent gates."""
        return frozenset(self._decl.gates)


def _scratch() -> GraphBuilder[Any, Any, Any, Any]:
    """A builder only for its node factories (decision, match): they keep no builder state."""
    return GraphBuilder(auto_instrument=False)


def pin_native(g: LabGraph, native: Graph[Any, Any, Any, Any]) -> Any:
    """The `BuiltGraph` of `native` under `g`'s name: manifest, codec and revision, as `lab.adopt` makes them."""
    from .native_read import read_native

    return read_native(_NativeView(g, native))


class _NativeView:
    """What adopt's reader asks of a graph handle: its lab, name, native graph and types."""

    def __init__(self, g: LabGraph, native: Graph[Any, Any, Any, Any]):
        self.lab, self.name, self.native = g.lab, g.name, native
        self.state_type, self.deps_type = g.state_type, g.deps_type
        self.model = g.model
        self.gate_steps = g.gate_steps
        self.namespace: dict[str, Any] = {}  # hints resolve through each function's own module


def start_entry(g: LabGraph, built: Any, inputs: Any) -> Any:
    """The first pending task of a step-style graph: its start node with `inputs`, checked against the input type."""
    from .engine.tasks import TaskInput
    from .errors import StateContractError
    from .native_read import START

    entry: Any = TaskInput(START, inputs)
    if built.manifest.engine == "superstep":  # a parallel graph's first task carries its fork stack
        from .engine.superstep import entry_task

        entry = entry_task(START, inputs)
    try:
        built.codec.encode_node(entry)
    except StateContractError as exc:
        raise StateContractError(
            f"graph {g.name!r} starts from inputs of type {getattr(g.input_type, '__qualname__', g.input_type)!r}; "
            f"start(inputs=...) got {inputs!r}, which does not fit ({exc}); declare lab.graph(..., input_type=...)"
        ) from None
    return entry
