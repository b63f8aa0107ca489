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
from dataclasses import dataclass, field
from typing import Any

from .overlay import Overlay
from .spec import END, START, GraphSpec

_PASSING = frozenset({"map", "broadcast", "join", "decision"})

__all__ = (
    "ForkFrame", "FrontierTask", "JoinProgress", "StepTally", "join_counts", "overlay_from_frontier", "flow_json",
)  # fmt: skip


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
    fork_stack: Sequence[ForkFrame] = ()
    """Outermost first; innermost is last (read from the end: a looping run's stack grows every round)."""


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
        run = next(
            (f.node_run_id for f in reversed(t.fork_stack) if f.fork_id == fork), None
        )  # innermost first
        if run is not None:
            arrived[(t.node_id, run)] += 1
    out: dict[str, tuple[int, int]] = {}
    for (join_id, run), k in arrived.items():
        coming = known.get((join_id, run))
        if coming is None:
            coming = sum(
                1
                for t in tasks
                if t.node_id != join_id and any(f.node_run_id == run for f in reversed(t.fork_stack))
            )
        a, n = out.get(join_id, (0, 0))
        out[join_id] = (a + k, n + k + coming)
    return out


@dataclass(frozen=True, slots=True)
class StepTally:
    """What a branch's super-steps settled, counted as the overlay needs it, so one more step costs one step.

    `settled`: how often each station settled; `pairs[(a, b)]`: the tasks of `b` settled in a step
    right after one that settled `a`; `last`: what the last step settled. A branch's tally is its
    parent checkpoint's tally `.then(step)`; its size is bounded by the graph, not by the steps.
    """

    settled: Counter[str] = field(default_factory=Counter)
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    last: tuple[str, ...] = ()
    steps: int = 0

    @classmethod
    def of(cls, steps: Iterable[Sequence[str]]) -> StepTally:
        tally = cls()
        for step in steps:
            tally = tally.then(step)
        return tally

    def then(self, step: Sequence[str]) -> StepTally:
        """This tally with one more step, which settled `step`."""
        now = Counter(step)
        pairs = self.pairs.copy()
        for a in dict.fromkeys(self.last):
            for b, n in now.items():
                pairs[(a, b)] += n
        return StepTally(self.settled + now, pairs, tuple(step), self.steps + 1)


def overlay_from_frontier(
    steps: Sequence[Sequence[str]] | StepTally,
    frontier: Sequence[FrontierTask],
    *,
    spec: GraphSpec,
    accumulators: Iterable[JoinProgress] = (),
    parent_forks: Mapping[str, str] | None = None,
    passing: Iterable[str] | None = None,
    done: bool = False,
    failed: str | None = None,
    parked: Iterable[str] = (),
    breakpoints: Mapping[str, Iterable[str]] | None = None,
) -> Overlay:
    """The overlay of a branch whose super-steps settled `steps` (oldest first) and now holds `frontier`.

    `steps` may be given tallied (`StepTally`): the overlay then costs the same at any depth.

    Every station with a pending task is lit; one with N > 1 tasks (a mapped step) shows `▶ ×N`;
    an open join shows `k of n`. `passing` names the nodes a result passes through without a task
    of its own (default: the spec's forks, joins and decisions, as the super-step engine runs
    them); `done` lights `END`.
    """
    tally = steps if isinstance(steps, StepTally) else StepTally.of(steps)
    settled = tally.settled
    pending = Counter({END: 1}) if done else Counter(t.node_id for t in frontier)
    accs = list(accumulators)
    flow = _flow_of(spec, passing)
    counted, taken = flow.route(settled, pending, frozenset(a.join_id for a in accs))
    traversed: Counter[tuple[str, str]] = Counter()
    for a, b, how in taken:
        if how == _ALL_OUT:
            n = settled[a]
        elif how == _ALL_IN:
            n = settled[b] + pending[b]
        else:  # the tasks of `b` in each step after one that settled `a`; after the last step, the pending ones
            n = tally.pairs[(a, b)] + (pending[b] if a in tally.last else 0)
        traversed[(a, b)] = max(1, n)
    visits = Counter({s: n for s, n in settled.items() if s != START})  # the start is a point, not a station
    for x in counted:
        ins = [n for (a, b), n in traversed.items() if b == x]
        outs = [n for (a, b), n in traversed.items() if a == x]
        visits[x] = max(1, sum(outs) if x in flow.joins else sum(ins))
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
        joins=join_counts(frontier, accs, parent_forks or {}) if not done else {},
    )


