"""DOT text from a `GraphSpec` (and an optional `Overlay`), and SVG from the Graphviz `dot` program.

`to_dot` is a pure function, snapshot-tested. `run_dot` is the only place a process is started;
when `dot` is missing it says how to install Graphviz.
"""

from __future__ import annotations

import re
import subprocess

import graphviz

from ..errors import LabError
from .overlay import Overlay
from .spec import GraphSpec, SpecNode

__all__ = ("GraphvizNotFoundError", "GraphvizError", "to_dot", "run_dot", "dot_name", "INSTALL_HINT")

INSTALL_HINT = (
    "install Graphviz, which provides it: `apt-get install graphviz` (Debian/Ubuntu), "
    "`brew install graphviz` (macOS) or `conda install graphviz`; `bash scripts/setup.sh` does it "
    "when run as root. Then restart the kernel"
)


class GraphvizError(LabError, RuntimeError):
    """The Graphviz `dot` program failed on the DOT text."""


class GraphvizNotFoundError(GraphvizError):
    """The Graphviz `dot` program is not on PATH."""


FONT = "Helvetica,Arial,sans-serif"
BLUE, VERMILLION, ORANGE, GREY, SKY = "#0072B2", "#D55E00", "#E69F00", "#9ca3af", "#56B4E9"

_GRAPH = {
    "rankdir": "TB",
    "pad": "0.25",
    "nodesep": "0.45",
    "ranksep": "0.45",
    "bgcolor": "transparent",
    "fontname": FONT,
    "fontsize": "11",
}
_NODE = {
    "shape": "box",
    "style": "rounded,filled",
    "fillcolor": "#ffffff",
    "color": "#333333",
    "fontcolor": "#111111",
    "fontname": FONT,
    "fontsize": "12",
    "width": "1.35",
    "penwidth": "1.2",
    "margin": "0.12,0.05",
}
_EDGE = {"color": "#555555", "fontname": FONT, "fontsize": "10", "arrowsize": "0.7", "penwidth": "1.2"}
_KIND = {
    "start": {
        "shape": "circle",
        "style": "filled",
        "fillcolor": "#333333",
        "width": "0.22",
        "fixedsize": "true",
    },
    "end": {"shape": "doublecircle", "width": "0.5", "margin": "0.02"},
    "gate": {"shape": "hexagon", "style": "filled", "fillcolor": "#fffaf0"},
    "delegated": {"shape": "component", "style": "filled", "fillcolor": "#eef7f1"},
    "step": {"style": "filled"},
    "decision": {"shape": "diamond", "style": "filled"},
    # forks widen downward (one in, many out), joins narrow (many in, one out); a map's doubled
    # outline says "one branch per item", a broadcast's single one "every path once"
    "map": {
        "shape": "trapezium",
        "style": "filled",
        "fillcolor": "#f0f7ff",
        "peripheries": "2",
        "width": "1.1",
    },
    "broadcast": {"shape": "trapezium", "style": "filled", "fillcolor": "#f0f7ff", "width": "1.1"},
    "join": {"shape": "invtrapezium", "style": "filled", "fillcolor": "#f3f0ff", "width": "1.1"},
    "missing": {"style": "dashed,rounded", "color": "#777777", "fontcolor": "#555555"},
}
_KIND_MARK = {"gate": "gate", "delegated": "agent", "missing": "missing", "map": "map", "broadcast": "broadcast", "join": "join"}
_SAFE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def dot_name(node: SpecNode, index: int) -> str:
    """The node's DOT name: its id when that is a plain identifier, else `n<index>`."""
    return node.id if _SAFE.match(node.id) else f"n{index}"


def _text(value: str) -> str:
    """A label part shown literally: Graphviz reads `&name;` entities and `\\N`-style escapes."""
    return value.replace("\\", "\\\\").replace("&", "&amp;").replace("\n", " ").replace('"', '\\"')


def _label(*lines: str) -> str:
    return graphviz.nohtml("\\n".join(_text(line) for line in lines))


