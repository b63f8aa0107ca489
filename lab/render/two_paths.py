"""Two branches drawn over one graph: the shared prefix, where they diverged, each side's stations.

`overlay_two_paths(shared, a, b)` takes three station paths (oldest first): the prefix both sides
settled, then what each side settled after it. The result is an `Overlay` (so `Layout.svg` fills
it like any run's) whose classes and marks say which side visited a station or followed an edge.
Every mark is text as well as colour and dash: "both 2" (shared visits), "A 2", "B 1", "◆" (diverged). Pure data.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .overlay import Overlay
from .spec import START

__all__ = ("TwoPaths", "overlay_two_paths")


@dataclass(frozen=True)
class TwoPaths(Overlay):
    """An overlay of two branches; `visits` and `traversed` count the shared prefix."""

    side_a: Mapping[str, int] = field(default_factory=dict)
    """Visits per station on side A after the divergence."""
    side_b: Mapping[str, int] = field(default_factory=dict)
    edges_a: frozenset[tuple[str, str]] = frozenset()
    edges_b: frozenset[tuple[str, str]] = frozenset()
    diverged: str | None = None
    """The last shared station (or the start point), where the two branches part."""

    @property
    def is_empty(self) -> bool:
        return False

    def marks(self, node_id: str) -> list[str]:
        out: list[str] = []
        if node_id == self.diverged:
            out.append("◆")
        n = self.visits.get(node_id, 0)
        if n:
            out.append(f"both {n}")
        a, b = self.side_a.get(node_id, 0), self.side_b.get(node_id, 0)
        if a:
            out.append(f"A {a}")
        if b:
            out.append(f"B {b}")
        return out

    def node_classes(self, node_id: str) -> list[str]:
        out: list[str] = []
        if self.visits.get(node_id):
            out.append("gl-visited")
        if self.side_a.get(node_id):
            out.append("gl-side-a")
        if self.side_b.get(node_id):
            out.append("gl-side-b")
        if node_id == self.diverged:
            out.append("gl-diverged")
        return out

    def edge_classes(self, src: str, dst: str) -> list[str]:
        hop = (src, dst)
        out = ["gl-trav"] if self.traversed.get(hop) else []
        if hop in self.edges_a:
            out.append("gl-side-a")
        if hop in self.edges_b:
            out.append("gl-side-b")
        return out or ["gl-idle"]


def overlay_two_paths(shared: Sequence[str], a: Sequence[str], b: Sequence[str]) -> TwoPaths:
    """The overlay of two branches that settled `shared` and then `a` and `b` respectively."""
    hops = list(zip([START, *shared], shared, strict=False)) if shared else []

    def side(path: Sequence[str]) -> frozenset[tuple[str, str]]:
        before = [shared[-1] if shared else START, *path]
        return frozenset(zip(before, before[1:], strict=False))

    return TwoPaths(
        visits=dict(Counter(shared)),
        traversed=dict(Counter(hops)),
        side_a=dict(Counter(a)),
        side_b=dict(Counter(b)),
        edges_a=side(a),
        edges_b=side(b),
        diverged=(shared[-1] if shared else START) if (a or b) else None,
    )