def flow_json(spec: GraphSpec) -> dict[str, list[Any]]:
    """What `overlay_from_frontier` reads of the graph, as JSON: every node in drawing order, each edge
    once (`[src, dst]`, in order), the nodes results pass through and the joins. A shared page's
    script counts each step's overlay from it as this module does (lab/share/page_script.py)."""
    return {
        "nodes": [n.id for n in spec.nodes],
        "edges": [[a, b] for a, b in dict.fromkeys((e.src, e.dst) for e in spec.edges)],
        "passing": [n.id for n in spec.nodes if n.kind in _PASSING],
        "joins": [n.id for n in spec.nodes if n.kind == "join"],
    }


_ALL_OUT, _ALL_IN, _BY_STEPS = 1, 2, 3
"""How an edge `a -> b` is counted: every task `a` settled (its one way out), every task `b` ran or
holds (its one way in), or the tasks of `b` in the steps right after one that settled `a`."""


_FLOWS: dict[tuple[int, frozenset[str] | None], tuple[GraphSpec, _Flow]] = {}


def _flow_of(spec: GraphSpec, passing: Iterable[str] | None) -> _Flow:
    """The spec's `_Flow`, made once per spec (and `passing`) and kept: a long run's export asks for
    the overlay of every step, and the graph's shape is the same at each."""
    given = None if passing is None else frozenset(passing)
    key = (id(spec), given)
    hit = _FLOWS.get(key)
    if hit is None or hit[0] is not spec:
        if len(_FLOWS) >= 64:
            _FLOWS.clear()
        through = given if given is not None else frozenset(n.id for n in spec.nodes if n.kind in _PASSING)
        hit = _FLOWS[key] = (spec, _Flow(spec, through))
    return hit[1]


class _Flow:
    """Which edges a branch took, and how they are counted, from what settled and what is pending.

    Counted where the graph says it exactly: a station with one way out sent every settled task
    down it; a station with one way in got every task it ran or holds from it. Elsewhere the steps
    tell: `a -> b` counts the tasks of `b` in the step after one that settled `a`. A node results
    only pass through (`passing`) is reached when something settled into it and something came out
    of it (or it is a join still gathering).

    Which nodes are reached and which edges taken depend only on which stations have settled or
    pending tasks and which joins are open, not on how many: `route` works them out once per such
    combination (a looping run repeats a few), and the caller only adds the counts.
    """

    def __init__(self, spec: GraphSpec, passing: frozenset[str]):
        self.passing = passing
        self.joins = frozenset(n.id for n in spec.nodes if n.kind == "join")
        self.edges = list(dict.fromkeys((e.src, e.dst) for e in spec.edges))
        self.succ: dict[str, list[str]] = {}
        self.pred: dict[str, list[str]] = {}
        for a, b in self.edges:
            self.succ.setdefault(a, []).append(b)
            self.pred.setdefault(b, []).append(a)
        self.how = {(a, b): self._how(a, b) for a, b in self.edges}
        self._routes: dict[tuple[frozenset[str], ...], tuple[frozenset[str], list[tuple[str, str, int]]]] = {}

    def _how(self, a: str, b: str) -> int:
        if a not in self.passing and len(self.succ.get(a, ())) == 1:
            return _ALL_OUT
        if b not in self.passing and len(self.pred.get(b, ())) == 1:
            return _ALL_IN
        return _BY_STEPS

    def route(
        self, settled: Counter[str], pending: Counter[str], open_joins: frozenset[str]
    ) -> tuple[frozenset[str], list[tuple[str, str, int]]]:
        """(the passed-through nodes reached, each edge taken with how it is counted), in the spec's edge order."""
        done = frozenset(x for x, n in settled.items() if n > 0)
        held = frozenset(x for x, n in pending.items() if n > 0)
        key = (done, held, open_joins)
        hit = self._routes.get(key)
        if hit is None:
            reached = self._reach(done, held, open_joins)
            seen = (done | held) - self.passing
            taken = [
                (a, b, self.how[(a, b)])
                for a, b in self.edges
                if ((a in done and a not in self.passing) or a in reached) and (b in seen or b in reached)
            ]
            hit = self._routes[key] = (reached - open_joins, taken)  # an open join counts no visit yet
        return hit

    def _reach(self, done: frozenset[str], held: frozenset[str], open_joins: frozenset[str]) -> frozenset[str]:
        """Passed-through nodes something settled into (forward) and something came out of (backward)."""
        came: set[str] = set()
        went: set[str] = set(open_joins)
        seen = (done | held) - self.passing
        for found, step, ok in (
            (came, self.pred, lambda p: p in done and p not in self.passing),
            (went, self.succ, lambda p: p in seen),
        ):
            changed = True
            while changed:
                changed = False
                for x in self.passing - found:
                    if any(ok(n) or n in found for n in step.get(x, ())):
                        found.add(x)
                        changed = True
        return frozenset(came & went)
