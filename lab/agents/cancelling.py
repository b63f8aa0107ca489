"""Cancelling a job: CANCELLING, containment, CANCELLED, then evidence, channel closure and cleanup.

Seed 001 ("API cancellation follows Workers"): "a worker observing CANCELLING releases volatile
execution resources for containment acknowledgement while retaining its checkpoint. After
CANCELLED commits, the engine handles terminal evidence and channel closure before best-effort
resource cleanup; failed evidence persistence does not prevent that cleanup." So a cancel here:

1. records `CANCELLING` (from any live state, or from `LOST`): durable before anything is
   stopped, so a lab opened meanwhile sees the cancel asked, and from here the runner's own
   terminal is inert (only `CANCELLED` follows `CANCELLING`);
2. contains the runner: the task is cancelled and awaited, the worker killed and reaped;
3. commits `CANCELLED` (the run's checkpoint and wait are kept: the station fails naming it);
4. records the terminal evidence the runner left (progress lines not yet read, a result it wrote
   too late, kept `inert`, the model calls it recorded: docs/replay.md), then closes the channel
   (the job's completion, the views' listeners);
5. cleans up, best effort: the worker's job folder is removed, its handles dropped. A failure to
   record the evidence is logged and does not prevent the cleanup.

A lab opening a store with a job left `CANCELLING` (the process cancelling it stopped) finishes
the cancel from step 2 when that process is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..records import JobRecord
from .errors import AgentJobStateError
from .files import JobFiles, alive, process_identity
from .lifecycle import allowed_from
from .worker_calls import adopt_calls

if TYPE_CHECKING:
    import concurrent.futures

__all__ = ("Cancelling", "KILL_WAIT", "POLL")

log = logging.getLogger(__name__)

POLL = 0.05
"""Seconds between looks at a worker's folder while its job runs."""
KILL_WAIT = 10.0
"""Seconds to wait for a killed worker to be gone (containment) before giving up."""


