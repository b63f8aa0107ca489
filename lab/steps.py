"""The run's side of the super-step engine: one checkpoint and its events per super-step.

Mixed into `Run` (as `Waits` and `TimeTravel` are). A super-step's tasks each get an `entered`
event before they run and a `settled` (or `failed`, `waiting`, `dropped`) event after, tagged
with their task id and the step's checkpoint; the step's checkpoint holds the next frontier
(tasks with fork stacks, open joins with their values) and the state. Everything a step
writes is one journal transaction.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .engine.commit import StepOutcome
from .engine.tasks import JoinAcc, Task
from .errors import CheckpointValueError, StateContractError
from .events import ReturnedBatch
from .gates import StationContext, WaitSignal
from .run_values import StepResult

if TYPE_CHECKING:
    from .records import Status
    from .run import Run

__all__ = ("SuperSteps",)


class SuperSteps:
    """`StepHooks` for `Run`: what the super-step engine reports, written to the store."""

    def task_contexts(self: Run, tasks: Sequence[Task]) -> dict[int, StationContext] | None:  # type: ignore[misc]
        resume, self._resume = self._resume, None
        by_task, self._resume_tasks = self._resume_tasks, {}
        continuing = resume is not None or bool(by_task)  # the head's waits were answered (or a breakpoint continued)
        contexts: dict[int, StationContext] = {}
        for task in tasks:
            answered = by_task.get(task.task_id)
            if answered is not None:
                contexts[task.task_id] = answered
            elif resume is not None and task.node_id == resume.node_id:
                contexts[task.task_id] = resume
                resume = None
            else:
                contexts[task.task_id] = StationContext(task.node_id)
            contexts[task.task_id].task = task.task_id  # an IdempotentOp's key tells the tasks of one node apart
        self._task_contexts = contexts
        if not continuing:
            hit = next((t for t in tasks if t.node_id in self._breakpoints["before"]), None)
            if hit is not None:
                self._park("breakpoint", hit.node_id, prompt=None, details={"when": "before", "station": hit.node_id})
                return None
        return contexts

    def task_returned(self: Run, task: Task, attempt: int | None, ms: float) -> None:  # type: ignore[misc]
        """Hand a stream the task's finish now (seed 003 "as each node starts and finishes"); not stored:
        its `settled` event is written with the step's checkpoint."""
        sinks = self._journal.sinks
        if sinks:
            batch = ReturnedBatch(self.id, task.node_id, attempt, task.task_id, ms)
            for sink in list(sinks):
                sink(batch)

    def step_entered(self: Run, tasks: Sequence[Task]) -> dict[int, int]:  # type: ignore[misc]
        attempts: dict[int, int] = {}
        step = self._next_cp
        rows = []
        for task in tasks:
            attempts[task.task_id] = self._journal.next_ev
            rows.append(
                self._event_row(
                    "entered", node_id=task.node_id, attempt=self._journal.next_ev, checkpoint_seq=self._head,
                    payload={"task": task.task_id, "step": step},
                )
            )
        if self._status != "running":
            self._status = "running"
            rows.append(self.lab.store.update_row(self.id, status="running", head_seq=self._head))
        self._write(rows, sync=True)  # every mode records the attempts before the call (see Run.entered)
        self._unflushed = 0
        self._inflight_started = time.perf_counter()
        return attempts

    def step_settled(self: Run, outcome: StepOutcome) -> None:  # type: ignore[misc]
        if not outcome.settled and not outcome.dropped and outcome.end is None and (outcome.parked or outcome.failed):
            self._nothing_settled(outcome)  # no checkpoint that no step produced (issue 24 item 9)
            return
        codec = self._built.codec
        end = outcome.end
        frontier: list[Any] = [] if end is not None else outcome.frontier
        try:  # everything is encoded before anything is written: a refused value leaves the run as it was
            stations = [codec.encode_node(n) for n in frontier]
            output_json = codec.encode_output(end.value) if end is not None else None
            state_json = codec.encode_state(self._state)
        except StateContractError:
            raise
        except Exception as exc:
            raise CheckpointValueError(f"the step's values cannot be checkpointed: {type(exc).__name__}: {exc}") from exc
        seq = self._next_cp
        status: Status = "done" if end is not None else "running"
        rows: list[dict[str, Any]] = [
            {
                "t": "cp",
                "run_id": self.id,
                "seq": seq,
                "parent_seq": self._head,
                "status": status,
                "state": state_json,
                "next": [st.to_json() for st in stations],
                "output": output_json,
                "created_at": time.time(),
                "counters": self._settled_counters() if self._counters else None,
            }
        ]
        contexts, self._task_contexts = self._task_contexts, {}
        for s in outcome.settled:
            ctx = contexts.get(s.task.task_id)
            for note in ctx.notes if ctx is not None else ():
                rows.append(self._event_row("warning", node_id=s.task.node_id, attempt=s.attempt, checkpoint_seq=seq, payload=note))
            rows.append(
                self._event_row(
                    "settled", node_id=s.task.node_id, attempt=s.attempt, checkpoint_seq=seq,
                    payload={"ms": s.ms, "next": list(s.next), "task": s.task.task_id, "step": seq},
                )
            )
        for task, attempt, why in outcome.dropped:
            rows.append(
                self._event_row(
                    "dropped", node_id=task.node_id, attempt=attempt, checkpoint_seq=seq,
                    payload={"task": task.task_id, "step": seq, "reason": why},
                )
            )
        if end is not None:
            last = outcome.settled[-1].task.node_id if outcome.settled else None
            rows.append(self._event_row("done", node_id=last, checkpoint_seq=seq, payload={"output": output_json}))
        self._unflushed += 1
        sync = self.durability == "step" or end is not None or self._unflushed >= self.batch_size or bool(outcome.parked or outcome.failed)
        self._write(rows, sync=sync)
        if sync:
            self._unflushed = 0
        self._state_json = state_json
        self._next_cp = seq + 1
        self._head = seq
        self._pending = frontier
        self._status = status
        if end is not None:
            self._output = end.value
            self._output_json = output_json
        names = tuple(s.task.node_id for s in outcome.settled)
        self._last = StepResult(
            names[0] if len(names) == 1 else (f"{len(names)} tasks" if names else None),
            "done" if end is not None else "settled",
            seq,
            self.next_stations,
            self._output,
            tasks=names,
        )
        if outcome.failed:
            task, attempt, error = outcome.failed[0]
            self.failed(attempt=attempt, node_id=task.node_id, error=error)
        elif outcome.parked:
            self.parked_tasks([(task.task_id, attempt, task.node_id, signal) for task, attempt, signal in outcome.parked])

    def _nothing_settled(self: Run, outcome: StepOutcome) -> None:  # type: ignore[misc]
        """Every task of the step failed or parked: the run fails or waits at its head, as a serial station does."""
        self._task_contexts = {}
        if outcome.failed:
            task, attempt, error = outcome.failed[0]
            self.failed(attempt=attempt, node_id=task.node_id, error=error)
        else:
            self.parked_tasks([(task.task_id, attempt, task.node_id, signal) for task, attempt, signal in outcome.parked])

    def step_parked(self: Run, parked: Sequence[tuple[Task, int, WaitSignal]]) -> None:  # type: ignore[misc]
        """A step that applied nothing waits: one waiting checkpoint at the head's state, no other."""
        self._task_contexts = {}
        self.parked_tasks([(task.task_id, attempt, task.node_id, signal) for task, attempt, signal in parked])

    def head_state(self: Run) -> Any:  # type: ignore[misc]
        """A fresh copy of the head's state (a retried try starts from it)."""
        return self._built.codec.decode_state(self._state_json, run_id=self.id, seq=self._head)

    def step_failed(self: Run, tasks: Sequence[Task], attempts: dict[int, int], node_id: str, error: BaseException) -> None:  # type: ignore[misc]
        attempt = next((attempts[t.task_id] for t in tasks if t.node_id == node_id), None)
        if attempt is None:
            attempt = next(iter(attempts.values()), 0)
        self.failed(attempt=attempt, node_id=node_id, error=error)

    def step_aborted(self: Run, tasks: Sequence[Task], attempts: dict[int, int]) -> None:  # type: ignore[misc]
        """The step was stopped in flight (a timeout, `cancel()`, Ctrl-C): the stop names `tasks[0]` (the
        engine puts a task still running first); every other task of the step gets a `dropped` event in
        the same write, so each `entered` attempt has exactly one settlement (its result, if it had one,
        is discarded with the step: the run stays at its head)."""
        first = tasks[0] if tasks else None
        why = "the run was cancelled" if self._cancel_requested else "the run timed out" if self._timed_out is not None else "the run was interrupted"
        self._journal.stash.extend(  # written first in the stop's own write (Journal.write)
            self._event_row(
                "dropped", node_id=task.node_id, attempt=attempts[task.task_id], checkpoint_seq=self._head,
                payload={"task": task.task_id, "step": self._next_cp, "reason": f"{why} while the step was in flight"},
            )
            for task in tasks[1:]
            if task.task_id in attempts
        )
        self.aborted(attempt=attempts.get(first.task_id, 0) if first else 0, node_id=first.node_id if first else "?")

    def after_step(self: Run, outcome: StepOutcome) -> bool:  # type: ignore[misc]
        hit = next((s.task.node_id for s in outcome.settled if s.task.node_id in self._breakpoints["after"]), None)
        if hit is None:
            return False
        self._park("breakpoint", hit, prompt=None, details={"when": "after", "station": hit})
        return True


def open_joins(pending: Sequence[Any]) -> list[JoinAcc]:
    """The joins of a frontier (views show `k of n` from them)."""
    return [p for p in pending if isinstance(p, JoinAcc)]
