"""Reading a built pydantic-graph `Graph` into a pinned revision (`BuiltGraph`): stations, edges, codec.

`lab.adopt` reads a graph built with `GraphBuilder` this way, and a graph declared with steps
and edges (`lab.builder`) is read exactly so once its declarations are replayed into a builder.
Both import this module; it imports neither (see lab.adopt for the checkpoint contract of steps).
"""

from __future__ import annotations

import builtins
import hashlib
import inspect
import sys
import typing
from types import NoneType
from typing import Any, get_args

from pydantic_graph import Graph
from pydantic_graph.decision import Decision
from pydantic_graph.join import Join
from pydantic_graph.node import EndNode, Fork, StartNode
from pydantic_graph.paths import DestinationMarker, Path, TransformMarker
from pydantic_graph.step import NodeStep, Step
from pydantic_graph.util import unpack_type_expression

from .built import BuiltGraph, qualname, station_kind
from .codec import InputCodec, NodeCodec, SnapshotCodec
from .engine.blocking import unthreaded
from .errors import GraphDefinitionError, StateContractError
from .manifest import Manifest, Station, source_fingerprint
from .type_hints import NO_ANNOTATION, annotation, graph_names

__all__ = ("START", "END_NODE", "read_native", "check_native", "none_to_none", "type_name")

START = StartNode.id
"""The node id of a native graph's start node."""
END_NODE = EndNode.id
"""The node id of a native graph's end node."""


def check_native(native: Any) -> Graph[Any, Any, Any, Any]:
    """`native` if it is a built `Graph`, else an error saying how to get one."""
    if not isinstance(native, Graph):
        hint = ""
        if hasattr(native, "build") and callable(native.build):
            hint = " (this looks like a GraphBuilder: call .build() on it first)"
        raise GraphDefinitionError(
            f"lab.adopt needs a built pydantic-graph Graph (GraphBuilder(...).build()), got "
            f"{type(native).__qualname__}{hint}"
        )
    return native


def none_to_none(tp: Any) -> Any:
    """None for a missing type (None or NoneType), else the type."""
    return None if tp in (None, NoneType) else tp


def type_name(tp: Any) -> str:
    """A type's name for a message."""
    return getattr(tp, "__qualname__", None) or repr(tp)


def _destinations(path: Path) -> list[str]:
    return [item.destination_id for item in path.items if isinstance(item, DestinationMarker)]


