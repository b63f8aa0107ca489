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

import hashlib
import inspect
import typing
from collections.abc import Callable, Sequence
from types import NoneType
from typing import TYPE_CHECKING, Any, get_args, get_type_hints

from pydantic_graph import Graph
from pydantic_graph.decision import Decision
from pydantic_graph.node import EndNode, StartNode
from pydantic_graph.paths import DestinationMarker, Path
from pydantic_graph.step import NodeStep, Step
from pydantic_graph.util import unpack_type_expression

from .codec import InputCodec, NodeCodec, SnapshotCodec
from .engine.tasks import TaskInput
from .errors import GraphDefinitionError, StateContractError
from .graph import BuiltGraph, Drawable, _is_gate, _qualname, check_serial_topology, start_run
from .manifest import Manifest, Station, check_key, source_fingerprint
from .records import Durability

if TYPE_CHECKING:
    from .lab import Lab
    from .run import Run

__all__ = ("AdoptedGraph", "START")

START = StartNode.id
END_NODE = EndNode.id


class AdoptedGraph(Drawable):
    """The lab's handle on a native `Graph`: the same run API as a lab-declared graph."""

    def __init__(self, lab: Lab, name: str, native: Graph[Any, Any, Any, Any]):
        self.lab = lab
        self.name = check_key(name)
        self._native = _check_graph(native)
        self._built: BuiltGraph | None = None
        self._listeners: list[Callable[[Any], None]] = []

    # -- what it is ------------------------------------------------------------------------

    @property
    def native(self) -> Graph[Any, Any, Any, Any]:
        return self._native

    @property
    def state_type(self) -> Any:
        return _none_to_none(self._native.state_type)

    @property
    def deps_type(self) -> Any:
        return _none_to_none(self._native.deps_type)

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

    def replace(self, native: Graph[Any, Any, Any, Any]) -> None:
        """Adopt a rebuilt graph under the same name: a changed graph is a new revision."""
        self._native = _check_graph(native)
        self._built = None
        for cb in list(self._listeners):
            cb(self)

    def on_change(self, callback: Callable[[Any], None]) -> None:
        self._listeners.append(callback)

    def build(self) -> BuiltGraph:
        if self._built is None:
            self._built = _build(self)
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
    ) -> Run:
        """Create a run that begins at the graph's start node with `inputs` (as `Graph.run` does).

        Passing a `BaseNode` instance of the graph instead starts the run at that node.
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
        else:
            entry = TaskInput(START, inputs)
            try:
                built.codec.encode_node(entry)
            except StateContractError as exc:
                raise StateContractError(
                    f"graph {self.name!r} starts from inputs of type {_type_name(self.input_type)}; "
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
        )

    def __repr__(self) -> str:
        return f"<AdoptedGraph {self.name!r} stations={list(self.build().manifest.station_ids)}>"


# -- reading the built graph ------------------------------------------------------------------


def _check_graph(native: Any) -> Graph[Any, Any, Any, Any]:
    if not isinstance(native, Graph):
        hint = ""
        if hasattr(native, "build") and callable(native.build):
            hint = " (this looks like a GraphBuilder: call .build() on it first)"
        raise GraphDefinitionError(
            f"lab.adopt needs a built pydantic-graph Graph (GraphBuilder(...).build()), got "
            f"{type(native).__qualname__}{hint}"
        )
    return native


def _none_to_none(tp: Any) -> Any:
    return None if tp in (None, NoneType) else tp


def _type_name(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


def _destinations(path: Path) -> list[str]:
    return [item.destination_id for item in path.items if isinstance(item, DestinationMarker)]


def _build(g: AdoptedGraph) -> BuiltGraph:
    native = g.native
    check_serial_topology(native)
    nodes = native.nodes
    synthetic = _synthetic_decisions(native)
    edges = _edges(native, synthetic)
    stations: list[Station] = []
    node_classes: dict[str, Any] = {}
    inputs: dict[str, InputCodec] = {
        START: InputCodec(START, native.input_type, what="the graph's start (its input type)"),
        END_NODE: InputCodec(END_NODE, native.output_type, what="the graph's end (its output type)"),
    }
    for nid, node in nodes.items():
        if nid in (START, END_NODE) or nid in synthetic:
            continue
        if isinstance(node, NodeStep):
            cls = node.node_type
            node_classes[nid] = cls
            fields = tuple(NodeCodec(nid, cls).fields)
            stations.append(Station(nid, "gate" if _is_gate(cls) else "node", cls.__qualname__, fields, source_fingerprint(cls)))
        elif isinstance(node, Step):
            fn = node.call
            inputs[nid] = InputCodec(nid, _step_input_type(native, nid, fn), what="step")
            node_classes[nid] = fn
            stations.append(Station(nid, "step", getattr(fn, "__qualname__", nid), ("inputs",), source_fingerprint(fn)))
        elif isinstance(node, Decision):
            inputs[nid] = InputCodec(nid, _decision_input_type(native, nid, node), what="decision")
            node_classes[nid] = node
            stations.append(Station(nid, "decision", nid, ("inputs",), _decision_fingerprint(node)))
    codec = SnapshotCodec(
        state_type=g.state_type, output_type=native.output_type, nodes=node_classes, inputs=inputs
    )
    schema_id = hashlib.sha256(codec.schema_id().encode()).hexdigest()[:16]
    manifest = Manifest(
        key=g.name,
        stations=tuple(stations),
        edges=tuple(sorted(edges)),
        schema_id=schema_id,
        state_type=_qualname(g.state_type),
        engine="serial",
    )
    revision = g.lab.store.register_graph(manifest)
    return BuiltGraph(
        key=g.name,
        native=native,
        manifest=manifest.with_revision(revision),
        codec=codec,
        nodes={nid: c for nid, c in node_classes.items() if inspect.isclass(c)},
        state_type=g.state_type,
        deps_type=g.deps_type,
        output_type=native.output_type,
    )


def _edges(native: Graph[Any, Any, Any, Any], synthetic: set[str]) -> set[tuple[str, str]]:
    """Permitted transitions; a `BaseNode`'s go straight to the nodes its return hint names."""
    nodes = native.nodes
    edges: set[tuple[str, str]] = set()

    def resolve(dst: str, seen: frozenset[str] = frozenset()) -> list[str]:
        if dst in synthetic and dst not in seen:
            return [f for b in nodes[dst].branches for d in _destinations(b.path) for f in resolve(d, seen | {dst})]
        return [dst]

    for src, paths in native.edges_by_source.items():
        if src in synthetic:
            continue
        for path in paths:
            for dst in _destinations(path):
                for final in resolve(dst) if isinstance(nodes.get(src), NodeStep) else [dst]:
                    edges.add((src, final))
    for nid, node in nodes.items():
        if isinstance(node, Decision) and nid not in synthetic:
            edges.update((nid, dst) for branch in node.branches for dst in _destinations(branch.path))
    return edges


