"""The store's agent-job tables: `jobs` (one row per request) and `job_events` (its lifecycle).

Mixed into both stores (`DuckDBJobs` in duckdb_jobs.py, `PostgresJobs` in postgres_jobs.py),
which give it a transaction and a connection; the SQL is written once, in sql_text.py, and
rendered with the store's dialect. Each transition is one conditional `UPDATE ... WHERE status
IN (...)` in a transaction with its event row, so whichever caller records a terminal first wins
and a later one is kept as an `inert` event, never applied (seed 001: "the first admitted
terminal wins and late results are inert"). Within a transaction the store holds the job against
every other writer of it (DuckDB: the store's lock; PostgreSQL: a transaction lock on the request
id), so an event's `seq` is gap-free and the status read before an update is the one the update
sees. On DuckDB the read is skipped for a job this process wrote last (`remembers_job_heads`): its
status and next `seq` are remembered, and a head another process made stale is refused by
`job_events`' primary key (that process's write took the seq) and by the guarded UPDATE, rolled
back, and the move made again after the read.

A new job of a run this process created is not a transaction of its own on DuckDB
(`journals_new_jobs`): its QUEUED row and first event ride in the journal write of the park that
waits on it (`insert_job(ride=...)`), folded into the tables like the run's rows, and a read of
the job tables folds first. While no fold can have taken those lines (`_journal_window`: on DuckDB
the file held by this process all along and no fold here), its moves are journal lines too, the
job's whole row in each (job_journal.py; the fold keeps a job's last line); after that, its next
write is a transaction that inserts its row as the moves leave it with every event so far
(`_advance_new`), and if a fold stored the row first that insert meets the key and the moves apply
to the stored row as usual. A delegated station in this process then makes no job transaction
(issue 27 item 4). No other process can move the job while its lines are only in this journal: it
would have to fold them first, which needs the file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from ..errors import StoreError
from ..records import JobEventRecord, JobRecord
from . import sql_text as q
from .dialect import Dialect
from .job_journal import Journalled

__all__ = ("JobTables", "SETTABLE")

SETTABLE = frozenset({"output", "error", "usage", "worker"})
"""The fields a transition may set besides the status."""


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _plan(
    status: str, moves: Sequence[tuple[str, Sequence[str], bool, dict[str, Any] | None, dict[str, Any]]],
    seen: list[tuple[str, None, None, dict[str, Any]]], observed_after: int,
) -> tuple[list[tuple[str, str | None, str | None, dict[str, Any]]], dict[str, Any], str, bool, int]:  # fmt: skip
    """What `advance_job` records from a job in `status`: its events in order, the fields set, where it
    ends up, whether it ended, and how many moves applied (they stop at the first that does not)."""
    events: list[tuple[str, str | None, str | None, dict[str, Any]]] = []
    fields: dict[str, Any] = {}
    ended = False
    applied = 0
    for i, (to, allowed, terminal, payload, moved) in enumerate(moves):
        if i == observed_after:
            events += seen
        if status not in allowed:  # a terminal won already: what arrived is kept, never applied
            events.append(("inert", status, to, _kept(payload, moved)))
            if i < observed_after:
                events += seen
            last_to, _allowed, last_terminal, last_payload, last_moved = moves[-1]
            if last_terminal and i < len(moves) - 1:  # the result that followed is kept too
                events.append(("inert", status, last_to, _kept(last_payload, last_moved)))
            return events, fields, status, ended, applied
        events.append(("transition", status, to, dict(payload or {})))
        fields.update(moved)
        ended = ended or terminal
        status = to
        applied += 1
    if observed_after >= len(moves):
        events += seen
    return events, fields, status, ended, applied


def _kept(payload: dict[str, Any] | None, fields: dict[str, Any]) -> dict[str, Any]:
    """An inert event's payload: what arrived with a move that did not apply."""
    return {**(payload or {}), **{k: v for k, v in fields.items() if v is not None}}


class _Stale(Exception):
    """A job head this process remembered is not the stored one (another writer moved the job)."""


class _Taken(Exception):
    """A new job's request id is taken (its plain INSERT hit the key)."""


class _Folded(Exception):
    """A journalled job's row reached the table by a fold before its first transaction stored it."""


class _Moved(Exception):
    """Another thread moved a journalled job since its state was read: plan the write again."""


class _Missing(Exception):
    """No row of the job in the table (it may still be in another process's journal, not folded here)."""


