"""A `subprocess` runtime's recorded calls: shipped to its worker, recorded there, adopted by the lab.

The worker never opens the store (it outlives the kernel and writes only its job folder), so the
recording protocol of lab/recording.py crosses the job folder (docs/replay.md, docs/agents.md):

1. The lab writes into `request.json` a `recording` block (`shipped_recordings`): the job's run,
   station and checkpoint, the run's replay mode, the station's live recordings in the run's lineage
   (what the station may replay) and the runs they come from (the whole lineage when strict: a
   miss's message lists it). JSON only, secrets left out (`scrubbed`, as
   recording in process does).
2. The worker (`recording_worker`) wraps its agent's model in a `RecordedModel` with a
   `StationCalls` recorder whose store is `FolderCalls`: recordings come from the block, and each
   call it records is one complete JSON line appended to `calls.ndjson` (one `write`, then fsync),
   so a worker killed mid-line leaves a last piece without its newline, which no reader takes.
3. Adoption (`adopt_calls`, called by the board before it records the job's terminal from
   `result.json`) writes each line as a `calls` row, exactly as an in-process job's calls are
   written while the run is parked; the station turns them into `recorded` events when it takes
   the outcome in (`surface_job_calls`). Rows keep the worker's call ids, and a call id is the
   table's key (DuckDB `INSERT OR IGNORE`, PostgreSQL `ON CONFLICT DO NOTHING`), so adopting the
   same file twice (a crash between, a restart, two lab processes) writes each call once.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from ..recording import REPLAY_MODES, StationCalls, encode, known_calls, lineage, scrubbed
from ..store.calls import CallRecord, call_row
from ..store.journal import Encoded
from .files import JobFiles

__all__ = ("FolderCalls", "adopt_calls", "read_calls", "recording_worker", "shipped_recordings")

log = logging.getLogger(__name__)

_FIELDS = ("call_id", "run_id", "node_id", "checkpoint_seq", "attempt", "call_index", "kind", "name", "digest", "mode",
           "replayed_from", "input_tokens", "output_tokens", "ms")  # fmt: skip


def _data(value: Any) -> Any:
    return value.value() if type(value) is Encoded else value


def _call_json(rec: CallRecord) -> dict[str, Any]:
    out = {k: getattr(rec, k) for k in _FIELDS}
    out["request"], out["response"] = _data(rec.request), _data(rec.response)
    out["created_at"] = rec.created_at.replace(tzinfo=UTC).timestamp() if rec.created_at is not None else None
    return out


def _call_of(item: dict[str, Any]) -> CallRecord:
    created = item.get("created_at")
    return CallRecord(
        **{k: item.get(k) for k in _FIELDS},
        request=item.get("request"), response=item.get("response"),
        created_at=datetime.fromtimestamp(created, UTC).replace(tzinfo=None) if created is not None else None,
    )  # fmt: skip


# -- the lab, writing request.json ---------------------------------------------------------------


def shipped_recordings(store: Any, job: Any) -> dict[str, Any] | None:
    """The `recording` block of job `job`'s `request.json` (a `JobRecord`), or None for a job that records
    nothing (no run or station: submitted by hand; a store without calls). The mode is the run's when this
    process holds it (a resumed run's stored mode counts), as for an in-process job; the recordings are the
    station's live calls in the run's lineage, by what a replay matches on (none when the mode is `off`)."""
    if job.run_id is None or job.node_id is None or not hasattr(store, "record_call"):
        return None
    run = store.live_runs.get(job.run_id)
    mode = getattr(run, "replay", None) or "auto"
    calls = []
    if mode != "off":
        calls = known_calls(store, job.run_id).of_station(job.node_id)
        calls.sort(key=lambda c: c.created_at or datetime.min, reverse=True)  # newest first, as the store reads them
    # the lineage only names the runs a strict miss's message lists (a read per run the first time)
    runs = list(lineage(store, job.run_id)) if mode == "strict" else [job.run_id]
    block = {
        "run_id": job.run_id, "node_id": job.node_id, "checkpoint_seq": job.checkpoint_seq, "mode": mode,
        "lineage": runs + [r for r in dict.fromkeys(c.run_id for c in calls) if r not in runs],
        "calls": [_call_json(c) for c in calls],
    }  # fmt: skip
    return json.loads(scrubbed(encode(block)))  # the same secret check as a recording (they were recorded so)


# -- the worker ----------------------------------------------------------------------------------


class FolderCalls:
    """What a worker's recorder reads and writes in place of the store: the shipped recordings, and
    `calls.ndjson` in its job folder (one line per call, appended whole and synced)."""

    def __init__(self, block: dict[str, Any], folder: str | os.PathLike[str]):
        self.runs: list[str] = [str(r) for r in block.get("lineage") or [block["run_id"]]]
        self.shipped = [_call_of(c) for c in block.get("calls") or ()]
        self.path = JobFiles(folder).calls

    def lineage_calls(self, run_id: str) -> list[CallRecord]:
        return list(self.shipped)

    def recorded_calls(self, run_ids: Any, node_id: str | None = None) -> list[CallRecord]:
        return [c for c in self.shipped if c.run_id in run_ids and (node_id is None or c.node_id == node_id)]

    def get_run(self, run_id: str) -> Any:
        """What `recording.lineage` asks of a run: its parent (from the shipped lineage)."""
        i = self.runs.index(run_id)

        class _Run:
            parent_run_id = self.runs[i + 1] if i + 1 < len(self.runs) else None

        return _Run

    def record_call(self, rec: CallRecord, *, sync: bool = True) -> None:
        """Append the call as one JSON line in one `write`, then fsync (a paid call is kept)."""
        line = encode(_call_json(rec)) + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)


@asynccontextmanager
async def recording_worker(agent: Any, block: dict[str, Any] | None, folder: str | os.PathLike[str]) -> AsyncIterator[None]:
    """Inside, the worker's agent records and replays its model requests as an in-process job's does
    (`RecordedModel`, the recorder of lab/recording.py); a request without a `recording` block runs as is."""
    if not isinstance(block, dict) or getattr(agent, "model", None) is None:
        yield
        return
    from .recorded_model import recording_agent

    mode = block.get("mode") if block.get("mode") in REPLAY_MODES else "auto"
    calls = StationCalls(FolderCalls(block, folder), block["run_id"], block["node_id"], block.get("checkpoint_seq"), mode=mode)
    with recording_agent(agent, calls):
        yield


# -- the lab, adopting the worker's result ---------------------------------------------------------


def read_calls(folder: str | os.PathLike[str]) -> list[CallRecord]:
    """The calls a worker recorded in `folder`, in order: its complete lines only (a piece after the last
    newline, from a worker killed as it wrote, is not read)."""
    path = JobFiles(folder).calls
    try:
        with open(path, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    out = []
    for i, line in enumerate(text.split(b"\n")[:-1]):
        try:
            out.append(_call_of(json.loads(line)))
        except (ValueError, TypeError):  # never written so: the job's outcome is adopted without it
            log.warning("recorded call %d of %s is not a call's JSON; it is left out", i + 1, path)
    return out


def adopt_calls(store: Any, job: Any, jobs_folder: str | os.PathLike[str]) -> int:
    """Write the calls the worker of job `job` (a `JobRecord`) recorded in its folder (the one its row names,
    else its request id's under `jobs_folder`) as rows of `calls`, in
    one write, before the job's terminal is recorded: the station takes them in as `recorded` events with
    the outcome. Idempotent (rows keep their call ids, the table's key). The live ones join the run's
    recordings this process knows, so its next job or fork replays them. Returns how many were read."""
    if job is None or job.run_id is None or not hasattr(store, "record_call"):
        return 0
    folder = (job.worker or {}).get("folder") or os.path.join(jobs_folder, job.request_id)
    recs = [c for c in read_calls(folder) if (c.run_id, c.node_id) == (job.run_id, job.node_id)]
    if not recs:
        return 0
    rows = []
    for c in recs:  # the same secret check as in process (the worker made it too): the rows carry the text
        request = Encoded(scrubbed(encode(c.request))) if c.request is not None else None
        response = Encoded(scrubbed(encode(c.response))) if c.response is not None else None
        rows.append(call_row(CallRecord(**{**{k: getattr(c, k) for k in _FIELDS}, "request": request,
                                           "response": response, "created_at": c.created_at})))  # fmt: skip
    store.write(rows, sync=True)
    known = known_calls(store, job.run_id)
    for c in recs:
        if c.mode == "live":
            known.add(c)
    return len(recs)
