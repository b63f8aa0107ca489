"""How a declared edge is drawn, said in its return hint: `DASHED`.

A mark the graph kinds put in a return hint (`Annotated[Next, Edge(label=...), DASHED]`; a
workflow's default exit) and the drawing reads (`lab.render`). It lives below both, so a kind that
marks an edge never imports the views. `lab.render.DASHED` is the same object.
"""

from __future__ import annotations

__all__ = ("DASHED", "DashedEdge")


class DashedEdge:
    """Return-hint metadata that draws an edge dashed: `Annotated[Next, Edge(label=...), DASHED]`."""

    def __repr__(self) -> str:
        return "DASHED"


DASHED = DashedEdge()
