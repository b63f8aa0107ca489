"""A super-step commits in full or it does not happen (seed 002), in both super-step engines.

`StepOutcome` is what one step did; the run (`StepHooks`) turns it into one checkpoint and its
events in one journal transaction. `commit` hands it over: when a value of the step cannot be
checkpointed (the codec refuses the folded state, a next task's input or the End data), nothing
of the step is written, the run fails at its last good checkpoint with a `failed` event naming
the station and the value, its state and frontier are the head's again, and `run.retry()` runs
the whole step once more. The serial engine does the same for a station (`Run.settled`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic_graph import EndMarker
from pydantic_graph.node import EndNode

from ..errors import CheckpointValueError, StateContractError
from ..gates import StationContext, WaitSignal
from .tasks import Task

__all__ = ("Settled", "StepHooks", "StepOutcome", "commit")


@dataclass(frozen=True, slots=True)
class Settled:
    """A task that finished: how long it ran and the stations its result went on to."""

    task: Task
    attempt: int
    ms: float
    next: tuple[str, ...]


@dataclass(slots=True)
class StepOutcome:
    """What one super-step did; the run turns it into one checkpoint and its events."""

    settled: list[Settled] = field(default_factory=list)
    parked: list[tuple[Task, int, WaitSignal]] = field(default_factory=list)
    failed: list[tuple[Task, int, BaseException]] = field(default_factory=list)
    dropped: list[tuple[Task, int, str]] = field(default_factory=list)
    """Tasks whose result was discarded: cancelled by End from a sibling, or by a join's reducer."""
    frontier: list[Any] = field(default_factory=list)
    """The next frontier: pending tasks (incl. parked and failed ones) and open joins."""
    end: EndMarker[Any] | None = None
    fired: list[str] = field(default_factory=list)
    """Joins whose fork run completed in this step."""


class StepHooks(Protocol):
    """What the super-step engine reports; the run owns checkpoints, events and waits."""

    def task_contexts(self, tasks: Sequence[Task]) -> dict[int, StationContext] | None:
        """The context of each task about to run, or None to park before the step (a breakpoint)."""
        ...

    def step_entered(self, tasks: Sequence[Task]) -> dict[int, int]:
        """The step's tasks are about to run; returns each task's attempt number."""
        ...

    def task_returned(self, task: Task, attempt: int | None, ms: float) -> None:
        """A task's node returned, before its step commits: a stream shows its finish now (seed 003)."""
        ...

    def step_settled(self, outcome: StepOutcome) -> None:
        """The step finished: write its checkpoint (and waits, failure, End) in one transaction.

        Raises `StateContractError` (before writing anything) when a value of the step cannot be
        checkpointed: its state, a next task's input or its End data.
        """
        ...

    def step_parked(self, parked: Sequence[tuple[Task, int, WaitSignal]]) -> None:
        """A step that applied nothing parks on its waits (the super-step model): one waiting checkpoint."""
        ...

    def head_state(self) -> Any:
        """A fresh copy of the state at the head: what a retried try starts from (seed 003)."""
        ...

    def step_failed(self, tasks: Sequence[Task], attempts: dict[int, int], node_id: str, error: BaseException) -> None:
        """The step failed as a whole (a node, a reducer, a transform, a decision, or its checkpoint could not
        be written): nothing of it is kept, the state and frontier are the head's again."""
        ...

    def step_aborted(self, tasks: Sequence[Task], attempts: dict[int, int]) -> None:
        """The step was cancelled in flight."""
        ...

    def task_retrying(self, task: Task, attempt: int, error: Exception, failed_tries: int) -> float | None:
        """A task raised `error`: seconds to wait before trying it again in this step (its policy), or None."""
        ...

    def after_step(self, outcome: StepOutcome) -> bool:
        """True parks the run after this step (a breakpoint after a settled station)."""
        ...


def commit(
    hooks: StepHooks,
    tasks: Sequence[Task],
    attempts: dict[int, int],
    outcome: StepOutcome,
    blame: Callable[[StateContractError], tuple[str, str] | None] | None = None,
) -> bool:
    """Write the step through `hooks.step_settled`; False when its values cannot be stored (the step failed).

    `blame(error)` names the station (and what of its result) that holds the refused value, when
    the engine can tell; otherwise the station is found from the error (a next task's input names
    the task that produced it) or is the first that settled.
    """
    try:
        hooks.step_settled(outcome)
    except StateContractError as exc:
        node_id, what = (blame(exc) if blame is not None else None) or _blame(exc, outcome, tasks)
        stations = ", ".join(dict.fromkeys(t.node_id for t in tasks)) or "-"
        error = CheckpointValueError(
            f"station {node_id}'s {what} cannot be checkpointed: {exc}. The super-step of {stations} was discarded "
            "as a whole (a step commits in full or not at all): nothing of it is stored and the run stays at its "
            "last checkpoint with the state it had there. Fix the station, then run.retry() runs the step again"
        )
        error.__cause__ = exc
        hooks.step_failed(tasks, attempts, node_id, error)
        return False
    return True


_INPUT_OF = re.compile(r"the input of (\S+?)[ (]")


def _blame(exc: StateContractError, outcome: StepOutcome, tasks: Sequence[Task]) -> tuple[str, str]:
    """The station whose result holds the refused value, as far as the outcome tells."""
    found = _INPUT_OF.search(str(exc))
    if found is not None:  # a next task's input: the task that routed there produced it
        target = found.group(1)
        for s in outcome.settled:
            if target in s.next:
                return s.task.node_id, f"output (the input of {target})"
    if outcome.end is not None and "End data" in str(exc):
        source = next((s.task.node_id for s in outcome.settled if EndNode.id in s.next), None)
        if source is not None:
            return source, "End data"
    first = outcome.settled[0].task.node_id if outcome.settled else (tasks[0].node_id if tasks else "?")
    return first, "update of the state"