def _synthetic_decisions(native: Graph[Any, Any, Any, Any]) -> set[str]:
    """Decisions only `BaseNode` stations lead to: `GraphBuilder.node`'s routing of a union hint."""
    incoming: dict[str, set[str]] = {}
    for src, paths in native.edges_by_source.items():
        for path in paths:
            for dst in _destinations(path):
                incoming.setdefault(dst, set()).add(src)
    out = set()
    for nid, node in native.nodes.items():
        sources = incoming.get(nid, set())
        if isinstance(node, Decision) and sources and all(isinstance(native.nodes.get(s), NodeStep) for s in sources):
            out.add(nid)
    return out


_UNKNOWN = (Any, object)


def _unknown(tp: Any) -> bool:
    return tp is None or tp in _UNKNOWN or isinstance(tp, typing.TypeVar)


def _union(types: list[Any]) -> Any:
    uniq = list(dict.fromkeys(types))
    return uniq[0] if len(uniq) == 1 else typing.Union[tuple(uniq)]  # noqa: UP007


def _fed_types(native: Graph[Any, Any, Any, Any], nid: str) -> list[Any] | None:
    """The types of the values that flow into `nid`, from what feeds it; None if one is unknown."""
    out: list[Any] = []
    for src, paths in native.edges_by_source.items():
        if not any(nid in _destinations(p) for p in paths):
            continue
        node = native.nodes.get(src)
        if src == START:
            out.append(native.input_type)
        elif isinstance(node, Step) and not isinstance(node, NodeStep):
            out.append(_return_type(node.call))
        else:
            return None
    for node in native.nodes.values():
        if isinstance(node, Decision):
            for b in node.branches:
                if nid in _destinations(b.path):
                    out.append(unpack_type_expression(b.source))
    return None if not out or any(_unknown(t) for t in out) else out


def _return_type(fn: Any) -> Any:
    try:
        return get_type_hints(fn).get("return")
    except Exception:
        return None


def _step_input_type(native: Graph[Any, Any, Any, Any], step_id: str, fn: Any) -> Any:
    """`InputT` of the step's `ctx: StepContext[State, Deps, InputT]`, else what feeds it, else a refusal."""
    params = list(inspect.signature(fn).parameters.values())
    try:
        hints = get_type_hints(fn, include_extras=False)
    except Exception as exc:
        raise StateContractError(
            f"step {step_id}: cannot resolve its annotations ({exc}); make the StepContext[...] annotation "
            "importable from the step's module"
        ) from exc
    ann = hints.get(params[0].name) if params else None
    args = get_args(ann) if ann is not None else ()
    declared = args[2] if len(args) == 3 else None
    if not _unknown(declared):
        return declared
    fed = _fed_types(native, step_id)
    if fed is not None:
        return _union(fed)
    what = f"declares its input as {declared!r}" if declared is not None else "has no `ctx: StepContext[State, Deps, Input]` annotation"
    raise StateContractError(
        f"step {step_id} {what} and what feeds it has no declared type either, so the lab cannot checkpoint its "
        "input; declare a concrete, JSON-friendly input type in StepContext[State, Deps, Input]"
    )


def _decision_input_type(native: Graph[Any, Any, Any, Any], nid: str, node: Decision[Any, Any, Any]) -> Any:
    fed = _fed_types(native, nid)
    if fed is not None:
        return _union(fed)
    sources = [unpack_type_expression(b.source) for b in node.branches]
    if sources and not any(_unknown(s) for s in sources):
        return _union(sources)
    raise StateContractError(
        f"decision {nid} matches on Any/object and what feeds it declares no type, so the lab cannot checkpoint "
        "its input; give its branches concrete types (g.match(SomeType, ...)) or annotate the return type of "
        "the step before it"
    )


def _decision_fingerprint(node: Decision[Any, Any, Any]) -> str:
    parts = [node.note or ""]
    for b in node.branches:
        parts.append(repr(unpack_type_expression(b.source)))
        parts.append(source_fingerprint(b.matches) if b.matches is not None else "")
        parts.append(",".join(_destinations(b.path)))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


