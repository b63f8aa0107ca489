"""Reopening a store: the live jobs this process does not run, adopted, followed or recorded LOST.

Mixed into `AgentBoard` (board.py). A live job's runner is judged from what the store and the
job's folder say (ownership.py): a result a worker left is adopted, a live worker is watched, a
runner alive in another process (or on another host) is followed, and a runner proven dead on
this host makes the job LOST (never submitted again on its own).

A QUEUED job is normally one that was never started: its station's run admits it when it goes on.
But a job a delegated station starts as a task of its own process records ADMITTED, PREPARING and
RUNNING only with its first observations or its terminal (issue 27 item 4, `admission_mark`); what
makes that start durable is the station's park, whose wait names the process that admitted it
(`admitted_by`). A QUEUED job whose wait says so was started: it is judged like a RUNNING one.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from ..records import JobRecord, WaitRecord
from .files import JobFiles, alive, process_identity
from .lifecycle import LIVE
from .ownership import follow_row, owner_of, runner_state
from .worker_calls import adopt_calls

if TYPE_CHECKING:
    import concurrent.futures

__all__ = ("Recovering", "admitted_by")

log = logging.getLogger(__name__)


def admitted_by(wait: WaitRecord | None) -> dict[str, Any] | None:
    """The process a delegated station's park says started its job as a task, if it says so."""
    details = wait.details if wait is not None else None
    mark = details.get("admitted_by") if isinstance(details, dict) else None
    return mark if isinstance(mark, dict) and "pid" in mark else None


class Recovering:
    """The board's side of reopening a store (mixed into `AgentBoard`)."""

    store: Any
    folder: str
    _tasks: dict[str, asyncio.Task[Any]]

    def _notify(self, request_id: str) -> None: ...
    def _start(self, request_id: str, coro: Any) -> None: ...
    def _lines_ingested(self, request_id: str) -> int: ...
    def _ingest(self, rid: str, files: JobFiles, start: int) -> int: ...
    def _deliver_result(self, rid: str, result: dict[str, Any]) -> None: ...
    async def _watch(self, rec: JobRecord, files: JobFiles, proc: Any) -> None: ...
    def completion(self, request_id: str) -> concurrent.futures.Future[Any]: ...
    def deliver(self, request_id: str, status: str, **kwargs: Any) -> bool: ...
    def runtime(self, name: str) -> Any: ...

    def admission_mark(self, runtime: str) -> dict[str, Any]:
        """What a delegated station's park records when its job will start as a task of this process right
        after it: `{"admitted_by": this process}` on a store that defers the job's admission (`JobTables.
        defers_admission`), else nothing (the admission is then committed before the agent starts)."""
        if getattr(self.store, "defers_admission", False) and self.runtime(runtime).runner == "task":
            return {"admitted_by": process_identity()}
        return {}

    def recover(self) -> None:
        for rec in self.store.jobs():
            if rec.status in LIVE and rec.status != "QUEUED":
                self.recover_one(rec)
            elif rec.status == "QUEUED" and rec.request_id not in self._tasks:
                started = self.started_by(rec)
                if started is not None:
                    self.recover_one(rec, started)
            elif rec.status == "CANCELLING" and rec.request_id not in self._tasks:
                self.recover_cancelling(rec, runner_state)  # type: ignore[attr-defined]  # cancelling.py

    def started_by(self, rec: JobRecord) -> dict[str, Any] | None:
        """For a QUEUED task job: the process its station's park says started it, else None (never started)."""
        if rec.runner != "task" or rec.run_id is None or rec.wait_owner is None:
            return None
        wait = next((w for w in self.store.waits(rec.run_id) if w.owner == rec.wait_owner), None)
        return admitted_by(wait)

    def recover_one(self, rec: JobRecord, started: dict[str, Any] | None = None) -> None:
        """A live job this process does not run: adopt its result, watch its worker, or record it LOST.

        `started`: the process that started a QUEUED job as a task (its station's park says so)."""
        rid = rec.request_id
        if rid in self._tasks:
            return
        self.completion(rid)
        if rec.runner == "subprocess":
            files = JobFiles((rec.worker or {}).get("folder") or os.path.join(self.folder, rid))
            result = files.read_json(files.result)
            if result is not None:  # it finished while no lab watched: adopt it now
                self._ingest(rid, files, self._lines_ingested(rid))
                self._deliver_result(rid, result)
                return
            worker_file = files.read_json(files.worker)
            if worker_file is not None and alive(worker_file):
                self._start(rid, self._watch_detached(rec, files))
                return
            if runner_state(owner_of(rec, worker_file)) in ("alive", "elsewhere"):
                self._start(rid, self._follow(rid))  # its runner is not proven dead here: leave it to it
                return
            adopt_calls(self.store, rec, self.folder)  # the calls it made before it died: a retry replays them
            if worker_file is None and rec.status == "ADMITTED":
                why = "the lab stopped after admitting it; whether its worker started is unknown"
            else:
                why = "its worker process is gone and left no result"
        else:
            if runner_state(owner_of(rec) or started) in ("alive", "elsewhere"):
                self._start(rid, self._follow(rid))  # another live process, or another host, runs it
                return
            why = "the process that ran it as a task stopped"
        self.deliver(rid, "LOST", error={"message": why}, by="recovery")

    async def _follow(self, rid: str) -> None:
        """A job another process runs: resolve its completion once its row is terminal."""
        try:
            if await follow_row(self.store.job, lambda: self.store.closed, rid):
                self.completion(rid)
                self._notify(rid)
        except Exception:
            log.exception("following agent job %s in the store failed; reopening the lab looks again", rid)
        finally:
            self._tasks.pop(rid, None)

    async def _watch_detached(self, rec: JobRecord, files: JobFiles) -> None:
        try:
            await self._watch(rec, files, None)
        except Exception:
            log.exception("watching agent job %s failed; reopening the lab adopts its result", rec.request_id)
        finally:
            self._tasks.pop(rec.request_id, None)
