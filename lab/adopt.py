"""Bring your own graph: a graph built with pydantic-graph's `GraphBuilder`, run in the lab unchanged.

`lab.adopt(graph, name=...)` reads the built graph's `nodes` and `edges_by_source` into a
manifest and a snapshot codec; the serial engine then steps every task the native iterator
yields, as for a lab-declared graph.

Stations are the native tasks: the start node, `BaseNode` stations, step functions, decisions
and the end node. Each is its own boundary in the history, so a checkpoint always names the
task pydantic-graph will run next, with its input. The decisions `GraphBuilder.node` adds for a
node's union return hint never run (a `BaseNode`'s return value routes directly), so they are
not stations; the node's edges go straight to the nodes its hint names.

The checkpoint contract for steps (seed 001 refuses steps for lack of one): a step's input is
checkpointed under the input type its `ctx: StepContext[State, Deps, Input]` annotation
declares, a decision's under the union of its branches' types (or the output types of the steps
that feed it), the start's under the graph's input type and the end's under its output type.
Each must round-trip through JSON; a step whose input type is missing, `Any`, or a live object
is refused when adopted, by name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic_graph import Graph

from .built import BuiltGraph, start_run
from .engine.superstep import entry_task
from .engine.tasks import TaskInput
from .errors import GraphDefinitionError, StateContractError
from .graph import Drawable
from .limits import DEFAULT_STEP_LIMIT, UNSET
from .manifest import Manifest, check_key
from .native_read import END_NODE, START, check_native, none_to_none, read_native, type_name
from .records import Durability
from .retry import Retry, StationPolicies

if TYPE_CHECKING:
    from .lab import Lab
    from .run import Run

__all__ = ("AdoptedGraph", "START", "END_NODE", "caller_namespace")


class AdoptedGraph(Drawable, StationPolicies):
    """The lab's handle on a native `Graph`: the same run API as a lab-declared graph."""

    def __init__(self, lab: Lab, name: str, native: Graph[Any, Any, Any, Any], namespace: dict[str, Any] | None = None):
        self.lab = lab
        self.name = check_key(name)
        self._native = check_native(native)
        self.namespace = dict(namespace or {})
        """Names visible where the graph was built (its frame's locals), to resolve type hints."""
        self._built: BuiltGraph | None = None
        self._listeners: list[Callable[[Any], None]] = []
        self.step_limit: int | None = DEFAULT_STEP_LIMIT
        """Steps one `run.run()` call of this graph's new runs may take (None: no limit); see lab.limits."""
        self.retry_policies: dict[str, Retry] = {}
        self.node_timeouts: dict[str, float] = {}

    # -- what it is ------------------------------------------------------------------------

    @property
    def native(self) -> Graph[Any, Any, Any, Any]:
        return self._native

    @property
    def state_type(self) -> Any:
        return none_to_none(self._native.state_type)

    @property
    def deps_type(self) -> Any:
        return none_to_none(self._native.deps_type)

    @property
    def input_type(self) -> Any:
        return self._native.input_type

    @property
    def output_type(self) -> Any:
        return self._native.output_type

    @property
    def nodes(self) -> dict[str, Any]:
        """The stations by id: `BaseNode` classes, step functions and decisions."""
        return dict(self.build().nodes)

    def replace(self, native: Graph[Any, Any, Any, Any], namespace: dict[str, Any] | None = None) -> None:
        """Adopt a rebuilt graph under the same name: a changed graph is a new revision."""
        self._native = check_native(native)
        if namespace is not None:
            self.namespace = dict(namespace)
        self._built = None
        for cb in list(self._listeners):
            cb(self)

    def on_change(self, callback: Callable[[Any], None]) -> None:
        self._listeners.append(callback)

    def _policy_stations(self) -> Any:
        return self.build().manifest.station_ids

    def _station_object(self, node_id: str) -> Any:
        return self._native.nodes.get(node_id)  # type: ignore[call-overload]

    def build(self) -> BuiltGraph:
        if self._built is None:
            self._built = read_native(self)
        return self._built

    @property
    def manifest(self) -> Manifest:
        return self.build().manifest

    @property
    def revision(self) -> int:
        return self.build().revision

    # -- running -----------------------------------------------------------------------------

    def start(
        self,
        node: Any = None,
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
        total_step_limit: int | None = None,
        at_any_station: bool = True,
    ) -> Run:
        """Create a run that begins at the graph's start node with `inputs` (as `Graph.run` does).

        Passing a `BaseNode` instance of the graph instead starts the run at that node: naming the
        node is the request to start there, so `at_any_station` (accepted, as on a declared graph)
        changes nothing (docs/seed-differences.md). `tags`
        (JSON) ride in the run's `started` event, as for a declared graph (`lab.map` tags a batch).
        """
        built = self.build()
        if node is not None:
            node_id = type(node).get_node_id() if hasattr(type(node), "get_node_id") else None
            if node_id is None or node_id not in built.nodes or not isinstance(node, built.nodes[node_id]):
                raise GraphDefinitionError(
                    f"start(node) needs an instance of one of the graph's BaseNode stations, got {node!r}; "
                    "or call start(inputs=...) to begin at the start node"
                )
            entry: Any = node
            if built.manifest.engine == "superstep":
                entry = entry_task(node_id, node)
        else:
            entry = TaskInput(START, inputs)
            if built.manifest.engine == "superstep":
                entry = entry_task(START, inputs)
            try:
                built.codec.encode_node(entry)
            except StateContractError as exc:
                raise StateContractError(
                    f"graph {self.name!r} starts from inputs of type {type_name(self.input_type)}; "
                    f"start(inputs=...) got {inputs!r}, which does not fit ({exc})"
                ) from None
        return start_run(
            self,
            built,
            entry,
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

    def __repr__(self) -> str:
        return f"<AdoptedGraph {self.name!r} stations={list(self.build().manifest.station_ids)}>"


def caller_namespace(depth: int = 2, frames: int = 4) -> dict[str, Any]:
    """The locals of the frames calling `lab.adopt`, innermost last: where the graph was built.

    pydantic-graph resolves a node's hints with the building frame's locals, so a state or deps
    class defined inside the function that builds the graph is found; the lab does the same.
    """
    out: dict[str, Any] = {}
    frame = inspect.currentframe()
    try:
        for _ in range(depth):
            frame = frame.f_back if frame is not None else None
        chain = []
        while frame is not None and len(chain) < frames:
            chain.append(frame.f_locals)
            frame = frame.f_back
        for scope in reversed(chain):
            out.update(scope)
    finally:
        del frame
    return out
