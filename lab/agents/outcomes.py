"""A delegated station's job outcome in its answer log, and a failed job as what a `Retry` policy reads.

A station's answer log (`StationContext.answers`, kept in every wait's `prior`) has one entry per
call that waited, in the order the station's code makes them: an answer per `interrupt()`, a
child slot per `run_subgraph()`, and, once its agent job has succeeded, one *job entry* holding
the adopted outcome. So a station that parks again after its job (an `interrupt()` in `route`)
finds the outcome in the log when the answer comes, and routes on that same result: the request
id is the idempotency key, and nothing is submitted again (issue 26).

A job that ended FAILED or TIMED_OUT fails the station with `DelegatedJobFailed`, which names the
agent's error by its class names (`retry_as`): a station's `Retry(on=...)` policy matches those,
so a flaky agent is tried again as a new job (`lab.retry`).
"""

from __future__ import annotations

import json
import traceback
from typing import Any

from ..errors import RunStateError

__all__ = ("JOB_ENTRY", "job_entry", "entry_job", "take_outcome", "error_json", "retry_names", "outcome_of", "stored_outcome")

JOB_ENTRY = "graph_lab:agent_job"
"""The key of a job entry in a station's answer log."""

TIMEOUT_NAMES = ("builtins.TimeoutError", "builtins.OSError", "builtins.Exception", "builtins.BaseException")
"""What a TIMED_OUT job stands for when a retry policy asks (a station's own timeout is retried too)."""


def job_entry(outcome: dict[str, Any]) -> dict[str, Any]:
    """The answer-log entry of a delegated station's adopted job outcome."""
    return {JOB_ENTRY: dict(outcome)}


def entry_job(entry: Any) -> dict[str, Any] | None:
    """The job outcome an answer-log entry holds, or None for another kind of entry."""
    if isinstance(entry, dict) and len(entry) == 1 and isinstance(entry.get(JOB_ENTRY), dict):
        return entry[JOB_ENTRY]
    return None


def take_outcome(station: Any, name: str) -> dict[str, Any] | None:
    """The job outcome this station's delegation gets now, consuming its place in the answer log.

    From the log when the station parked again after its job (say, `interrupt()` in `route`); else
    the outcome the station's delegate wait was just answered with, which a SUCCEEDED job then
    enters into the log (a later wait keeps it); else None: the station delegates.
    """
    if station.used < len(station.answers):
        outcome = entry_job(station.answers[station.used])
        if outcome is None:
            raise RunStateError(
                f"delegated station {name} reached its agent job where it called interrupt() or run_subgraph() "
                f"before it parked (call {station.used + 1} of its run); a station makes its calls in the same "
                "order every time it runs: make that order depend on the state, not on anything that changes"
            )
        station.used += 1
        return outcome
    outcome = station.job
    if outcome is not None and outcome.get("status") == "SUCCEEDED":
        station.answers.append(job_entry(outcome))
        station.used += 1
    return outcome


def error_json(exc: BaseException, *, qualified: bool = True) -> dict[str, Any]:
    """A job's error as JSON: its class, message and traceback, and the names of its classes (`mro`)."""
    cls = type(exc)
    return {
        "type": f"{cls.__module__}.{cls.__qualname__}" if qualified else cls.__qualname__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
        "mro": [f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__ if c is not object],
    }


def retry_names(outcome: dict[str, Any]) -> tuple[str, ...] | None:
    """The class names a retry policy's `on` is matched against for a job that ended so; None: never retried.

    A FAILED job stands for the agent's error (its classes, as recorded); a TIMED_OUT one for a
    `TimeoutError`; a CANCELLED job (a person's or the run's choice) and a LOST one are not retried.
    """
    status = outcome.get("status")
    if status == "TIMED_OUT":
        return TIMEOUT_NAMES
    if status != "FAILED":
        return None
    error = outcome.get("error") or {}
    names = error.get("mro")
    if isinstance(names, list) and names:
        return tuple(str(n) for n in names)
    kind = error.get("type")
    return (str(kind),) if kind else ()


def outcome_of(rec: Any, by: str = "agent") -> dict[str, Any]:
    """What a run adopts from a job that ended (its `JobRecord`): the wait's resolution."""
    return {"request_id": rec.request_id, "status": rec.status, "output": rec.output, "error": rec.error, "by": by}


def stored_outcome(request_id: str, status: str, output: Any, error: Any) -> dict[str, Any]:
    """`outcome_of` the terminal just recorded, as the store hands it back (its JSON columns round-trip), so
    a run adopts the same value whether it reads the job back or takes what its own process recorded."""
    stored = json.loads(json.dumps({"output": output, "error": error}))
    return {"request_id": request_id, "status": status, "output": stored["output"], "error": stored["error"], "by": "agent"}