class Cancelling:
    """The board's cancel, in the seed's order (mixed into `AgentBoard`)."""

    store: Any
    folder: str
    _tasks: dict[str, asyncio.Task[Any]]
    _procs: dict[str, Any]
    _done: dict[str, concurrent.futures.Future[Any]]
    _cancelling: set[str]

    def _notify(self, request_id: str) -> None: ...
    def _start(self, request_id: str, coro: Any) -> None: ...
    async def _follow(self, rid: str) -> None: ...
    def _lines_ingested(self, request_id: str) -> int: ...
    def _ingest(self, rid: str, files: JobFiles, start: int) -> int: ...
    def completion(self, request_id: str) -> concurrent.futures.Future[Any]: ...
    def record_admission(self, rid: str) -> None: ...

    async def acancel(self, request_id: str, note: str | None = None) -> JobRecord:
        self.record_admission(request_id)  # a job started here records its admission before its cancel
        rec = self.store.job(request_id)
        if rec is None:
            raise AgentJobStateError(f"no agent job {request_id!r}; lab.agents.jobs() lists them")
        if rec.terminal and rec.status != "LOST":
            raise AgentJobStateError(f"agent job {request_id} already ended {rec.status}; there is nothing to cancel")
        why = note or "cancelled by a person"
        self._cancelling.add(request_id)
        try:
            if rec.status != "CANCELLING":
                asked = {"by": "person", "note": why, "canceller": process_identity()}
                if not self.store.transition_job(request_id, "CANCELLING", allowed_from=allowed_from("CANCELLING"), payload=asked):
                    now = self.store.job(request_id)
                    if now is not None and now.status != "CANCELLING":
                        return now  # it ended meanwhile: its terminal stands
                self._notify(request_id)
            await self.finish_cancel(rec, why)
        finally:
            self._cancelling.discard(request_id)
        out = self.store.job(request_id)
        assert out is not None
        return out

    def recover_cancelling(self, rec: JobRecord, state_of: Callable[[dict[str, Any] | None], str]) -> None:
        """On open, a job left CANCELLING: followed while the process cancelling it lives (`state_of` its
        identity: `ownership.runner_state`), else its cancel is finished here from containment on."""
        asked = next((e.payload for e in reversed(self.store.job_events(rec.request_id)) if e.to_status == "CANCELLING"), {})
        if state_of(asked.get("canceller")) in ("alive", "elsewhere"):
            self._start(rec.request_id, self._follow(rec.request_id))
            return
        self._start(rec.request_id, self._finish_recovered(rec, str(asked.get("note") or "cancelled by a person")))

    async def _finish_recovered(self, rec: JobRecord, why: str) -> None:
        try:
            await self.finish_cancel(rec, why)
        except Exception:
            log.exception("finishing the cancel of agent job %s failed; reopening the lab tries again", rec.request_id)
        finally:
            self._tasks.pop(rec.request_id, None)

    async def finish_cancel(self, rec: JobRecord, why: str) -> None:
        """Steps 2 to 5 for a job recorded CANCELLING: contain, commit, evidence and closure, cleanup."""
        rid = rec.request_id
        await self._contain(rec)
        self.store.transition_job(
            rid, "CANCELLED", allowed_from=("CANCELLING",), terminal=True, error={"message": why}, payload={"by": "person"}
        )
        try:
            self._cancel_evidence(rec)
        except Exception:
            log.exception("recording what agent job %s left when it was cancelled failed; cleaning up anyway", rid)
        done = self.completion(rid)  # the channel closes: a run or a wait() awaiting the job goes on
        if not done.done():
            done.set_result(None)
        self._notify(rid)
        self._cleanup(rec)

    def _cancel_evidence(self, rec: JobRecord) -> None:
        """What a cancelled worker left in its folder: progress not yet read, and a result it wrote too late (inert)."""
        if rec.runner != "subprocess":
            return
        files = self._files(rec)
        adopt_calls(self.store, rec, self.folder)  # the model calls it made: a fork or retry replays them
        self._ingest(rec.request_id, files, self._lines_ingested(rec.request_id))
        result = files.read_json(files.result)
        if isinstance(result, dict) and result.get("status"):
            status = result["status"]
            self.store.transition_job(
                rec.request_id, status, allowed_from=allowed_from(status), terminal=True, payload={"by": "worker"},
                output=result.get("output"), error=result.get("error"), usage=result.get("usage"),
            )  # fmt: skip  # CANCELLED won: kept as an inert event, never applied

    def _cleanup(self, rec: JobRecord) -> None:
        """Best effort: drop the job's handles and remove a worker's job folder."""
        rid = rec.request_id
        self._procs.pop(rid, None)
        if rec.runner == "subprocess":
            shutil.rmtree(self._files(rec).folder, ignore_errors=True)

    def _files(self, rec: JobRecord) -> JobFiles:
        return JobFiles((rec.worker or {}).get("folder") or os.path.join(self.folder, rec.request_id))

    async def _contain(self, rec: JobRecord) -> None:
        """Stop whatever runs the job and wait until it has stopped (seed 001: containment returns first)."""
        task = self._tasks.get(rec.request_id)
        if rec.runner == "subprocess":
            proc = self._procs.get(rec.request_id)
            identity = self.worker_identity(rec)
            if proc is not None and proc.poll() is None:
                proc.kill()
            elif identity and alive(identity):
                try:
                    os.kill(int(identity["pid"]), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + KILL_WAIT
            while time.monotonic() < deadline:
                gone = proc.poll() is not None if proc is not None else not alive(identity)
                if gone:
                    break
                await asyncio.sleep(POLL)
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
            await asyncio.wait({task}, timeout=KILL_WAIT)

    def worker_identity(self, rec: JobRecord) -> dict[str, Any] | None:
        """The worker process of a subprocess job, as its folder or its row records it."""
        files = self._files(rec)
        return files.read_json(files.worker) or (rec.worker if rec.worker and "pid" in rec.worker else None)