def read_native(g: Any) -> BuiltGraph:
    """Pin `g.native` under `g.name` in `g.lab`'s store: manifest, snapshot codec, revision.

    `g` has `lab`, `name`, `native`, `state_type`, `deps_type`, optionally `model` and `namespace`
    (the names where the graph was built, to resolve its type hints).
    """
    native = g.native
    nodes = native.nodes
    model = getattr(g, "model", None) == "superstep"  # a superstep-model graph steps frontiers, inputs None
    parallel = model or any(isinstance(n, (Fork, Join)) for n in nodes.values())
    types = _Types(native, getattr(g, "namespace", {}))
    synthetic = _synthetic_decisions(native)
    edges = _edges(native, synthetic)
    stations: list[Station] = []
    node_classes: dict[str, Any] = {}
    inputs: dict[str, Any] = {
        START: InputCodec(START, native.input_type, what="the graph's start (its input type)"),
        END_NODE: InputCodec(END_NODE, native.output_type, what="the graph's end (its output type)"),
    }
    for nid, node in nodes.items():
        if nid in (START, END_NODE) or nid in synthetic:
            continue
        if isinstance(node, NodeStep):
            cls = node.node_type
            node_classes[nid] = cls
            codec = inputs[nid] = NodeCodec(nid, cls, localns=types.namespace_of(cls))
            fields = tuple(codec.fields)
            stations.append(Station(nid, station_kind(cls), cls.__qualname__, fields, source_fingerprint(cls)))
        elif isinstance(node, Step):
            fn = node.call
            inputs[nid] = InputCodec(nid, type(None) if model else types.step_input(nid, fn), what="step")
            node_classes[nid] = fn
            kind = "gate" if nid in getattr(g, "gate_steps", ()) else "step"  # @g.step(gate=True) asks consent()
            stations.append(Station(nid, kind, getattr(fn, "__qualname__", nid), ("inputs",), source_fingerprint(fn)))
        elif isinstance(node, Decision):
            if not parallel:  # the super-step engine routes through decisions; they are never pending
                inputs[nid] = InputCodec(nid, _decision_input_type(native, types, nid, node), what="decision")
                node_classes[nid] = node
            stations.append(Station(nid, "decision", nid, ("inputs",), _decision_fingerprint(node)))
        elif isinstance(node, Fork):
            kind = "map" if node.is_map else "broadcast"
            stations.append(Station(nid, kind, nid, (), hashlib.sha256(f"{kind}:{node.downstream_join_id}".encode()).hexdigest()[:16]))
        elif isinstance(node, Join):
            inputs[nid] = InputCodec(nid, types.join_value(nid, node), what="join", field="value")
            node_classes[nid] = node
            stations.append(Station(nid, "join", _reducer_name(node), ("value",), source_fingerprint(node.reducer)))
    codec = SnapshotCodec(
        state_type=g.state_type, output_type=native.output_type, nodes=node_classes, inputs=inputs
    )
    schema_id = hashlib.sha256(codec.schema_id().encode()).hexdigest()[:16]
    manifest = Manifest(
        key=g.name,
        stations=tuple(stations),
        edges=tuple(sorted(edges)),
        schema_id=schema_id,
        state_type=qualname(g.state_type),
        engine="superstep" if parallel else "serial",
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


def _reducer_name(join: Join[Any, Any, Any, Any]) -> str:
    reducer = join.reducer
    return getattr(reducer, "__qualname__", None) or type(reducer).__qualname__


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
_BUILTINS = frozenset(vars(builtins))


def _unknown(tp: Any) -> bool:
    return tp is None or tp in _UNKNOWN or isinstance(tp, typing.TypeVar)


def _union(types: list[Any]) -> Any:
    uniq = list(dict.fromkeys(types))
    return uniq[0] if len(uniq) == 1 else typing.Union[tuple(uniq)]  # noqa: UP007


class _Types:
    """Resolves the types a graph's values have on its edges, to checkpoint each pending value."""

    def __init__(self, native: Graph[Any, Any, Any, Any], namespace: dict[str, Any]):
        self.native = native
        known: dict[str, Any] = {}
        for tp in (native.state_type, native.deps_type, native.input_type, native.output_type):
            if inspect.isclass(tp) and typing.get_origin(tp) is None and tp.__module__ != "builtins":
                known[tp.__name__] = tp
        for node in native.nodes.values():
            if isinstance(node, NodeStep):
                known[node.node_type.__name__] = node.node_type
        self.namespace = {**graph_names(native), **known, **namespace}

    def namespace_of(self, obj: Any) -> dict[str, Any]:
        """Names for `obj`'s hints: its closure, then the building frames — never shadowing its module."""
        fn = unthreaded(getattr(obj, "__func__", obj))
        extra: dict[str, Any] = {}
        if inspect.isfunction(fn):
            module = fn.__globals__
            try:
                extra = dict(inspect.getclosurevars(fn).nonlocals)
            except (TypeError, ValueError):
                extra = {}
        else:
            mod = sys.modules.get(getattr(obj, "__module__", ""), None)
            module = vars(mod) if mod is not None else {}
        return {**{k: v for k, v in self.namespace.items() if k not in module and k not in _BUILTINS}, **extra}

    def hint(self, fn: Any, name: str) -> Any:
        """`fn`'s annotation of `name` alone (lab.type_hints): one the lab does not read never stops it."""
        fn = unthreaded(getattr(fn, "__func__", fn))  # a blocking station's function is wrapped (lab.engine.blocking)
        found = annotation(fn, name, self.namespace_of(fn))
        return None if found is NO_ANNOTATION else found

    def returns(self, fn: Any) -> Any:
        try:
            return self.hint(fn, "return")
        except Exception:
            return None

    def declared_input(self, step_id: str, fn: Any) -> Any:
        """`InputT` of the step's `ctx: StepContext[State, Deps, InputT]` annotation, or None."""
        params = list(inspect.signature(fn).parameters.values())
        if not params:
            return None
        try:
            ann = self.hint(fn, params[0].name)
        except Exception as exc:
            raise StateContractError(
                f"step {step_id}: cannot resolve its StepContext[...] annotation ({exc}); make that name importable "
                "from the step's module, or adopt the graph in the function that builds it"
            ) from exc
        args = get_args(ann) if ann is not None else ()
        return args[2] if len(args) == 3 else None

    def step_input(self, step_id: str, fn: Any) -> Any:
        """`InputT` of the step's `ctx: StepContext[State, Deps, InputT]`, else what feeds it, else Any."""
        declared = self.declared_input(step_id, fn)
        if not _unknown(declared):
            return declared
        fed = self.fed(step_id)
        # Unknown all the way back: checkpoint the value as JSON and check each one reads back equal.
        return _union(fed) if fed is not None else Any

    def fed(self, nid: str, seen: frozenset[str] = frozenset()) -> list[Any] | None:
        """The types of the values that flow into `nid`, from what feeds it; None if one is unknown."""
        if nid in seen:
            return None
        seen = seen | {nid}
        out: list[Any] = []
        for src, paths in self.native.edges_by_source.items():
            for path in paths:
                if nid not in _destinations(path):
                    continue
                tp = self._after_path(path, self.output(src, seen))
                if _unknown(tp):
                    return None
                out.append(tp)
        for dec_id, node in self.native.nodes.items():
            if isinstance(node, Decision):
                for b in node.branches:
                    if nid in _destinations(b.path):
                        tp = self._branch_type(dec_id, b, seen)
                        if _unknown(tp):
                            return None
                        out.append(tp)
        return out or None

    def _branch_type(self, decision_id: str, branch: Any, seen: frozenset[str]) -> Any:
        """What a decision branch passes on: its matched type, or (for object/Any) what feeds the decision."""
        src = unpack_type_expression(branch.source)
        if _unknown(src):
            dec = self.fed(decision_id, seen)
            if dec is None:
                return None
            src = _union(dec)
        return self._after_path(branch.path, src)

    def _after_path(self, path: Path, tp: Any) -> Any:
        for item in path.items:
            if isinstance(item, TransformMarker):
                tp = self.returns(item.transform)
        return tp

    def output(self, src: str, seen: frozenset[str] = frozenset()) -> Any:
        """The type of the value `src` sends along its edges."""
        node = self.native.nodes.get(src)
        if src == START:
            return self.native.input_type
        if isinstance(node, NodeStep):
            return None
        if isinstance(node, Step):
            return self.returns(node.call)
        if isinstance(node, Join):
            return self.join_value(src, node, seen)
        if isinstance(node, Fork):
            fed = self.fed(src, seen)
            if fed is None:
                return None
            whole = _union(fed)
            return _element_type(whole) if node.is_map else whole
        return None

    def join_value(self, nid: str, join: Join[Any, Any, Any, Any], seen: frozenset[str] = frozenset()) -> Any:
        """The type of a join's accumulated value: its factory's type, its hint, or what it feeds."""
        factory = join.initial_factory
        if inspect.isclass(factory) or typing.get_origin(factory) is not None:
            return factory
        tp = self.returns(factory)
        if not _unknown(tp):
            return tp
        tp = self.returns(join.reducer)
        if not _unknown(tp) and not _has_typevars(tp):
            return tp
        for path in self.native.edges_by_source.get(nid, []):
            if any(isinstance(i, TransformMarker) for i in path.items):
                continue
            for dst in _destinations(path):
                node = self.native.nodes.get(dst)
                if dst == END_NODE:
                    return self.native.output_type
                if isinstance(node, Step) and not isinstance(node, NodeStep):
                    try:
                        declared = self.declared_input(dst, node.call)
                    except StateContractError:
                        declared = None
                    if not _unknown(declared):
                        return declared
        try:
            return type(factory())
        except Exception:
            return Any


def _has_typevars(tp: Any) -> bool:
    if isinstance(tp, typing.TypeVar):
        return True
    return any(_has_typevars(a) for a in get_args(tp))


def _element_type(tp: Any) -> Any:
    args = get_args(tp)
    origin = typing.get_origin(tp)
    if origin is None or not args:
        return None
    if origin in (dict, typing.Mapping) or (inspect.isclass(origin) and issubclass(origin, dict)):
        return args[0]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    if origin is tuple:
        return _union(list(args))
    return args[0]


def _decision_input_type(native: Graph[Any, Any, Any, Any], types: _Types, nid: str, node: Decision[Any, Any, Any]) -> Any:
    fed = types.fed(nid)
    if fed is not None:
        return _union(fed)
    sources = [unpack_type_expression(b.source) for b in node.branches]
    if sources and not any(_unknown(s) for s in sources):
        return _union(sources)
    return Any  # checkpointed as JSON; each value is checked to read back equal


def _decision_fingerprint(node: Decision[Any, Any, Any]) -> str:
    parts = [node.note or ""]
    for b in node.branches:
        parts.append(repr(unpack_type_expression(b.source)))
        parts.append(source_fingerprint(b.matches) if b.matches is not None else "")
        parts.append(",".join(_destinations(b.path)))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


