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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..records import CheckpointRecord
from .frontier import ForkFrame, FrontierTask, JoinProgress, overlay_from_frontier
from .overlay import Overlay
from .spec import GraphSpec

__all__ = ("StepView", "frontier_of", "is_parallel", "next_summary")


def is_parallel(manifest: Any) -> bool:
    """Whether runs of this manifest checkpoint super-steps (the parallel engine)."""
    return getattr(manifest, "engine", "serial") == "superstep"


def _meta(p: Any) -> Mapping[str, Any]:
    return getattr(p, "meta", None) or {}


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
        stack = tuple(
            ForkFrame(str(f["fork"]), str(f["run"]), int(f.get("thread", 0)))
            for f in meta.get("fork_stack", ())
        )
        tasks.append(FrontierTask(p.node_id, stack))
    return tasks, joins


def _task_ids(rec: CheckpointRecord) -> dict[Any, str]:
    """Task id -> station, for the tasks of a checkpoint (a serial entry counts as one task)."""
    out: dict[Any, str] = {}
    for i, p in enumerate(rec.next):
        meta = _meta(p)
        if "join" not in meta:
            out[meta.get("task", ("entry", i))] = p.node_id
    return out


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
    """Overlays of one parallel run's branch, step by step; what each step settled is worked out once.

    `read(seqs)` returns the checkpoint records of those seqs (the widget's cache, one store call
    for the ones it lacks).
    """

    def __init__(self, spec: GraphSpec, read: Callable[[Sequence[int]], Mapping[int, CheckpointRecord]]):
        self.spec = spec
        self._read = read
        self._settled: dict[tuple[int, int], tuple[str, ...]] = {}
        """(parent seq, seq) -> the stations whose tasks left the frontier in that step."""

    def settled_in(self, parent: CheckpointRecord, rec: CheckpointRecord) -> tuple[str, ...]:
        """The stations whose tasks the step from `parent` to `rec` settled (they left the frontier)."""
        key = (parent.seq, rec.seq)
        hit = self._settled.get(key)
        if hit is None:
            before, after = _task_ids(parent), _task_ids(rec)
            hit = self._settled[key] = tuple(sid for tid, sid in before.items() if tid not in after)
        return hit

    def overlay(
        self,
        seqs: Sequence[int],
        *,
        failed: str | None = None,
        parked: Iterable[str] = (),
        breakpoints: Mapping[str, Iterable[str]] | None = None,
    ) -> Overlay:
        """The overlay of the branch `seqs` (root first) at its last checkpoint."""
        pairs = list(zip(seqs, seqs[1:], strict=False))
        want = [s for s in seqs[-1:]] + [s for a, b in pairs if (a, b) not in self._settled for s in (a, b)]
        recs = self._read(list(dict.fromkeys(want)))
        steps = [
            self._settled[(a, b)] if (a, b) in self._settled else self.settled_in(recs[a], recs[b])
            for a, b in pairs
        ]
        return self.overlay_for(steps, recs[seqs[-1]], failed=failed, parked=parked, breakpoints=breakpoints)

    def overlay_for(
        self,
        steps: Sequence[Sequence[str]],
        rec: CheckpointRecord,
        *,
        failed: str | None = None,
        parked: Iterable[str] = (),
        breakpoints: Mapping[str, Iterable[str]] | None = None,
        frontier: tuple[list[FrontierTask], list[JoinProgress]] | None = None,
    ) -> Overlay:
        """The overlay at checkpoint `rec`, whose branch's steps settled `steps` (oldest first).

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
