"""`GraphView`: an ipywidgets `HTML` holding the graph's inline `<svg>`, restyled in place.

Given a `LabGraph`, it follows the graph: a cell that redefines a node redraws it (new revision,
new layout). Given a fixed spec (a run's pinned revision), it only restyles. The SVG is inline
(not an `<img>`), so its nodes can be styled and queried in the page.
"""

from __future__ import annotations

import weakref
from html import escape
from typing import TYPE_CHECKING

import ipywidgets as widgets

from ..render import GraphSpec, GraphvizError, Overlay, layout, spec_for

if TYPE_CHECKING:
    from ..graph import LabGraph

__all__ = ("GraphView",)


class GraphView(widgets.HTML):
    """The drawing of a graph, optionally with a run overlay; `show(overlay)` restyles it."""

    def __init__(self, graph: LabGraph | None = None, *, spec: GraphSpec | None = None, **kwargs):
        super().__init__(**kwargs)
        if graph is None and spec is None:
            raise TypeError("GraphView needs a graph (to follow) or a spec (to draw)")
        self.add_class("gl-graph-view")
        self._graph = graph
        self._spec = spec if spec is not None else spec_for(graph)  # type: ignore[arg-type]
        self._overlay: Overlay | None = None
        if spec is None and graph is not None:
            ref = weakref.ref(self)

            def follow(g: LabGraph) -> None:
                view = ref()
                if view is not None:
                    view.set_spec(spec_for(g))

            graph.on_change(follow)
        self.value = self._render()

    @property
    def spec(self) -> GraphSpec:
        return self._spec

    @property
    def overlay(self) -> Overlay | None:
        return self._overlay

    def set_spec(self, spec: GraphSpec) -> None:
        """Draw another revision (lays it out once; cached by digest)."""
        self._spec = spec
        self.value = self._render()

    def show(self, overlay: Overlay | None) -> None:
        """Restyle the drawing for `overlay` and push it to the page (no `dot` call)."""
        self._overlay = overlay
        value = self._render()
        if value != self.value:
            self.value = value

    def _render(self) -> str:
        try:
            return layout(self._spec).svg(self._overlay)
        except GraphvizError as exc:
            return f'<pre class="gl-error">{escape(str(exc))}</pre>'

    def __repr__(self) -> str:
        return f"<GraphView {self._spec.name}@{self._spec.revision}>"
