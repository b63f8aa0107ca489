"""The AgentJob lifecycle (seed 001 "Delegated Agent Macro-Nodes"), as data.

    QUEUED -> ADMITTED -> PREPARING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED | TIMED_OUT | LOST
                  (any live state, or LOST) -> CANCELLING -> CANCELLED

A job moves forward one state at a time; it may end early (FAILED, TIMED_OUT or LOST from any
live state, say when the worker dies while preparing), only RUNNING may succeed, and a terminal
never changes again, except LOST -> CANCELLING. An explicit cancel records CANCELLING first,
contains the runner, and only then CANCELLED (cancelling.py); while CANCELLING, a result the
runner still delivers is inert. The first admitted terminal wins; a later one is recorded as inert.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, get_args

from ..records import JOB_TERMINALS, JobStatus

__all__ = ("STATUSES", "LIVE", "TERMINALS", "allowed_from", "request_digest", "request_id_for")

STATUSES: tuple[str, ...] = get_args(JobStatus)
TERMINALS: frozenset[str] = JOB_TERMINALS
LIVE: tuple[str, ...] = ("QUEUED", "ADMITTED", "PREPARING", "RUNNING")
"""Statuses of a job that runs or may run (CANCELLING has not ended either, but only CANCELLED follows it)."""

_FORWARD = {"ADMITTED": ("QUEUED",), "PREPARING": ("ADMITTED",), "RUNNING": ("PREPARING",)}


def allowed_from(to: str) -> tuple[str, ...]:
    """The statuses a job may be in to move to `to`."""
    if to in _FORWARD:
        return _FORWARD[to]
    if to == "SUCCEEDED":
        return ("RUNNING",)
    if to == "CANCELLING":
        return (*LIVE, "LOST")  # a cancel asked: recorded before the runner is contained (cancelling.py)
    if to == "CANCELLED":
        return (*LIVE, "CANCELLING")  # LOST -> CANCELLING -> CANCELLED only after containment returned
    if to in ("FAILED", "TIMED_OUT", "LOST"):
        return LIVE
    raise ValueError(f"{to!r} is not a job status; the statuses are {', '.join(STATUSES)}")


def request_digest(runtime: str, request: dict[str, Any]) -> str:
    """What makes two requests the same request: the runtime and the request JSON, canonically."""
    body = json.dumps({"runtime": runtime, "request": request}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def request_id_for(run_id: str, seq: int, task: int | None = None) -> str:
    """A station's request id: it names the run and the waiting checkpoint (the step) it parked at, and
    in a parallel step the task (several branches may delegate at one checkpoint)."""
    return f"job-{run_id.removeprefix('run-')}-{seq}" + (f"-t{task}" if task is not None else "")
