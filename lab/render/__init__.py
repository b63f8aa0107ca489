"""Drawing graphs: DOT via the `graphviz` package, SVG via the Graphviz `dot` program, Mermaid text.

Pure functions from a `GraphSpec` (read from a manifest, from a native pydantic-graph `Graph`, or
from declarations while a graph cannot build) and an optional run `Overlay` (a serial branch's
path, or a parallel run's frontier). `dot` runs once per graph revision (`layout`); every step's
restyle fills the cached SVG template. No widgets, no store.
"""

from .dot import INSTALL_HINT, GraphvizError, GraphvizNotFoundError, run_dot, to_dot
from .frontier import ForkFrame, FrontierTask, JoinProgress, join_counts, overlay_from_frontier
from .handle import edge_labels, spec_for
from .mermaid import to_mermaid
from .native import native_labels, spec_from_native
from .overlay import Overlay, overlay_from_path
from .spec import (
    DASHED,
    END,
    FORK_KINDS,
    START,
    GraphSpec,
    SpecEdge,
    SpecNode,
    read_declarations,
    spec_from_declarations,
    spec_from_manifest,
)
from .svg import CSS, Layout, clear_layout_cache, layout
from .two_paths import TwoPaths, overlay_two_paths, overlay_two_steps

__all__ = (
    # what is drawn
    "GraphSpec",
    "SpecNode",
    "SpecEdge",
    "START",
    "END",
    "DASHED",
    "FORK_KINDS",
    "spec_for",
    "spec_from_native",
    "edge_labels",
    "native_labels",
    "spec_from_manifest",
    "spec_from_declarations",
    "read_declarations",
    # a run over it
    "Overlay",
    "overlay_from_path",
    "overlay_from_frontier",
    "FrontierTask",
    "ForkFrame",
    "JoinProgress",
    "TwoPaths",
    "overlay_two_paths",
    "overlay_two_steps",
    "join_counts",
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
