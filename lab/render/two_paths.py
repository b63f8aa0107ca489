"""Two branches drawn over one graph: the shared prefix, where they diverged, each side's stations.

`overlay_two_paths(shared, a, b)` takes three station paths (oldest first): the prefix both sides
settled, then what each side settled after it. The result is an `Overlay` (so `Layout.svg` fills
it like any run's) whose classes and marks say which side visited a station or followed an edge.
Every mark is text as well as colour and dash: "both 2" (shared visits), "A 2", "B 1", "◆" (diverged). Pure data.

Two parallel runs are compared super-step by super-step: `overlay_two_steps` takes the shared
steps and each side's steps after them (each step: the stations whose tasks it settled) and each
side's frontier at its tip, counts them with the run widget's own overlay (`overlay_from_frontier`)
and marks what each side did past the shared prefix (visits `A ×5`, edges) and the tasks each side
has pending (`A ▶ ×5`, `B ▶`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .frontier import FrontierTask, overlay_from_frontier
from .overlay import Overlay
from .spec import END, START, GraphSpec

__all__ = ("TwoPaths", "overlay_two_paths", "overlay_two_steps")


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
    pending_a: Mapping[str, int] = field(default_factory=dict)
    """Two parallel runs: the tasks side A has pending at its tip, per station."""
    pending_b: Mapping[str, int] = field(default_factory=dict)

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
        for side, pending in (("A", self.pending_a), ("B", self.pending_b)):
            n = pending.get(node_id, 0)
            if n:
                out.append(f"{side} ▶ ×{n}" if n > 1 else f"{side} ▶")
        return out

    def node_classes(self, node_id: str) -> list[str]:
        out: list[str] = []
        if self.visits.get(node_id):
            out.append("gl-visited")
        if self.side_a.get(node_id):
            out.append("gl-side-a")
        if self.side_b.get(node_id):
            out.append("gl-side-b")
        if self.pending_a.get(node_id) or self.pending_b.get(node_id):
            out.append("gl-current")
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


def overlay_two_steps(
    spec: GraphSpec,
    shared: Sequence[Sequence[str]],
    a: Sequence[Sequence[str]],
    b: Sequence[Sequence[str]],
    tasks_a: Sequence[str] = (),
    tasks_b: Sequence[str] = (),
    done_a: bool = False,
    done_b: bool = False,
) -> TwoPaths:
    """Two parallel runs that settled the super-steps `shared`, then `a` and `b`; `tasks_*` each
    side's pending tasks at its tip (station per task), `done_*` whether it reached End."""
    base = overlay_from_frontier(shared, [], spec=spec)

    def side(
        steps: Sequence[Sequence[str]], tasks: Sequence[str], done: bool
    ) -> tuple[dict[str, int], frozenset[tuple[str, str]]]:
        ov = overlay_from_frontier([*shared, *steps], [FrontierTask(t) for t in tasks], spec=spec, done=done)
        visits = {s: n - base.visits.get(s, 0) for s, n in ov.visits.items() if n > base.visits.get(s, 0)}
        if done:
            visits[END] = 1
        edges = frozenset(e for e, n in ov.traversed.items() if n > base.traversed.get(e, 0))
        return visits, edges

    side_a, edges_a = side(a, tasks_a, done_a)
    side_b, edges_b = side(b, tasks_b, done_b)
    last = next((step[0] for step in reversed(shared) if step), START)
    return TwoPaths(
        visits=dict(base.visits),
        traversed=dict(base.traversed),
        side_a=side_a,
        side_b=side_b,
        edges_a=edges_a,
        edges_b=edges_b,
        diverged=last if (a or b) else None,
        pending_a={} if done_a else dict(Counter(tasks_a)),
        pending_b={} if done_b else dict(Counter(tasks_b)),
    )
