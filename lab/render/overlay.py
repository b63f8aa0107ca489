"""A run drawn over its graph: which station is current, visited, failed or parked, which edges ran.

An `Overlay` is plain data, built from the path of stations a branch settled (oldest first) and
what the checkpoint at its end is waiting for (`overlay_from_path`), or, for a parallel run, from
the stations each super-step settled and the frontier of tasks and join accumulators at the
checkpoint (`overlay_from_frontier`, in `frontier.py`). Renderers read it; nothing here knows a run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .spec import END, START

__all__ = ("Overlay", "overlay_from_path")


@dataclass(frozen=True)
class Overlay:
    """How to light a drawing. Every mark is drawn with a shape, a dash or a text mark, not colour alone."""

    current: frozenset[str] = frozenset()
    """Stations the run executes next (or `END` once done): thick solid border, "▶ next"."""
    visits: Mapping[str, int] = field(default_factory=dict)
    """Settled visits per station: grey fill and "×n"."""
    traversed: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """Edges the branch followed, with counts: thick edges, "×n" on repeats."""
    failed: str | None = None
    """The station whose last attempt raised: dashed thick border, "✖ failed"."""
    parked: str | None = None
    """The station the run waits at (a gate awaiting a verdict): dotted thick border, "‖ waiting"."""
    breakpoints_before: frozenset[str] = frozenset()
    breakpoints_after: frozenset[str] = frozenset()
    tasks: Mapping[str, int] = field(default_factory=dict)
    """Pending tasks per current station when more than one (a mapped step): "▶ ×N"."""
    joins: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Per join gathering branches: (arrived, expected): thick border and "k of n"."""
    waiting: frozenset[str] = frozenset()
    """More parked stations (several branches of one parallel step may wait): as `parked`."""

    @property
    def is_empty(self) -> bool:
        return not (
            self.current
            or self.joins
            or self.waiting
            or self.visits
            or self.traversed
            or self.failed
            or self.parked
            or self.breakpoints_before
            or self.breakpoints_after
        )

    def marks(self, node_id: str) -> list[str]:
        """The text marks of one node, in reading order."""
        out: list[str] = []
        if node_id in self.breakpoints_before:
            out.append("● before")
        if node_id == self.failed:
            out.append("✖ failed")
        elif node_id == self.parked or node_id in self.waiting:
            out.append("‖ waiting")
        elif node_id in self.joins:  # a join's tasks are its arrivals: "▶ 3 of 5" says both
            arrived, expected = self.joins[node_id]
            out.append(("▶ " if node_id in self.current else "") + f"{arrived} of {expected}")
        elif node_id in self.current:
            many = self.tasks.get(node_id, 1)
            out.append("▶ done" if node_id == END else f"▶ ×{many}" if many > 1 else "▶ next")
        n = self.visits.get(node_id, 0)
        if n:
            out.append(f"· ×{n}" if self.tasks.get(node_id, 1) > 1 else f"×{n}")
        if node_id in self.breakpoints_after:
            out.append("after ●")
        return out

    def node_classes(self, node_id: str) -> list[str]:
        out: list[str] = []
        if node_id == self.failed:
            out.append("gl-failed")
        elif node_id == self.parked or node_id in self.waiting:
            out.append("gl-parked")
        elif node_id in self.current:
            out.append("gl-current")
        if node_id in self.joins:
            out.append("gl-joining")
        if self.visits.get(node_id):
            out.append("gl-visited")
        if node_id in self.breakpoints_before or node_id in self.breakpoints_after:
            out.append("gl-break")
        return out

    def edge_classes(self, src: str, dst: str) -> list[str]:
        """The CSS classes of one edge: followed (thick) or idle (grey)."""
        return ["gl-trav"] if self.traversed.get((src, dst)) else ["gl-idle"]


def overlay_from_path(
    path: Sequence[str],
    current: Iterable[str] = (),
    *,
    entry: str | None = None,
    failed: str | None = None,
    parked: str | None = None,
    breakpoints: Mapping[str, Iterable[str]] | None = None,
) -> Overlay:
    """The overlay of a branch that settled `path` (in order) and now has `current` pending.

    `current` may be `(END,)` for a finished run. A failed or parked station is the pending one,
    so it is not also lit as current. `entry` is the station the run started at (default: the
    first of `path`, else of `current`); the start point's edge to it counts as traversed.
    """
    pending = tuple(current)
    visits = Counter(path)
    hops: list[tuple[str, str]] = list(zip(path, path[1:], strict=False))
    if path and pending:
        hops.append((path[-1], pending[0]))
    first = entry or (path[0] if path else (pending[0] if pending else None))
    if first is not None and first != END:
        hops.insert(0, (START, first))
    lit = frozenset(pending) - {failed, parked}
    bps = breakpoints or {}
    return Overlay(
        current=frozenset(s for s in lit if s is not None),
        visits=dict(visits),
        traversed=dict(Counter(hops)),
        failed=failed,
        parked=parked,
        breakpoints_before=frozenset(bps.get("before", ())),
        breakpoints_after=frozenset(bps.get("after", ())),
    )
