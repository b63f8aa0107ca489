"""The store's agent-job tables: `jobs` (one row per request) and `job_events` (its lifecycle).

Mixed into the DuckDB store. Unlike runs, jobs are not journalled: a job has a handful of rows
(a transition is rare next to a station boundary), and each transition is one conditional
`UPDATE ... WHERE status IN (...)` in a transaction with its event row, so whichever caller
records a terminal first wins and a later one is kept as an `inert` event, never applied
(seed 001: "the first admitted terminal wins and late results are inert"). The same rule holds
for any backend that offers a conditional update.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import duckdb

from ..errors import StoreError
from ..records import JobEventRecord, JobRecord

__all__ = ("JobTables",)

_JOB_COLS = (
    "request_id, run_id, node_id, wait_owner, checkpoint_seq, runtime, runner, request, digest, status, "
    "retry_of, output, error, usage, worker, created_at, updated_at, ended_at"
)
_JEV_COLS = "request_id, seq, kind, from_status, to_status, payload, created_at"
_SETTABLE = frozenset({"output", "error", "usage", "worker"})


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _load(value: Any) -> Any:
    return None if value is None else json.loads(value)


class JobTables:
    """Insert, transition and read agent jobs (lab/agents drives them)."""

    _reading: Any
    _session: Any
    _check_writable: Any
    _check_open: Any
    _lock: Any
    _con: Any

    @contextmanager
    def _job_tx(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The store's connection inside BEGIN ... COMMIT (ROLLBACK on error), errors translated."""
        self._check_writable()
        with self._jobs_reading() as con:
            con.execute("BEGIN")
            try:
                yield con
            except BaseException as exc:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                if isinstance(exc, duckdb.Error):
                    raise StoreError(f"cannot record the agent job: {str(exc).splitlines()[0]}") from None
                raise
            try:
                con.execute("COMMIT")
            except duckdb.Error as err:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot record the agent job: {str(err).splitlines()[0]}") from None

    @contextmanager
    def _jobs_reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection for the job tables, without folding the journal first: jobs never go
        through the journal, so a fold (milliseconds while a run writes) would buy nothing here."""
        with self._session() as con:  # the file attached for this operation (docs/store.md "Who holds what")
            self._check_open()
            try:
                yield con
            except duckdb.Error as exc:
                raise StoreError(f"cannot read the agent jobs of {getattr(self, 'path', 'the store')}: {str(exc).splitlines()[0]}") from None

    def insert_job(self, job: JobRecord) -> tuple[JobRecord, bool]:
        """Store `job` (status QUEUED) with its first event; if its request id is taken, the stored job.

        Returns `(job, inserted)`: the caller compares digests (a different request under a taken
        id is refused there, with words about the request).
        """
        with self._job_tx() as con:
            row = con.execute(f"SELECT {_JOB_COLS} FROM jobs WHERE request_id = ?", [job.request_id]).fetchone()
            if row is not None:
                return _job_record(row), False
            now = _now()
            con.execute(
                f"INSERT INTO jobs ({_JOB_COLS}) VALUES ({', '.join(['?'] * 18)})",
                [
                    job.request_id, job.run_id, job.node_id, job.wait_owner, job.checkpoint_seq, job.runtime,
                    job.runner, _dump(job.request), job.digest, job.status, job.retry_of, _dump(job.output),
                    _dump(job.error), _dump(job.usage), _dump(job.worker), now, now, None,
                ],  # fmt: skip
            )
            _event(con, job.request_id, "transition", None, job.status, {"runtime": job.runtime, "runner": job.runner}, now)
            row = con.execute(f"SELECT {_JOB_COLS} FROM jobs WHERE request_id = ?", [job.request_id]).fetchone()
        return _job_record(row), True

    def transition_job(
        self,
        request_id: str,
        to: str,
        *,
        allowed_from: Sequence[str],
        terminal: bool = False,
        payload: dict[str, Any] | None = None,
        **fields: Any,
    ) -> bool:
        """Move a job to `to` if it is in one of `allowed_from`, with its event, in one transaction.

        `fields` (output, error, usage, worker) are set with it. When the job is elsewhere (a
        terminal already won), nothing is applied and an `inert` event keeps what arrived.
        Returns True when applied.
        """
        unknown = set(fields) - _SETTABLE
        if unknown:
            raise ValueError(f"transition_job cannot set {sorted(unknown)}; it sets {sorted(_SETTABLE)}")
        now = _now()
        with self._job_tx() as con:
            before = con.execute("SELECT status FROM jobs WHERE request_id = ?", [request_id]).fetchone()
            if before is None:
                raise StoreError(f"no agent job {request_id!r} in the store; lab.agents.jobs() lists them")
            sets = ["status = ?", "updated_at = ?"] + [f"{k} = ?" for k in fields]
            args: list[Any] = [to, now] + [_dump(v) for v in fields.values()]
            if terminal:
                sets.append("ended_at = ?")
                args.append(now)
            applied = con.execute(
                f"UPDATE jobs SET {', '.join(sets)} WHERE request_id = ? AND status IN (SELECT unnest(?::VARCHAR[])) "
                "RETURNING request_id",
                [*args, request_id, list(allowed_from)],
            ).fetchall()
            body = dict(payload or {})
            if applied:
                _event(con, request_id, "transition", before[0], to, body, now)
            else:
                body.update({k: v for k, v in fields.items() if v is not None})
                _event(con, request_id, "inert", before[0], to, body, now)
        return bool(applied)

    def add_job_events(self, request_id: str, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Append observations of a running job (agent messages, usage); they never change its status.

        An observation read from a worker's progress file carries its `line`: a line already recorded
        (another process following the same worker) is not recorded twice."""
        if not events:
            return
        now = _now()
        with self._job_tx() as con:
            for kind, payload in events:
                if "line" in payload and con.execute(
                    "SELECT 1 FROM job_events WHERE request_id = ? AND CAST(payload->>'line' AS BIGINT) = ?",
                    [request_id, payload["line"]],
                ).fetchone():
                    continue
                _event(con, request_id, kind, None, None, payload, now)

    def job(self, request_id: str) -> JobRecord | None:
        with self._jobs_reading() as con:
            row = con.execute(f"SELECT {_JOB_COLS} FROM jobs WHERE request_id = ?", [request_id]).fetchone()
        return _job_record(row) if row else None

    def jobs(self, *, run_id: str | None = None, status: str | None = None, wait_owner: str | None = None) -> list[JobRecord]:
        """Jobs oldest first, filtered by run, status or the wait they answer."""
        sql = f"SELECT {_JOB_COLS} FROM jobs WHERE 1=1"
        args: list[Any] = []
        for col, value in (("run_id", run_id), ("status", status), ("wait_owner", wait_owner)):
            if value is not None:
                sql += f" AND {col} = ?"
                args.append(value)
        with self._jobs_reading() as con:
            rows = con.execute(sql + " ORDER BY created_at, request_id", args).fetchall()
        return [_job_record(r) for r in rows]

    def job_events(self, request_id: str, *, after: int = -1) -> list[JobEventRecord]:
        """A job's events in order (those with seq > `after`)."""
        with self._jobs_reading() as con:
            rows = con.execute(
                f"SELECT {_JEV_COLS} FROM job_events WHERE request_id = ? AND seq > ? ORDER BY seq", [request_id, after]
            ).fetchall()
        return [
            JobEventRecord(r[0], int(r[1]), r[2], r[3], r[4], _load(r[5]) or {}, r[6]) for r in rows
        ]


def _event(
    con: duckdb.DuckDBPyConnection,
    request_id: str,
    kind: str,
    from_status: str | None,
    to_status: str | None,
    payload: dict[str, Any],
    at: datetime,
) -> None:
    con.execute(
        "INSERT INTO job_events SELECT ?, coalesce(max(seq), -1) + 1, ?, ?, ?, ?, ? FROM job_events WHERE request_id = ?",
        [request_id, kind, from_status, to_status, json.dumps(payload), at, request_id],
    )


def _job_record(r: Iterator[Any] | tuple[Any, ...]) -> JobRecord:
    r = tuple(r)
    return JobRecord(
        request_id=r[0],
        run_id=r[1],
        node_id=r[2],
        wait_owner=r[3],
        checkpoint_seq=r[4],
        runtime=r[5],
        runner=r[6],
        request=_load(r[7]) or {},
        digest=r[8],
        status=r[9],
        retry_of=r[10],
        output=_load(r[11]),
        error=_load(r[12]),
        usage=_load(r[13]),
        worker=_load(r[14]),
        created_at=r[15],
        updated_at=r[16],
        ended_at=r[17],
    )
