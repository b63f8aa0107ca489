"""Drawing graphs: DOT via the `graphviz` package, SVG via the Graphviz `dot` program, Mermaid text.

Pure functions from a `GraphSpec` (read from a manifest, or from declarations while a graph cannot
build) and an optional run `Overlay`. `dot` runs once per graph revision (`layout`); every step's
restyle fills the cached SVG template. No widgets, no store.
"""

from .dot import INSTALL_HINT, GraphvizError, GraphvizNotFoundError, run_dot, to_dot
from .mermaid import to_mermaid
from .overlay import Overlay, overlay_from_path
from .spec import (
    END,
    START,
    GraphSpec,
    SpecEdge,
    SpecNode,
    read_declarations,
    spec_for,
    spec_from_declarations,
    spec_from_manifest,
)
from .svg import CSS, Layout, clear_layout_cache, layout

__all__ = (
    # what is drawn
    "GraphSpec",
    "SpecNode",
    "SpecEdge",
    "START",
    "END",
    "spec_for",
    "spec_from_manifest",
    "spec_from_declarations",
    "read_declarations",
    # a run over it
    "Overlay",
    "overlay_from_path",
    # renderers
    "to_dot",
    "to_mermaid",
    "run_dot",
    "layout",
    "Layout",
    "clear_layout_cache",
    "CSS",
    # errors
    "GraphvizError",
    "GraphvizNotFoundError",
    "INSTALL_HINT",
    "svg_of",
)


def svg_of(spec: GraphSpec, overlay: Overlay | None = None) -> str:
    """The SVG of `spec` with `overlay` (laid out once per revision, restyled per call)."""
    return layout(spec).svg(overlay)
