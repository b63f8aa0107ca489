"""A run's total step limit: `g.start(..., total_step_limit=N)` (seed 002 "Bounds").

Seed 002: "step_limit (default 100) caps total super-steps, catching a graph that never reaches
END." The lab's `step_limit` caps each call instead (lab.limits says why); a run started with
`total_step_limit=N` is also capped in total. Its steps are counted from the store, so the count
survives a kernel restart and a resume in another process: the checkpoints on the head's branch
that a working station's settlement wrote (routing-only stations, lab.engine.tasks.routing_only,
are not steps; a rewind leaves the abandoned branch's steps out, since that is the run's past no
longer). Each call may then take at most what is left; reaching the total fails the run with a
`StepLimitError` that says so, at its last checkpoint, as the per-call limit does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .engine.tasks import routing_only
from .errors import StepLimitError
from .limits import UNSET

if TYPE_CHECKING:
    from .run import Run

__all__ = ("TotalSteps",)


class TotalSteps:
    """Mixed into `Run` (first, so its `_step_limit_error` speaks for the total when that bound)."""

    _total_bound: bool = False

    def steps_taken(self: Run) -> int:  # type: ignore[misc]
        """The run's steps so far on its head's branch (what `total_step_limit` counts)."""
        head = self.head
        if head is None:
            return 0
        store = self.lab.store
        store.flush()  # boundaries a durability="batch" run holds back count too
        by = store.settled_stations(self.id)
        native = self.built.native
        return sum(1 for seq in store.branch(self.id, head) if seq in by and not routing_only(native, by[seq]))

    def call_step_limit(self: Run, step_limit: Any) -> Any:  # type: ignore[misc]
        """The step limit of one call: the call's (or the run's per-call one), lowered to what the
        run's total still allows; UNSET passes through when the run has no total."""
        total = self.limits.total_step_limit
        self._total_bound = False
        if total is None:
            return step_limit
        per_call = self.limits.step_limit if step_limit is UNSET else step_limit
        left = max(total - self.steps_taken(), 0)
        if per_call is None or left <= per_call:
            self._total_bound = True
            return left
        return per_call

    def _step_limit_error(self: Run, limit: int) -> StepLimitError:  # type: ignore[misc]
        if not self._total_bound:
            return super()._step_limit_error(limit)  # type: ignore[misc]
        total = self.limits.total_step_limit
        nxt = ", ".join(self.next_stations) or "-"
        return StepLimitError(
            f"run {self.id} reached its total step limit: {total} steps without reaching End "
            f"(total_step_limit={total}, across every call); its graph may loop forever. The head stays "
            f"checkpoint {self.head} (next: {nxt}): look at run.history(), rewind it (run.rewind(seq)) or fork "
            "it (run.fork(seq)) to go on with fewer steps behind it, or start a new run with a higher total",
            run_id=self.id,
            limit=total,  # type: ignore[arg-type]
        )
