"""Reading a built pydantic-graph `Graph` for drawing: node kinds and edge labels, as its Mermaid does.

pydantic-graph's own `Graph.render()` draws a fork (`map` or `broadcast`) and a join as nodes of
their own and labels an edge with the last `.label(...)` on its path. `native_labels` reads those
labels so a drawing from a pinned manifest names the same edges; `spec_from_native` draws a graph
straight from its native nodes and paths (a declared graph that builds natively but is not pinned
yet). Pure reading: nothing here runs a graph or touches a store.
"""

from __future__ import annotations

from typing import Any

from pydantic_graph import Graph
from pydantic_graph.decision import Decision
from pydantic_graph.join import Join
from pydantic_graph.node import EndNode, Fork, StartNode
from pydantic_graph.paths import DestinationMarker, LabelMarker, Path
from pydantic_graph.step import NodeStep, Step

from ..built import station_kind
from .spec import END, START, GraphSpec, NodeKind, SpecEdge, SpecNode, drawn_kind

__all__ = ("native_kind", "native_edges", "native_labels", "spec_from_native")


def native_kind(node: Any) -> NodeKind:
    """The drawing kind of one native node (a fork is `map` or `broadcast`, as native Mermaid says)."""
    if isinstance(node, StartNode):
        return "start"
    if isinstance(node, EndNode):
        return "end"
    if isinstance(node, Fork):
        return "map" if node.is_map else "broadcast"
    if isinstance(node, Join):
        return "missing" if getattr(node.reducer, "__graphlab_missing__", False) else "join"
    if isinstance(node, Decision):
        return "decision"
    if isinstance(node, NodeStep):  # a node class: a gate, a delegated agent station, or a node
        return drawn_kind(station_kind(node.node_type))
    if isinstance(node, Step):
        return "missing" if getattr(node.call, "__graphlab_missing__", False) else "step"
    return "node"


def _path_edges(src: str, path: Path) -> list[tuple[str, str, str]]:
    """(src, dst, label) per destination of one path; the label is the last `.label()` before it."""
    out: list[tuple[str, str, str]] = []
    label = ""
    for item in path.items:
        if isinstance(item, LabelMarker):
            label = item.label
        elif isinstance(item, DestinationMarker):
            out.append((src, item.destination_id, label))
    return out


def native_edges(native: Graph[Any, Any, Any, Any]) -> list[tuple[str, str, str]]:
    """Every edge of the built graph with its label: the paths from each source, then decision branches."""
    out: list[tuple[str, str, str]] = []
    for src, paths in native.edges_by_source.items():
        for path in paths:
            out += _path_edges(src, path)
    for nid, node in native.nodes.items():
        if isinstance(node, Decision):
            for branch in node.branches:
                out += _path_edges(nid, branch.path)
    return list(dict.fromkeys(out))


def native_labels(native: Graph[Any, Any, Any, Any]) -> dict[tuple[str, str], str]:
    """Edge labels by (source, destination), for edges whose path names one."""
    return {(s, d): label for s, d, label in native_edges(native) if label}


def spec_from_native(
    native: Graph[Any, Any, Any, Any], name: str, *, caption: str = "", revision: int | None = None
) -> GraphSpec:
    """The drawing of a native graph as built: its start, steps, decisions, forks, joins and end."""
    nodes: list[SpecNode] = [SpecNode(START, "start", "start")]
    ends: list[SpecNode] = []
    for nid, node in native.nodes.items():
        kind = native_kind(node)
        if kind == "start":
            continue
        if kind == "end":
            ends.append(SpecNode(END, "end", "End"))
            continue
        label = (
            getattr(node, "label", None)
            if isinstance(node, Step) and not isinstance(node, NodeStep)
            else None
        )
        nodes.append(SpecNode(nid, kind, label or nid))
    ids = {n.id for n in nodes} | {END}
    edges = tuple(
        SpecEdge(s, d, label or ("End" if d == END else ""))  # the lab labels edges into End
        for s, d, label in native_edges(native)
        if s in ids and d in ids
    )
    return GraphSpec(name, tuple(nodes + ends), edges, revision, caption)