class JobTables:
    """Insert, transition and read agent jobs (lab/agents drives them), on any backend."""

    dialect: Dialect
    insert_plain = False
    """Store a new job with a plain `INSERT`, a taken request id found by the key's conflict (then the
    transaction is rolled back and the stored job read), rather than `INSERT ... ON CONFLICT DO NOTHING
    RETURNING` (DuckDB: the plain insert ~1 ms, the conflict clause ~3 ms, a read first ~0.3-1 ms more)."""
    remembers_job_heads = False
    """Remember each job's head (status, next event seq) as this process last wrote it, and move the job
    from there without reading it first (`_advance`): a head gone stale is refused by the event key and
    the guarded UPDATE, rolled back, and the move made again after a read (DuckDB: the read, a `max(seq)`
    over the job's events, was the dearest statement of a job transaction)."""
    _job_heads_kept: dict[str, tuple[str, int]] | None = None
    journals_new_jobs = False
    """A new job of a run this process created rides in its park's journal write (`insert_job(ride=)`),
    folded into the tables, instead of a transaction of its own before the park (DuckDB)."""
    _journalled_kept: dict[str, Journalled] | None = None
    defers_admission = False
    """A job run as a task of this process records ADMITTED, PREPARING and RUNNING with its first
    observations (at most `observations.EVERY` later) or with its terminal, not in a transaction of
    their own before the agent starts; its station's park says who admitted it (lab/agents/admission.py)."""

    @abstractmethod
    def _job_tx(self, request_id: str) -> AbstractContextManager[Any]:
        """A connection inside one transaction that holds job `request_id` against every other
        writer of it (committed on success, rolled back on error); driver errors become `StoreError`."""

    @abstractmethod
    def _jobs_reading(self) -> AbstractContextManager[Any]:
        """A connection to read the job tables; driver errors become `StoreError`."""

    def _jobs_read(self) -> AbstractContextManager[Any]:
        """A connection to read the job tables as every process wrote them (DuckDB: the journals folded first)."""
        return self._jobs_reading()

    def _fold_jobs(self) -> None:
        """Fold every process's journal now (a job another process journalled and nobody folded yet)."""

    def _journal_window(self) -> Any:
        """A token that stays valid while no fold can have taken what this process journals from now on
        (None: none such); `_journal_job` journals only within it."""
        return None

    def _journal_guard(self) -> AbstractContextManager[Any]:
        """Held around checking a journal window and writing in it (DuckDB: the store's lock, which a fold needs)."""
        return contextlib.nullcontext()

    def _journal_open(self, window: Any) -> bool:
        """Whether `window` (from `_journal_window`) still holds: nothing journalled in it can have been folded."""
        return False

    def _journal_lines(self, lines: list[dict[str, Any]]) -> None:
        """Write `lines` as one journal transaction (durable as a boundary is)."""
        raise NotImplementedError

    def _journal_job(
        self, request_id: str, before: Journalled, after: Journalled, since: int, head: tuple[str, int], ended: bool
    ) -> bool | None:
        """Journal job `request_id` moved from `before` to `after` (its lines from seq `since`), its head then
        `head`, if `before`'s window holds: True; False if it does not (a transaction stores it); None if
        another thread moved the job since `before` (plan again)."""
        with self._journal_guard():
            if self._journalled.get(request_id) is not before:
                return None
            if not self._journal_open(before.window):
                return False
            self._journal_lines(after.lines(since))
            if ended:  # rarely written again: a later write folds first (`_Missing`)
                self._journalled.pop(request_id, None)
            else:
                self._journalled[request_id] = after
            self._remember(request_id, *head, ended=ended)
            return True

    def _job_sql(self, text: str) -> str:
        return self.dialect.sql(text)

    def _key_conflict(self, exc: BaseException) -> bool:
        """Whether the driver error `exc` is a primary-key conflict (the transaction is then rolled back)."""
        return False

    @property
    def _job_heads(self) -> dict[str, tuple[str, int]]:
        if self._job_heads_kept is None:
            self._job_heads_kept = {}
        return self._job_heads_kept

    def _remember(self, request_id: str, status: str, next_seq: int, *, ended: bool = False) -> None:
        """Job `request_id`'s head as this transaction leaves it (forgotten if it rolls back; an ended job
        is rarely written again, so it is read then)."""
        if self.remembers_job_heads:
            if ended:
                self._job_heads.pop(request_id, None)
            else:
                self._job_heads[request_id] = (status, next_seq)

    @property
    def _journalled(self) -> dict[str, Journalled]:
        """Jobs whose rows went to the journal and that no transaction stored yet (job_journal.py)."""
        if self._journalled_kept is None:
            self._journalled_kept = {}
        return self._journalled_kept

    def _forget(self, request_id: str) -> None:
        if self.remembers_job_heads:
            self._job_heads.pop(request_id, None)

    def insert_job(self, job: JobRecord, *, ride: list[dict[str, Any]] | None = None) -> tuple[JobRecord, bool]:
        """Store `job` (status QUEUED) with its first event; if its request id is taken, the stored job.

        Returns `(job, inserted)`: the caller compares digests (a different request under a taken
        id is refused there, with words about the request). `ride`: the journal rows of the park
        that waits on the job, not written yet, of a run this process created (no other process has
        its jobs): on a store that `journals_new_jobs`, the job's rows are appended there instead of a
        transaction, so they are durable with that park and never without it.
        """
        sql = self._job_sql
        now = _now()
        row = [
            job.request_id, job.run_id, job.node_id, job.wait_owner, job.checkpoint_seq, job.runtime,
            job.runner, _dump(job.request), job.digest, job.status, job.retry_of, _dump(job.output),
            _dump(job.error), _dump(job.usage), _dump(job.worker), now, now, None,
        ]  # fmt: skip
        first = {"runtime": job.runtime, "runner": job.runner}  # a new job's first event: seq 0
        if ride is not None and self.journals_new_jobs and job.request_id not in self._job_heads:
            raw = [*row[:7], job.request, *row[8:11], job.output, job.error, job.usage, job.worker, *row[15:]]
            kept = Journalled(tuple(raw), ((job.request_id, 0, "transition", None, job.status, first, now),), self._journal_window())
            ride.extend(kept.lines(0))
            self._journalled[job.request_id] = kept
            self._remember(job.request_id, job.status, 1)
            return dataclasses.replace(job, created_at=now, updated_at=now, ended_at=None), True
        self._journalled.pop(job.request_id, None)
        try:
            with self._job_tx(job.request_id) as con:
                if self.insert_plain:  # the key's conflict is the answer to "is it taken?": no read first
                    try:
                        con.execute(sql(q.JOB_INSERT_NEW), row)
                    except Exception as exc:
                        if self._key_conflict(exc):
                            raise _Taken from None
                        raise
                elif con.execute(sql(q.JOB_INSERT), row).fetchone() is None:  # the request id is taken (the job is held)
                    return self._job_record(con.execute(sql(q.JOB), [job.request_id]).fetchone()), False
                con.execute(sql(q.job_events_insert(1)), [job.request_id, 0, "transition", None, job.status, json.dumps(first), now])
                self._remember(job.request_id, job.status, 1)
        except _Taken:  # rolled back; a job row is never deleted, so the stored one is there to read
            taken = self.job(job.request_id)
            if taken is None:
                raise StoreError(f"cannot record the agent job {job.request_id!r}: its request id conflicts with no stored job") from None
            return taken, False
        except BaseException:
            self._forget(job.request_id)
            raise
        return dataclasses.replace(job, created_at=now, updated_at=now, ended_at=None), True

    def transition_job(
        self,
        request_id: str,
        to: str,
        *,
        allowed_from: Sequence[str],
        terminal: bool = False,
        payload: dict[str, Any] | None = None,
        observations: Sequence[tuple[str, dict[str, Any]]] = (),
        **fields: Any,
    ) -> bool:
        """Move a job to `to` if it is in one of `allowed_from`, with its event, in one transaction.

        `fields` (output, error, usage, worker) are set with it. When the job is elsewhere (a
        terminal already won), nothing is applied and an `inert` event keeps what arrived.
        `observations` (agent messages and usage not yet recorded) are appended first, in the same
        transaction: a job's last observations ride with its terminal. Returns True when applied.
        """
        return self.advance_job(request_id, [(to, allowed_from, terminal, payload, fields)], observations=observations) == 1

    def advance_job(
        self,
        request_id: str,
        moves: Sequence[tuple[str, Sequence[str], bool, dict[str, Any] | None, dict[str, Any]]],
        *,
        observations: Sequence[tuple[str, dict[str, Any]]] = (),
        observed_after: int = 0,
    ) -> int:
        """Apply `moves` (`(to, allowed_from, terminal, payload, fields)` each, as `transition_job`) in
        order, in ONE transaction; stop at the first that does not apply (its `inert` event kept, and a
        terminal after it kept `inert` too: a result that arrived is evidence).

        One commit instead of one per move: a job run in this process goes QUEUED -> ADMITTED ->
        PREPARING -> RUNNING at once, every transition still an event of its own (issue 27 item 4).
        `observations` are recorded after the first `observed_after` moves (0: before them all).
        Returns how many moves applied.
        """
        for _to, _from, _terminal, _payload, fields in moves:
            unknown = set(fields) - SETTABLE
            if unknown:
                raise ValueError(f"transition_job cannot set {sorted(unknown)}; it sets {sorted(SETTABLE)}")
        while (journalled := self._journalled.get(request_id)) is not None:
            try:
                return self._advance_new(request_id, journalled, moves, observations, observed_after)
            except _Moved:  # another thread journalled a move of it first: from where that left it
                continue
            except _Folded:  # a fold stored the journalled row first: move the stored row
                self._journalled.pop(request_id, None)
                break
        head = self._job_heads.get(request_id) if self.remembers_job_heads else None
        if head is not None:
            try:
                return self._advance(request_id, moves, observations, observed_after, head)
            except _Stale:  # another writer moved the job since this process last wrote it: read it
                pass
        try:
            return self._advance(request_id, moves, observations, observed_after, None)
        except _Missing:  # journalled by a process whose journal is not folded here yet
            self._fold_jobs()
        try:
            return self._advance(request_id, moves, observations, observed_after, None)
        except _Missing:
            raise StoreError(f"no agent job {request_id!r} in the store; lab.agents.jobs() lists them") from None

    def _advance_new(
        self,
        request_id: str,
        journalled: Journalled,
        moves: Sequence[tuple[str, Sequence[str], bool, dict[str, Any] | None, dict[str, Any]]],
        observations: Sequence[tuple[str, dict[str, Any]]],
        observed_after: int,
    ) -> int:
        """`advance_job` for a job whose rows are only in the journal (`insert_job(ride=)`, job_journal.py), from
        where `journalled` (as this process left it) says it is: journalled too while the store's window holds
        (no transaction), else one transaction that inserts its row as the moves leave it and every event
        from its first. Raises `_Moved` when another thread journalled a move of it since `journalled`; `_Folded` (rolled back) when
        a fold stored the journalled row meanwhile (the plain insert meets the key)."""
        now = _now()
        before, first = journalled.head()
        seen = [(kind, None, None, payload) for kind, payload in observations if "line" not in payload or not journalled.line_seen(payload["line"])]
        events, fields, status, ended, applied = _plan(before, moves, seen, observed_after)
        changes: dict[str, Any] = {**fields, "status": status}
        if applied:
            changes["updated_at"] = now
        if ended:
            changes["ended_at"] = now
        after = journalled.advanced(
            changes, [(request_id, first + i, kind, f, t, payload, now) for i, (kind, f, t, payload) in enumerate(events)]
        )
        journalled_now = self._journal_job(request_id, journalled, after, first, (status, first + len(events)), ended)
        if journalled_now is None:
            raise _Moved
        if journalled_now:
            return applied
        sql = self._job_sql
        try:
            with self._job_tx(request_id) as con:
                try:
                    con.execute(sql(q.JOB_INSERT_NEW), after.sql_row())
                except Exception as exc:
                    if self._key_conflict(exc):
                        raise _Folded from None
                    raise
                con.execute(sql(q.job_events_insert(len(after.events))), after.sql_events())
        except _Folded:
            raise
        except BaseException:
            self._forget(request_id)
            raise
        self._journalled.pop(request_id, None)
        self._remember(request_id, status, first + len(events), ended=ended)
        return applied

    def _advance(
        self,
        request_id: str,
        moves: Sequence[tuple[str, Sequence[str], bool, dict[str, Any] | None, dict[str, Any]]],
        observations: Sequence[tuple[str, dict[str, Any]]],
        observed_after: int,
        head: tuple[str, int] | None,
    ) -> int:
        """`advance_job` in one transaction, from the job's `head` (its status and next seq) as this
        process last wrote it, or (None) as read in the transaction. A remembered head that is not the
        stored one raises `_Stale`, rolled back: every write of a job adds an event, so another writer's
        write took the seq the head names (the events' primary key refuses it), and the guarded UPDATE
        finds no row in the remembered status."""
        now = _now()
        sql = self._job_sql
        try:
            with self._job_tx(request_id) as con:
                remembered = head is not None
                if head is None:
                    found = con.execute(sql(q.JOB_STATUS), [request_id, request_id]).fetchone()
                    if found is None:
                        raise _Missing
                    head = (found[0], int(found[1]))  # the next event's seq: nothing else writes the job while it is held
                before, first = head
                seen = [(kind, None, None, payload) for kind, payload in observations if not self._line_seen(con, request_id, payload)]
                events, fields, status, ended, applied = _plan(before, moves, seen, observed_after)
                if applied:  # one UPDATE to where the moves lead, guarded by where they started
                    args: list[Any] = [status, now, *(_dump(v) for v in fields.values())]
                    if ended:
                        args.append(now)
                    cur = con.execute(sql(q.job_transition(list(fields), ended=ended)), [*args, request_id, before])
                    if remembered and cur.fetchone()[0] != 1:
                        raise _Stale
                if events:
                    params: list[Any] = []
                    for i, (kind, from_status, to_status, payload) in enumerate(events):
                        params += [request_id, first + i, kind, from_status, to_status, json.dumps(payload), now]
                    try:
                        con.execute(sql(q.job_events_insert(len(events))), params)
                    except Exception as exc:
                        if remembered and self._key_conflict(exc):
                            raise _Stale from None
                        raise
                self._remember(request_id, status, first + len(events), ended=ended)
        except _Missing:
            raise
        except BaseException:
            self._forget(request_id)
            raise
        return applied

    def _line_seen(self, con: Any, request_id: str, payload: dict[str, Any]) -> bool:
        """An observation read from a worker's progress file (it carries its `line`) already recorded
        (another process following the same worker)."""
        return "line" in payload and con.execute(self._job_sql(q.JOB_LINE_SEEN), [request_id, payload["line"]]).fetchone() is not None

    def add_job_events(self, request_id: str, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Append observations of a running job (agent messages, usage); they never change its status.

        An observation read from a worker's progress file carries its `line`: a line already recorded
        (another process following the same worker) is not recorded twice."""
        if not events:
            return
        self.advance_job(request_id, [], observations=events)

    def job(self, request_id: str) -> JobRecord | None:
        with self._jobs_read() as con:
            row = con.execute(self._job_sql(q.JOB), [request_id]).fetchone()
        return self._job_record(row) if row else None

    def jobs(self, *, run_id: str | None = None, status: str | None = None, wait_owner: str | None = None) -> list[JobRecord]:
        """Jobs oldest first, filtered by run, status or the wait they answer."""
        given = {col: value for col, value in (("run_id", run_id), ("status", status), ("wait_owner", wait_owner)) if value is not None}
        with self._jobs_read() as con:
            rows = con.execute(self._job_sql(q.list_jobs(list(given))), list(given.values())).fetchall()
        return [self._job_record(r) for r in rows]

    def job_events(self, request_id: str, *, after: int = -1) -> list[JobEventRecord]:
        """A job's events in order (those with seq > `after`)."""
        with self._jobs_read() as con:
            rows = con.execute(self._job_sql(q.JOB_EVENTS), [request_id, after]).fetchall()
        load = self.dialect.load
        return [JobEventRecord(r[0], int(r[1]), r[2], r[3], r[4], load(r[5]) or {}, r[6]) for r in rows]

    def _job_event(
        self,
        con: Any,
        request_id: str,
        kind: str,
        from_status: str | None,
        to_status: str | None,
        payload: dict[str, Any],
        at: datetime,
    ) -> None:
        con.execute(
            self._job_sql(q.JOB_EVENT_INSERT),
            [request_id, kind, from_status, to_status, json.dumps(payload), at, request_id],
        )

    def _job_record(self, r: Iterator[Any] | tuple[Any, ...]) -> JobRecord:
        r = tuple(r)
        load = self.dialect.load
        return JobRecord(
            request_id=r[0],
            run_id=r[1],
            node_id=r[2],
            wait_owner=r[3],
            checkpoint_seq=r[4],
            runtime=r[5],
            runner=r[6],
            request=load(r[7]) or {},
            digest=r[8],
            status=r[9],
            retry_of=r[10],
            output=load(r[11]),
            error=load(r[12]),
            usage=load(r[13]),
            worker=load(r[14]),
            created_at=r[15],
            updated_at=r[16],
            ended_at=r[17],
        )
