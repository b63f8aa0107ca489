"""Lay a graph out once with `dot`, then restyle the SVG for every step without calling `dot` again.

`layout(spec)` runs `dot` on the spec's DOT (with an `id` on every node and edge) and cuts the SVG
into a template: fixed text, plus a slot per node (its `<g>` tag and its mark line) and per edge
(its `<g>` tag and its label). `Layout.svg(overlay)` fills the slots with CSS classes and text
marks; the geometry never changes. Layouts are cached by the spec's digest (one per revision).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from html import escape

from .dot import mark_line, run_dot, to_dot
from .overlay import Overlay
from .spec import GraphSpec

__all__ = ("Layout", "layout", "clear_layout_cache", "CSS")

CSS = """
svg.gl-graph .gl-mark{font-size:10.5px;font-weight:700;fill:#111}
svg.gl-graph g.gl-visited>:is(path,polygon,ellipse):first-of-type{fill:#e5e7eb}
svg.gl-graph g.gl-joining>:is(path,polygon){stroke:#56B4E9;stroke-width:3.2px}
svg.gl-graph g.gl-current>:is(path,polygon,ellipse){stroke:#0072B2;stroke-width:3.2px}
svg.gl-graph g.gl-current>:is(path,polygon,ellipse):first-of-type{fill:#dbeafe}
svg.gl-graph g.gl-current>text{font-weight:700}
svg.gl-graph g.gl-failed>:is(path,polygon,ellipse){stroke:#D55E00;stroke-width:3.2px;stroke-dasharray:7 4}
svg.gl-graph g.gl-failed>:is(path,polygon,ellipse):first-of-type{fill:#fde2d4}
svg.gl-graph g.gl-parked>:is(path,polygon,ellipse){stroke:#E69F00;stroke-width:3.2px;stroke-dasharray:2 3}
svg.gl-graph g.gl-parked>:is(path,polygon,ellipse):first-of-type{fill:#fdf1d6}
svg.gl-graph g.gl-break>text.gl-mark{fill:#7c2d12}
svg.gl-graph g.gl-trav>path{stroke:#0072B2;stroke-width:2.8px}
svg.gl-graph g.gl-trav>polygon{stroke:#0072B2;fill:#0072B2}
svg.gl-graph g.gl-idle>path{stroke:#a3a3a3}
svg.gl-graph g.gl-idle>polygon{stroke:#a3a3a3;fill:#a3a3a3}
svg.gl-graph g.gl-idle>text{fill:#737373}
svg.gl-graph g.gl-side-a>:is(path,polygon,ellipse){stroke:#0072B2;stroke-width:3.2px}
svg.gl-graph g.gl-side-a>:is(path,polygon,ellipse):first-of-type{fill:#dbeafe}
svg.gl-graph g.gl-side-b>:is(path,polygon,ellipse){stroke:#009E73;stroke-width:3.2px;stroke-dasharray:6 3}
svg.gl-graph g.gl-side-b>:is(path,polygon,ellipse):first-of-type{fill:#d1fae5}
svg.gl-graph g.gl-side-a.gl-side-b>:is(path,polygon,ellipse):first-of-type{fill:#e0f2f1}
svg.gl-graph g.edge.gl-side-b>polygon{fill:#009E73;stroke-dasharray:none}
svg.gl-graph g.edge.gl-side-a>polygon{fill:#0072B2}
svg.gl-graph g.gl-diverged>:is(path,polygon,ellipse){stroke:#E69F00;stroke-width:4px}
""".strip()

_GROUP = re.compile(r'<g id="gl([ne])(\d+)" class="(?:node|edge)">')
_TEXT = re.compile(r"<text ([^>]*)>.*?</text>", re.S)
_TITLE = re.compile(r"<title>.*?</title>", re.S)
_ROOT = re.compile(r"<svg ([^>]*)>", re.S)
_COMMENT = re.compile(r"<!--.*?-->\n?", re.S)

# template slots: (kind, index)
_NODE_TAG, _NODE_MARK, _EDGE_TAG, _EDGE_LABEL = range(4)


@dataclass(frozen=True)
class Layout:
    """One graph revision laid out: an SVG template with a slot per node and edge."""

    spec: GraphSpec
    parts: tuple[str | tuple[int, int, str], ...]
    """Fixed SVG text, or `(slot kind, index, attributes)`."""
    width_pt: float
    height_pt: float

    def svg(self, overlay: Overlay | None = None) -> str:
        """The SVG with `overlay` applied (none: the plain graph). Never calls `dot`."""
        ov = overlay if overlay is not None and not overlay.is_empty else None
        nodes, edges = self.spec.nodes, self.spec.edges
        out: list[str] = []
        append = out.append
        for part in self.parts:
            if isinstance(part, str):
                append(part)
                continue
            kind, i, attrs = part
            if kind == _NODE_TAG:
                node = nodes[i]
                cls = f"node gl-{node.kind}"
                if ov is not None:
                    extra = ov.node_classes(node.id)
                    if extra:
                        cls += " " + " ".join(extra)
                append(f'<g class="{cls}" data-station="{escape(node.id)}">')
            elif kind == _NODE_MARK:
                append(f'<text class="gl-mark" {attrs}>{escape(mark_line(nodes[i], ov))}</text>')
            elif kind == _EDGE_TAG:
                e = edges[i]
                cls = "edge"
                if ov is not None:
                    cls += " " + " ".join(ov.edge_classes(e.src, e.dst))
                append(f'<g class="{cls}" data-edge="{escape(e.src)}&#8594;{escape(e.dst)}">')
            else:
                e = edges[i]
                n = ov.traversed.get((e.src, e.dst), 0) if ov is not None else 0
                label = f"{e.label} ×{n}" if n > 1 else e.label
                append(f"<text {attrs}>{escape(label)}</text>")
        return "".join(out)


def _template(spec: GraphSpec, raw: str) -> Layout:
    start = raw.find("<svg")
    body = _COMMENT.sub("", raw[start:])
    root = _ROOT.search(body)
    assert root is not None, "dot produced no <svg> element"
    attrs = root.group(1)
    width = float(re.search(r'width="([\d.]+)pt"', attrs).group(1))  # type: ignore[union-attr]
    height = float(re.search(r'height="([\d.]+)pt"', attrs).group(1))  # type: ignore[union-attr]
    head = (
        f'<svg class="gl-graph" role="img" aria-label="graph {escape(spec.name)}" '
        f'style="max-width:100%;height:auto" {attrs}><style>{CSS}</style>'
    )
    body = body[root.end() :].replace('<g id="graph0" class="graph"', '<g class="graph"', 1)
    parts: list[str | tuple[int, int, str]] = [head]
    pos = 0
    for m in _GROUP.finditer(body):
        end = body.index("</g>", m.end())
        parts.append(body[pos : m.start()])
        kind, index = m.group(1), int(m.group(2))
        inner = body[m.end() : end]
        if kind == "n":
            node = spec.nodes[index]
            parts.append((_NODE_TAG, index, ""))
            title = f"<title>{escape(node.id)}</title>"
            inner = _TITLE.sub(lambda _m, t=title: t, inner, count=1)
            texts = list(_TEXT.finditer(inner))
            if node.kind != "start" and len(texts) >= 2:
                mark = texts[-1]
                parts += [inner[: mark.start()], (_NODE_MARK, index, mark.group(1)), inner[mark.end() :]]
            else:
                parts.append(inner)
        else:
            edge = spec.edges[index]
            parts.append((_EDGE_TAG, index, ""))
            title = f"<title>{escape(edge.src)} &#8594; {escape(edge.dst)}</title>"
            inner = _TITLE.sub(lambda _m, t=title: t, inner, count=1)
            texts = list(_TEXT.finditer(inner))
            if edge.label and texts:
                t = texts[-1]
                parts += [inner[: t.start()], (_EDGE_LABEL, index, t.group(1)), inner[t.end() :]]
            else:
                parts.append(inner)
        pos = end
    parts.append(body[pos:])
    merged: list[str | tuple[int, int, str]] = []
    for p in parts:  # join adjacent fixed text so rendering appends fewer pieces
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        elif p != "":
            merged.append(p)
    return Layout(spec, tuple(merged), width, height)


_cache: OrderedDict[str, Layout] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 64


def layout(spec: GraphSpec) -> Layout:
    """The spec laid out by `dot`, cached by its digest: one `dot` call per graph revision."""
    key = spec.digest
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    made = _template(spec, run_dot(to_dot(spec, ids=True)))
    with _cache_lock:
        _cache[key] = made
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return made


def clear_layout_cache() -> None:
    with _cache_lock:
        _cache.clear()
