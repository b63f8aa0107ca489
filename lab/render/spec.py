"""What a drawing shows: stations, start, end and edges, read from a manifest or from declarations.

A `GraphSpec` is the pure input of every renderer (DOT, SVG layout, Mermaid). It comes from a
pinned `Manifest`, or, while a graph cannot build yet (a return hint names a node that is not
declared), from the declared node classes alone: the undeclared targets become `missing` nodes.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from ..built import station_kind
from ..edge_style import DASHED, DashedEdge
from ..manifest import END, Manifest
from ..type_hints import return_hint, union_args

if TYPE_CHECKING:
    from ..graph import LabGraph

__all__ = (
    "START",
    "END",
    "NodeKind",
    "FORK_KINDS",
    "drawn_kind",
    "SpecNode",
    "SpecEdge",
    "GraphSpec",
    "spec_from_manifest",
    "spec_from_declarations",
    "DASHED",
    "EdgeLabel",
)

START = "__start__"
"""The drawing's start point (not a station): edges from it go to the entry stations."""

NodeKind = Literal["start", "end", "node", "gate", "delegated", "step", "decision", "map", "broadcast", "join", "missing"]
"""What a drawn node is. `map` and `broadcast` are pydantic-graph's two forks (one input spread over
an iterable's items, or sent down every path), `join` gathers their branches with a reducer."""

FORK_KINDS: frozenset[str] = frozenset({"map", "broadcast"})

_STATION_KINDS: dict[str, NodeKind] = {
    "node": "node",
    "gate": "gate",
    "delegated": "delegated",
    "step": "step",
    "decision": "decision",
    "map": "map",
    "broadcast": "broadcast",
    "fork": "broadcast",  # a fork station names `map` or `broadcast` in its qualname
    "join": "join",
}


def drawn_kind(station_kind: str) -> NodeKind:
    """The drawing kind of a manifest station kind (an unknown kind draws as a plain node)."""
    return _STATION_KINDS.get(station_kind, "node")


@dataclass(frozen=True, slots=True)
class SpecNode:
    """One drawn node: a station, the start or end point, or a named-but-undeclared node."""

    id: str
    kind: NodeKind
    label: str


@dataclass(frozen=True, slots=True)
class SpecEdge:
    """A permitted transition, with an optional label (`End`, or a pydantic-graph `Edge(label=...)`)."""

    src: str
    dst: str
    label: str = ""
    dashed: bool = False
    """Drawn dashed: a fallback route (a workflow's default exit)."""


class EdgeLabel(str):
    """An edge label that also says how the edge is drawn (`dashed`); a plain `str` otherwise."""

    dashed: bool = True


@dataclass(frozen=True)
class GraphSpec:
    """Everything a renderer needs, and nothing it must not: no state, no run."""

    name: str
    nodes: tuple[SpecNode, ...]
    edges: tuple[SpecEdge, ...]
    revision: int | None = None
    caption: str = ""
    """A line under the drawing, e.g. why the graph cannot build yet."""
    source_digest: str = ""
    """The manifest digest this spec was read from ('' for declarations)."""
    _index: dict[str, SpecNode] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._index.update({n.id: n for n in self.nodes})

    def node(self, node_id: str) -> SpecNode | None:
        return self._index.get(node_id)

    @property
    def station_ids(self) -> tuple[str, ...]:
        return tuple(n.id for n in self.nodes if n.kind not in ("start", "end"))

    @property
    def digest(self) -> str:
        """A hash of everything drawn: the layout cache key."""
        body = {
            "name": self.name,
            "revision": self.revision,
            "caption": self.caption,
            "nodes": [[n.id, n.kind, n.label] for n in self.nodes],
            "edges": [[e.src, e.dst, e.label, *(["dashed"] if e.dashed else [])] for e in self.edges],
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]


