"""What a graph handle (declared, adopted, a workflow, a subroutine) draws as: `spec_for`, `edge_labels`.

It reads the handle through its public attributes only (`manifest`, `name`, `nodes`, `draft()` or
`native`) and picks the drawing: the pinned manifest's when the graph builds, else the native
graph's (`lab.render.native`), else the declarations' (`lab.render.spec`). Both of those are pure
readers; this module is the one that knows about both, so neither imports the other.
"""

from __future__ import annotations

from typing import Any

from ..errors import LabError
from .native import native_labels, spec_from_native
from .spec import START, GraphSpec, SpecNode, read_declarations, spec_from_declarations, spec_from_manifest

__all__ = ("spec_for", "edge_labels", "draft_of")


def spec_for(graph: Any) -> GraphSpec:
    """The pinned manifest's drawing when the graph builds, else the declarations' drawing."""
    try:
        manifest = graph.manifest
    except LabError as exc:
        why = str(exc) if len(str(exc)) <= 90 else str(exc)[:89] + "…"
        native = draft_of(graph)
        if native is not None:  # builds natively, but the lab cannot pin it (yet)
            return spec_from_native(native, graph.name, caption=f"not runnable yet: {why}")
        if not graph.nodes:
            return GraphSpec(
                graph.name, (SpecNode(START, "start", "start"),), (), caption="no nodes declared yet"
            )
        spec = spec_from_declarations(graph)
        if spec.caption:  # names what is missing
            return spec
        return spec_from_declarations(graph, caption=f"not buildable yet: {why}")
    return spec_from_manifest(manifest, edge_labels(graph))


def draft_of(graph: Any) -> Any:
    """The native graph to draw when the lab cannot pin one: adopted graphs and step declarations."""
    draft = getattr(graph, "draft", None)
    if callable(draft):
        try:
            return draft()
        except Exception:  # a drawing never fails for it: fall back to the declarations
            return None
    return getattr(graph, "native", None)


def edge_labels(graph: Any) -> dict[tuple[str, str], str]:
    """Edge labels of a graph: native `.label(...)` paths and `Edge(label=...)` return hints."""
    labels: dict[tuple[str, str], str] = {}
    native = draft_of(graph)
    if native is not None:
        try:
            labels.update(native_labels(native))
        except Exception:  # labels are cosmetic; a drawing never fails for them
            pass
    try:
        labels.update(read_declarations(graph).labels)
    except Exception:
        pass
    return labels
