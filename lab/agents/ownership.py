"""Who runs a live job, and whether this process can tell it is gone (docs/agents.md, "LOST").

A lab that opens a store looks at every live job it does not run itself. Only a runner proven
dead on this host makes the job LOST; a runner on another host is not judged (this host cannot
see its processes), and a live lab process on this host that admitted the job is left to run it.
Such a job is left as it is and followed through the store until its own runner records its end.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any, Literal

from ..records import JobRecord
from .files import alive

__all__ = ("FOLLOW_POLL", "RunnerState", "follow_row", "owner_of", "runner_state")

FOLLOW_POLL = 1.0
"""Seconds between looks at the store row of a job another process runs."""

RunnerState = Literal["alive", "elsewhere", "gone", "unrecorded"]


def owner_of(rec: JobRecord, worker_file: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The process responsible for `rec` as far as this host can read: its worker's `worker.json`,
    else the process the row names (pid, host, start), else the lab process that admitted it."""
    if worker_file:
        return worker_file
    worker = rec.worker or {}
    if "pid" in worker:
        return worker
    admitted_by = worker.get("admitted_by")
    return admitted_by if isinstance(admitted_by, dict) and "pid" in admitted_by else None


def runner_state(identity: dict[str, Any] | None) -> RunnerState:
    """`alive` (another process on this host), `elsewhere` (another host: unknown here), `gone`
    (proven dead on this host, or this very process, which does not run it) or `unrecorded`."""
    if not identity or "pid" not in identity:
        return "unrecorded"
    state = alive(identity)
    if state is None:
        return "elsewhere"
    if not state or int(identity["pid"]) == os.getpid():
        return "gone"
    return "alive"


async def follow_row(read: Callable[[str], JobRecord | None], closed: Callable[[], bool], request_id: str) -> bool:
    """Wait until the store row of `request_id` is terminal (True), or the store closed (False)."""
    while not closed():
        rec = read(request_id)
        if rec is None or rec.terminal:
            return True
        await asyncio.sleep(FOLLOW_POLL)
    return False
