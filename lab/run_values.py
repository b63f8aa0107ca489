"""Small values of the run kernel: a run's id and what one step did (`StepResult`).

They live below `lab.run` so the run's collaborators (waits, super-steps, time travel) can make
them without importing the run back.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ("Outcome", "StepResult", "new_run_id")

Outcome = Literal["settled", "done", "failed", "cancelled", "interrupted", "paused", "waiting"]


def new_run_id() -> str:
    """Time-ordered and URL-safe: sorts by creation, unique without coordination."""
    return f"run-{time.time_ns() // 1_000_000:012x}-{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class StepResult:
    """What one `run.step()` did."""

    node_id: str | None
    outcome: Outcome
    seq: int | None
    """The checkpoint the step wrote (the new head), if it settled."""
    next: tuple[str, ...]
    output: Any = None
    error: str | None = None
    tasks: tuple[str, ...] = ()
    """A parallel run's super-step: the station of every task that settled in it."""

    def __repr__(self) -> str:
        bits = [f"{self.node_id} {self.outcome}"]
        if len(self.tasks) > 1:
            bits.append("tasks " + ", ".join(self.tasks))
        if self.seq is not None:
            bits.append(f"checkpoint {self.seq}")
        if self.next:
            bits.append("next " + ", ".join(self.next))
        if self.outcome == "done":
            bits.append(f"output {self.output!r}")
        if self.error:
            bits.append(self.error)
        return "<StepResult " + "; ".join(bits) + ">"
