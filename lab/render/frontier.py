"""The overlay of a parallel run: every task of a frontier lit, `×N` on a mapped step, `k of n` on a join.

A parallel run's checkpoint is a super-step boundary. It holds a frontier (every pending task,
each with its fork stack) and the joins' accumulators (how many branches each has reduced so
far, and, when the checkpoint records it, how many it still waits for). `overlay_from_frontier` turns that, with the stations each earlier step of the branch
settled, into an `Overlay`. Pure data in, data out: the widget reads the store, this only counts.

How a join's `k of n` is counted: a join belongs to one run of its parent fork (pydantic-graph's
`Graph.get_parent_fork(join_id)`). `k` is the branches that have reached it: the items already
reduced plus the tasks waiting at the join now; `n` adds the tasks still on their way, those
whose fork stack holds that fork run (or the count the checkpoint recorded). When the last one arrives the join fires and leaves the
frontier, so `n of n` shows for the one step in which every branch is at the door.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .overlay import Overlay
from .spec import END, START

__all__ = ("ForkFrame", "FrontierTask", "JoinProgress", "join_counts", "overlay_from_frontier")


@dataclass(frozen=True, slots=True)
class ForkFrame:
    """One level of a task's fork stack: which fork, which run of it, which branch (thread) of it."""

    fork_id: str
    node_run_id: str
    thread_index: int = 0


@dataclass(frozen=True, slots=True)
class FrontierTask:
    """A pending task: the station it runs next and the forks it runs inside (outermost first)."""

    node_id: str
    fork_stack: tuple[ForkFrame, ...] = ()


@dataclass(frozen=True, slots=True)
class JoinProgress:
    """A join's accumulator for one run of its parent fork: how many items it has reduced so far."""

    join_id: str
    fork_run_id: str
    arrived: int
    waiting: int | None = None
    """How many branches it still waits for, when the checkpoint says; else counted from the tasks."""


def join_counts(
    tasks: Sequence[FrontierTask], accumulators: Iterable[JoinProgress], parent_forks: Mapping[str, str]
) -> dict[str, tuple[int, int]]:
    """`(arrived, expected)` per join that is gathering: see the module docs for how they are counted.

    `parent_forks` maps each join id to its parent fork's id.
    """
    arrived: Counter[tuple[str, str]] = Counter()
    known: dict[tuple[str, str], int] = {}
    for acc in accumulators:
        arrived[(acc.join_id, acc.fork_run_id)] += acc.arrived
        if acc.waiting is not None:
            known[(acc.join_id, acc.fork_run_id)] = acc.waiting
    for t in tasks:
        fork = parent_forks.get(t.node_id)
        if fork is None:
            continue  # not at a join
        run = next((f.node_run_id for f in reversed(t.fork_stack) if f.fork_id == fork), None)
        if run is not None:
            arrived[(t.node_id, run)] += 1
    out: dict[str, tuple[int, int]] = {}
    for (join_id, run), k in arrived.items():
        coming = known.get((join_id, run))
        if coming is None:
            coming = sum(
                1 for t in tasks if t.node_id != join_id and any(f.node_run_id == run for f in t.fork_stack)
            )
        a, n = out.get(join_id, (0, 0))
        out[join_id] = (a + k, n + k + coming)
    return out


def overlay_from_frontier(
    steps: Sequence[Sequence[str]],
    frontier: Sequence[FrontierTask],
    *,
    accumulators: Iterable[JoinProgress] = (),
    parent_forks: Mapping[str, str] | None = None,
    edges: Iterable[tuple[str, str]] = (),
    done: bool = False,
    failed: str | None = None,
    parked: Iterable[str] = (),
    breakpoints: Mapping[str, Iterable[str]] | None = None,
) -> Overlay:
    """The overlay of a branch whose super-steps settled `steps` (oldest first) and now holds `frontier`.

    Every station with a pending task is lit; one with N > 1 tasks (a mapped step) shows `▶ ×N`.
    An edge `(a, b)` of `edges` counts as traversed once per task of `b` in the step after one
    that settled `a` (a super-step runs the whole frontier, so each step's tasks came from the
    step before). `done` lights `END` instead of the (empty) frontier.
    """
    visits = Counter(s for step in steps for s in step if s != START)  # the start is a point, not a station
    pending = Counter(t.node_id for t in frontier)
    if done:
        pending = Counter({END: 1})
    later: list[Counter[str]] = [Counter(step) for step in steps[1:]] + [pending]
    succ: dict[str, list[str]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    traversed: Counter[tuple[str, str]] = Counter()
    for settled, after in zip(steps, later, strict=True):
        for a in set(settled):
            for b in succ.get(a, ()):
                if after.get(b):
                    traversed[(a, b)] += after[b]
    first = steps[0] if steps else [t.node_id for t in frontier]
    for s in dict.fromkeys(first):  # the start's edge to the entry station(s)
        if s not in (START, END) and (START, s) in set(edges):
            traversed[(START, s)] += 1
    held = frozenset(parked)
    lit = frozenset(pending) - held - {failed}
    bps = breakpoints or {}
    return Overlay(
        current=frozenset(s for s in lit if s is not None),
        visits=dict(visits),
        traversed=dict(traversed),
        failed=failed,
        parked=None,
        waiting=held,
        breakpoints_before=frozenset(bps.get("before", ())),
        breakpoints_after=frozenset(bps.get("after", ())),
        tasks={s: n for s, n in pending.items() if n > 1},
        joins=join_counts(frontier, accumulators, parent_forks or {}) if not done else {},
    )