def _entries(station_ids: list[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    """Stations nothing else leads to; else the first declared station (any station may start a run)."""
    targets = {dst for src, dst in edges if src != dst}
    entries = [s for s in station_ids if s not in targets]
    return entries or station_ids[:1]


def _assemble(
    name: str,
    stations: list[tuple[str, NodeKind]],
    edges: list[tuple[str, str]],
    labels: Mapping[tuple[str, str], str],
    *,
    missing: Iterable[str] = (),
    revision: int | None = None,
    caption: str = "",
    source_digest: str = "",
) -> GraphSpec:
    ids = [sid for sid, _ in stations]
    nodes = [SpecNode(START, "start", "start")]
    nodes += [SpecNode(sid, kind, sid) for sid, kind in stations]
    nodes += [SpecNode(m, "missing", m) for m in missing if m not in ids]
    edges = list(dict.fromkeys(edges))
    has_start = any(src == START for src, _ in edges)  # adopted graphs name their own start edges
    spec_edges = [] if has_start else [SpecEdge(START, e) for e in _entries(ids, edges)]
    has_end = False
    for src, dst in edges:
        has_end = has_end or dst == END
        label = labels.get((src, dst), "End" if dst == END else "")
        spec_edges.append(SpecEdge(src, dst, str(label), getattr(label, "dashed", False)))
    if has_end:
        nodes.append(SpecNode(END, "end", "End"))
    return GraphSpec(name, tuple(nodes), tuple(spec_edges), revision, caption, source_digest)


def spec_from_manifest(manifest: Manifest, labels: Mapping[tuple[str, str], str] | None = None) -> GraphSpec:
    """The drawing of a pinned revision; `labels` (from the declarations) name edges."""
    stations: list[tuple[str, NodeKind]] = [
        (s.node_id, drawn_kind(s.qualname if s.kind == "fork" and s.qualname in FORK_KINDS else s.kind))
        for s in manifest.stations
    ]
    return _assemble(
        manifest.key,
        stations,
        list(manifest.edges),
        labels or {},
        revision=manifest.revision,
        source_digest=manifest.digest,
    )


@dataclass(frozen=True)
class Declared:
    """A graph's declarations read without building: edges, edge labels, gates, missing targets."""

    stations: list[tuple[str, NodeKind]]
    edges: list[tuple[str, str]]
    labels: dict[tuple[str, str], str]
    missing: list[str]
    problems: list[str]


def read_declarations(graph: LabGraph) -> Declared:
    """Each declared node's return hint, resolved leniently: unknown names become missing nodes."""
    nodes = graph.nodes
    stations: list[tuple[str, NodeKind]] = []
    edges: list[tuple[str, str]] = []
    labels: dict[tuple[str, str], str] = {}
    missing: list[str] = []
    problems: list[str] = []
    for node_id, cls in nodes.items():
        kind = drawn_kind(station_kind(cls))  # a gate, a delegated agent station, or a node
        stations.append((node_id, kind))
        method = getattr(cls, "decide" if kind == "gate" else "run", None)
        for target, label in _targets(method, nodes, missing, problems, node_id):
            edges.append((node_id, target))
            if label:
                labels[(node_id, target)] = label
    return Declared(stations, list(dict.fromkeys(edges)), labels, missing, problems)


def spec_from_declarations(graph: LabGraph, *, caption: str = "") -> GraphSpec:
    """The drawing of a graph as declared now, buildable or not."""
    d = read_declarations(graph)
    if not caption and d.missing:
        caption = "missing: " + ", ".join(d.missing) + f" (declare with {graph.decorator})"
    return _assemble(graph.name, d.stations, d.edges, d.labels, missing=d.missing, caption=caption)


# -- reading return hints ------------------------------------------------------------------


def _targets(
    method: Any, nodes: dict[str, type], missing: list[str], problems: list[str], node_id: str
) -> list[tuple[str, str]]:
    from pydantic_graph import BaseNode, End
    from pydantic_graph.basenode import Edge

    localns: dict[str, Any] = dict(nodes)
    placeholders: dict[str, type] = {}
    for _ in range(64):  # one retry per undefined name
        try:
            hints = return_hint(method, localns)
            break
        except NameError as exc:
            name = getattr(exc, "name", None)
            if not name or name in localns:
                problems.append(f"{node_id}: {exc}")
                return []
            placeholders[name] = localns[name] = type(name, (), {"__graphlab_missing__": True})
    else:  # pragma: no cover - 64 undefined names in one hint
        return []
    if "return" not in hints:
        problems.append(f"{node_id} has no return hint")
        return []
    out: list[tuple[str, str]] = []
    for arg in union_args(hints["return"]):
        label = ""
        if get_origin(arg) is typing.Annotated:
            arg, *meta = get_args(arg)
            label = next((m.label for m in meta if isinstance(m, Edge) and m.label), "")
            if any(isinstance(m, DashedEdge) for m in meta):
                label = EdgeLabel(label)
        base = get_origin(arg) or arg
        if base is End:
            out.append((END, label))
        elif inspect.isclass(base) and getattr(base, "__graphlab_missing__", False):
            _add_missing(missing, base.__name__)
            out.append((base.__name__, label))
        elif inspect.isclass(base) and issubclass(base, BaseNode):
            target = base.get_node_id()
            if target not in nodes:
                _add_missing(missing, target)
            out.append((target, label))
        else:
            problems.append(f"{node_id}: return hint part {arg!r} is not a node")
    return out


def _add_missing(missing: list[str], name: str) -> None:
    if name not in missing:
        missing.append(name)