def mark_line(node: SpecNode, overlay: Overlay | None) -> str:
    """The second label line: the kind mark and the overlay's text marks (a blank line reserves the room)."""
    kind_mark = _KIND_MARK.get(node.kind)
    parts = [kind_mark] if kind_mark and kind_mark != node.label else []
    if overlay is not None:
        parts += overlay.marks(node.id)
    return " ".join(parts) or " "


def to_dot(spec: GraphSpec, overlay: Overlay | None = None, *, ids: bool = False) -> str:
    """DOT text of the graph; with `overlay`, the run's marks as DOT styles and label lines.

    `ids=True` adds the `id` attributes the SVG layout uses to find each node and edge.
    """
    g = graphviz.Digraph(
        name=_text(spec.name) if _SAFE.match(spec.name) else "graph",
        graph_attr=dict(_GRAPH),
        node_attr=dict(_NODE),
        edge_attr=dict(_EDGE),
    )
    if spec.caption:
        g.attr(label=_label(spec.caption), labelloc="b", fontcolor="#555555")
    names: dict[str, str] = {}
    for i, node in enumerate(spec.nodes):
        name = names[node.id] = dot_name(node, i)
        attrs = dict(_KIND.get(node.kind, {}))
        attrs["label"] = "" if node.kind == "start" else _label(node.label, mark_line(node, overlay))
        if node.id != name:
            attrs["tooltip"] = _label(node.id)
        if overlay is not None:
            attrs.update(_overlay_node(node, overlay, attrs))
        if ids:
            attrs["id"] = f"gln{i}"
        g.node(name, **attrs)
    for j, edge in enumerate(spec.edges):
        attrs = {}
        label = edge.label
        if overlay is not None and not overlay.is_empty:
            n = overlay.traversed.get((edge.src, edge.dst), 0)
            attrs = {"penwidth": "2.8", "color": BLUE} if n else {"color": GREY, "fontcolor": "#737373"}
            if n > 1 and label:
                label = f"{label} ×{n}"
        if label:
            attrs["label"] = _label(label)
        if edge.dashed:
            attrs["style"] = "dashed"
        if ids:
            attrs["id"] = f"gle{j}"
        g.edge(names[edge.src], names[edge.dst], **attrs)
    return g.source


def _overlay_node(node: SpecNode, overlay: Overlay, base: dict[str, str]) -> dict[str, str]:
    style = base.get("style", _NODE["style"])
    out: dict[str, str] = {}
    if overlay.visits.get(node.id):
        out["fillcolor"] = "#e5e7eb"
    if node.id == overlay.failed:
        out.update(color=VERMILLION, penwidth="3.2", fillcolor="#fde2d4", style=style + ",dashed")
    elif node.id == overlay.parked or node.id in overlay.waiting:
        out.update(color=ORANGE, penwidth="3.2", fillcolor="#fdf1d6", style=style + ",dotted")
    elif node.id in overlay.current:
        out.update(
            color=BLUE, penwidth="3.2", fillcolor="#dbeafe", fontname="Helvetica-Bold,Arial Bold,sans-serif"
        )
    if node.id in overlay.joins and "color" not in out:
        out.update(color=SKY, penwidth="3.2")
    if node.kind == "end" and node.id in overlay.current:
        out.pop("fontname", None)
    return out


def run_dot(source: str, *, fmt: str = "svg") -> str:
    """Lay out DOT text with the `dot` program and return the output (SVG by default)."""
    try:
        return graphviz.Source(source, engine="dot").pipe(format=fmt, encoding="utf-8")
    except graphviz.ExecutableNotFound:
        raise GraphvizNotFoundError(
            f"the Graphviz `dot` program was not found on PATH, so graphs cannot be drawn; {INSTALL_HINT}"
        ) from None
    except subprocess.CalledProcessError as exc:
        stderr = (
            exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else str(exc.stderr or "")
        )
        raise GraphvizError(f"Graphviz `dot` failed (exit {exc.returncode}): {stderr.strip()}") from None
