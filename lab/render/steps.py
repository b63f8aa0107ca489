"""A parallel run drawn step by step: each checkpoint is a super-step, drawn as its whole frontier.

A parallel run's checkpoint lists every pending task (its station, task id and fork stack) and
every open join (how many branches it has reduced, which it still waits for): see
docs/parallel.md. `StepView` reads those records (through a reader the run widget gives it, so it
shares the widget's cache) and builds the overlay of the branch up to any checkpoint: the
stations each earlier step settled (the tasks that left the frontier from one checkpoint to the
next) and the frontier itself. It also words the timeline's "next" for a step. No store, no SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from ..fork_stacks import StoredStack
from ..records import CheckpointRecord
from .frontier import ForkFrame, FrontierTask, JoinProgress, StepTally, overlay_from_frontier
from .overlay import Overlay
from .spec import GraphSpec

__all__ = ("StepView", "frontier_of", "is_parallel", "next_summary", "settled_between", "settled_tasks")


def is_parallel(manifest: Any) -> bool:
    """Whether runs of this manifest checkpoint super-steps (the parallel engine)."""
    return getattr(manifest, "engine", "serial") == "superstep"


def _meta(p: Any) -> Mapping[str, Any]:
    return getattr(p, "meta", None) or {}


class _Frames(Sequence[ForkFrame]):
    """A task's stored fork stack read as `ForkFrame`s on demand (outermost first); the stored
    form folds repeated rounds (lab/fork_stacks.py) and is read without unfolding it, and only
    when a frame is asked for (most steps' drawings never look at a stack)."""

    __slots__ = ("_stored", "_view")

    def __init__(self, stored: Sequence[Any]):
        self._stored = stored
        self._view: StoredStack | None = None

    @property
    def _raw(self) -> StoredStack:
        if self._view is None:
            self._view = StoredStack(self._stored)
        return self._view

    def __len__(self) -> int:
        return len(self._raw)

    @overload
    def __getitem__(self, i: int) -> ForkFrame: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[ForkFrame]: ...
    def __getitem__(self, i: int | slice) -> ForkFrame | Sequence[ForkFrame]:
        if isinstance(i, slice):
            return tuple(_frame(f) for f in self._raw[i])
        return _frame(self._raw[i])

    def __iter__(self) -> Iterator[ForkFrame]:
        return (_frame(f) for f in self._raw)

    def __reversed__(self) -> Iterator[ForkFrame]:
        return (_frame(f) for f in reversed(self._raw))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


def _frame(f: Mapping[str, Any]) -> ForkFrame:
    return ForkFrame(str(f["fork"]), str(f["run"]), int(f.get("thread", 0)))


def frontier_of(rec: CheckpointRecord) -> tuple[list[FrontierTask], list[JoinProgress]]:
    """The pending tasks and open joins a checkpoint holds, as the renderer reads them."""
    tasks: list[FrontierTask] = []
    joins: list[JoinProgress] = []
    for p in rec.next:
        meta = _meta(p)
        join = meta.get("join")
        if join is not None:
            waiting = join.get("waiting_for")
            joins.append(
                JoinProgress(
                    p.node_id,
                    str(join.get("fork_run")),
                    int(join.get("arrived", 0)),
                    len(waiting) if waiting is not None else None,
                )
            )
            continue
        tasks.append(FrontierTask(p.node_id, _Frames(meta.get("fork_stack") or ())))
    return tasks, joins


def _task_ids(rec: CheckpointRecord) -> dict[Any, str]:
    """Task id -> station, for the tasks of a checkpoint (a serial entry counts as one task)."""
    out: dict[Any, str] = {}
    for i, p in enumerate(rec.next):
        meta = _meta(p)
        if "join" not in meta:
            out[meta.get("task", ("entry", i))] = p.node_id
    return out


def settled_tasks(parent: CheckpointRecord, rec: CheckpointRecord) -> list[tuple[Any, str]]:
    """(task id, station) of each task the step from `parent` to `rec` settled (it left the frontier)."""
    after = _task_ids(rec)
    return [(tid, sid) for tid, sid in _task_ids(parent).items() if tid not in after]


def settled_between(parent: CheckpointRecord, rec: CheckpointRecord) -> tuple[str, ...]:
    """The stations whose tasks the step from `parent` to `rec` settled."""
    return tuple(sid for _tid, sid in settled_tasks(parent, rec))


def next_summary(
    rec: CheckpointRecord, frontier: tuple[list[FrontierTask], list[JoinProgress]] | None = None
) -> str:
    """ "square ×5, b2 · joins: reduce_sum 2 of 3" for the timeline; "End" once done.

    `frontier`: `frontier_of(rec)` when the caller has it already."""
    if rec.status == "done":
        return "End"
    tasks, joins = frontier if frontier is not None else frontier_of(rec)
    counts = Counter(t.node_id for t in tasks)
    text = ", ".join(f"{sid} ×{n}" if n > 1 else sid for sid, n in counts.items()) or "nothing"
    if joins:
        text += " · joins: " + ", ".join(
            f"{j.join_id} {j.arrived} of {j.arrived + j.waiting}" if j.waiting is not None else j.join_id
            for j in joins
        )
    return text


class StepView:
    """Overlays of one parallel run's branches, step by step; each checkpoint's tally is worked out once.

    `read(seqs)` returns the checkpoint records of those seqs (the widget's cache, one store call
    for the ones it lacks). A checkpoint's tally (`StepTally`) is its parent's plus the step
    between them, so a branch one step longer than one already drawn costs one step.
    """

    def __init__(self, spec: GraphSpec, read: Callable[[Sequence[int]], Mapping[int, CheckpointRecord]]):
        self.spec = spec
        self._read = read
        self._tallies: dict[int, StepTally] = {}
        """seq -> what the steps of the branch up to it settled (a seq has one parent, so one branch)."""
        self._steps: dict[int, tuple[str, ...]] = {}
        """seq -> the stations whose tasks the step into it settled."""
        self._last_ids: tuple[CheckpointRecord, dict[Any, str]] | None = None
        """The last checkpoint whose task ids were read, and them: walking a branch, it is the next one's parent."""

    def _ids(self, rec: CheckpointRecord) -> dict[Any, str]:
        last = self._last_ids
        if last is not None and last[0] is rec:
            return last[1]
        ids = _task_ids(rec)
        self._last_ids = (rec, ids)
        return ids

    def settled_in(self, parent: CheckpointRecord, rec: CheckpointRecord) -> tuple[str, ...]:
        """The stations whose tasks the step from `parent` to `rec` settled (they left the frontier)."""
        hit = self._steps.get(rec.seq)
        if hit is None:
            before = self._ids(parent)
            after = self._ids(rec)
            hit = self._steps[rec.seq] = tuple(sid for tid, sid in before.items() if tid not in after)
        return hit

    def step(self, parent: CheckpointRecord | None, rec: CheckpointRecord) -> StepTally:
        """The tally at `rec`, whose parent checkpoint is `parent` (None: a root) and is tallied already."""
        hit = self._tallies.get(rec.seq)
        if hit is None:
            if parent is None:
                hit = StepTally()
            else:
                base = self._tallies.get(parent.seq)
                if base is None:
                    raise KeyError(f"checkpoint {parent.seq} is not tallied yet: tally a branch root first")
                hit = base.then(self.settled_in(parent, rec))
            self._tallies[rec.seq] = hit
        return hit

    def tally(self, seqs: Sequence[int]) -> tuple[StepTally, CheckpointRecord]:
        """The tally of the branch `seqs` (root first) and its last checkpoint's record."""
        i = len(seqs) - 1
        while i > 0 and seqs[i] not in self._tallies:
            i -= 1  # back to the deepest checkpoint already tallied (or the root)
        todo = list(seqs[i:])
        recs = self._read(todo)
        if i == 0:
            self.step(None, recs[todo[0]])
        for a, b in zip(todo, todo[1:], strict=False):
            self.step(recs[a], recs[b])
        return self._tallies[seqs[-1]], recs[seqs[-1]]

    def overlay(
        self,
        seqs: Sequence[int],
        *,
        failed: str | None = None,
        parked: Iterable[str] = (),
        breakpoints: Mapping[str, Iterable[str]] | None = None,
    ) -> Overlay:
        """The overlay of the branch `seqs` (root first) at its last checkpoint."""
        tally, rec = self.tally(seqs)
        return self.overlay_for(tally, rec, failed=failed, parked=parked, breakpoints=breakpoints)

    def overlay_for(
        self,
        steps: Sequence[Sequence[str]] | StepTally,
        rec: CheckpointRecord,
        *,
        failed: str | None = None,
        parked: Iterable[str] = (),
        breakpoints: Mapping[str, Iterable[str]] | None = None,
        frontier: tuple[list[FrontierTask], list[JoinProgress]] | None = None,
    ) -> Overlay:
        """The overlay at checkpoint `rec`, whose branch's steps settled `steps` (oldest first, or tallied).

        `frontier`: `frontier_of(rec)` when the caller has it already."""
        tasks, joins = frontier if frontier is not None else frontier_of(rec)
        return overlay_from_frontier(
            steps,
            tasks,
            spec=self.spec,
            accumulators=joins,
            done=rec.status == "done",
            failed=failed,
            parked=parked,
            breakpoints=breakpoints,
        )
