"""How far one call may drive a run: a step limit and a whole-run timeout (seed 002 "Bounds").

A *step* is one super-step of stations that do work: one station visit of a serial run, one
frontier step of a parallel or super-step-model run. Pure routing (the start, decisions, forks,
joins, the end) is not a step (`lab.engine.tasks.routing_only`). The limit counts the steps of
one drive (`run.run()`, `run.arun()`, `run.stream()`), as LangGraph's `recursion_limit` counts
the steps of one `invoke`: reaching it stops the run as `failed` with a `StepLimitError`, the
last checkpoint stays the head, and `run.run(step_limit=...)` (or `run.retry()`) goes on from
there. Retry tries of a station do not count (seed 003). The default is the seed's 100: no
notebook or test graph takes that many steps in one call, and a graph that loops forever stops
instead of hanging the cell.

Seed 002 caps *total* super-steps per run; the lab's `step_limit` caps each call (so a run can
go on after reaching it, which a notebook wants), and a run started with
`total_step_limit=N` is capped in total as well: its steps on the head's branch (lab.run_total)
never pass N across calls, resumes and restarts (docs/seed-differences.md).

A run keeps the limits it started with beside its counters in every checkpoint (only when they
differ from the defaults, so an ordinary run writes nothing extra), so a resume after a
restart keeps them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import ArgumentError

__all__ = ("DEFAULT_STEP_LIMIT", "UNSET", "Limits", "check_step_limit", "check_timeout")

DEFAULT_STEP_LIMIT = 100
"""Steps one call may take before the run fails with `StepLimitError` (seed 002: "default 100")."""


class _Unset:
    """A bound not given here: it comes from the next level (call -> run -> graph -> default).

    None cannot say that: None means "no limit".
    """

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def check_step_limit(value: Any, where: str) -> int | None:
    """`value` as a step limit (an int >= 1, or None for no limit), or an error naming `where`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(
            f"{where}: step_limit={value!r}; a step limit is a whole number of steps, at least 1 "
            f"(the default is {DEFAULT_STEP_LIMIT}), or None for no limit"
        )
    return value


def check_timeout(value: Any, where: str, what: str = "timeout") -> float | None:
    """`value` as a timeout in seconds (a positive number, or None for none), or an error naming `where`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ArgumentError(f"{where}: {what}={value!r}; a timeout is a positive number of seconds, or None for none")
    return float(value)


@dataclass(frozen=True, slots=True)
class Limits:
    """A run's bounds: steps per call, seconds per call, steps in total (None: unbounded)."""

    step_limit: int | None = DEFAULT_STEP_LIMIT
    timeout: float | None = None
    total_step_limit: int | None = None

    def to_json(self) -> dict[str, Any] | None:
        """What a run records beside its counters; None for the defaults (nothing extra is written)."""
        if self == Limits():
            return None
        # no `timeout` key for none (read back as None): a checkpoint row without a `null` is written
        # by the journal's compiled encoder (lab/store/journal.py); `step_limit` stays, None included
        data: dict[str, Any] = {"step_limit": self.step_limit}
        if self.timeout is not None:
            data["timeout"] = self.timeout
        return data if self.total_step_limit is None else {**data, "total_step_limit": self.total_step_limit}

    @classmethod
    def from_counters(cls, counters: dict[str, Any] | None) -> Limits:
        """The limits a run recorded; the defaults when it recorded none."""
        data = (counters or {}).get("limits")
        if not data:
            return cls()
        return cls(data.get("step_limit"), data.get("timeout"), data.get("total_step_limit"))
