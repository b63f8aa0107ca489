"""The DuckDB store's side of the agent-job tables (jobs.py): its connection, transactions and journal window.

A new job of a run created here is journalled (jobs.py `journals_new_jobs`), and its moves too
while this process has held the file all along and folded nothing (`_journal_window`): no other
process can fold its journal then, so its lines are still only there, and the fold keeps a job's
last line. A read of the job tables folds first, as every read.

A job transaction runs on the store's connection under the store's lock (`_session`), so it
holds every job against this process's other threads; the file is held for the operation,
so against other processes too.

A job's rows are as durable as its run's boundaries (docs/store.md "How a boundary becomes
durable"): on a store opened without `fsync=True` a job transaction's commit reaches the OS (it
survives SIGKILL) but is not synced to the disk, as the journal's writes are not; with
`fsync=True` it is synced. DuckDB syncs its WAL at every commit, which on a busy disk cost a
delegated station most of its time (issue 27 item 4), so the commit runs with `fsync_mode =
'none'`. Never while DuckDB might checkpoint at that commit (a WAL near its threshold): an
unsynced checkpoint could damage the file itself on a power loss, not only lose the last rows.
The mode is left 'none' for the next job commit (a SET costs a DuckDB statement, a station has
two job commits), and every other use of the connection sets it back first: every operation
but the job tables' own (`_session`), letting go of the file (DETACH may checkpoint), closing,
and the end of a job transaction run inside another operation. So a checkpoint, a fold, a
migration or any other commit is synced as before.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from ..errors import StoreError
from .duckdb_reads import OTHERS_EVERY
from .jobs import JobTables

__all__ = ("DuckDBJobs", "UNSYNCED_WAL_LIMIT")

UNSYNCED_WAL_LIMIT = 4 * 1024 * 1024
"""A job commit is left unsynced only while the WAL is under this size (DuckDB checkpoints at 16 MiB)."""


class _Begun:
    """A job transaction's connection: its first statement opens the transaction, `BEGIN; <statement>` in
    one call (DuckDB runs every statement but the last without parameters)."""

    __slots__ = ("con", "begun")

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.begun = False
        """A statement was sent: the transaction may be open (ROLLBACK on error, else COMMIT)."""

    def execute(self, sql: str, parameters: Any = None) -> duckdb.DuckDBPyConnection:
        if not self.begun:
            self.begun = True
            sql = "BEGIN; " + sql
        return self.con.execute(sql, parameters)


class DuckDBJobs(JobTables):
    """`JobTables` on the DuckDB store's connection."""

    insert_plain = True
    remembers_job_heads = True
    journals_new_jobs = True
    defers_admission = True

    _session: Any
    _check_writable: Any
    _check_open: Any
    _synced: Any
    _unsynced: bool
    _depth: int
    _others_at: float
    _lock: Any
    _lockfile: Any
    _leased: bool
    _last_use: float
    leases: int
    folds: int
    closed: bool
    write: Any
    fold: Any
    fsync: bool
    path: str

    @contextmanager
    def _job_tx(self, request_id: str) -> Iterator[_Begun]:
        """The store's connection inside BEGIN ... COMMIT (ROLLBACK on error), errors translated.

        BEGIN rides in the transaction's first statement (one call, `_Begun`); the commit is unsynced
        while `_commit_unsynced` allows it, and the connection is left so for the next job commit (two
        statements fewer a transaction): every other use of it sets it back first (`FileLease._synced`),
        and a job transaction inside another operation sets it back at once."""
        self._check_writable()
        with self._jobs_reading() as con:
            tx = _Begun(con)
            try:
                yield tx
            except BaseException as exc:
                if tx.begun:
                    try:
                        con.execute("ROLLBACK")
                    except duckdb.Error:
                        pass
                if isinstance(exc, duckdb.Error):
                    raise StoreError(f"cannot record the agent job: {str(exc).splitlines()[0]}") from None
                raise
            if not tx.begun:  # nothing was written
                return
            unsynced = self._commit_unsynced()
            try:
                if unsynced != self._unsynced:
                    self._unsynced = True  # it may be 'none' from here on, whatever happens: set back before other uses
                    con.execute(f"SET fsync_mode = '{'none' if unsynced else 'standard'}'; COMMIT")
                    self._unsynced = unsynced
                else:
                    con.execute("COMMIT")
            except duckdb.Error as err:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot record the agent job: {str(err).splitlines()[0]}") from None
            finally:
                if self._depth > 1:  # inside another operation, which may commit after this: synced again
                    self._synced()

    def _key_conflict(self, exc: BaseException) -> bool:
        return isinstance(exc, duckdb.ConstraintException)

    def _commit_unsynced(self) -> bool:
        """Whether this job commit may skip DuckDB's sync: a file store without `fsync=True` whose WAL is
        far from the size at which the commit would checkpoint (see the module's note)."""
        if self.fsync or not self.path or self.path == ":memory:":
            return False
        try:
            return os.stat(self.path + ".wal").st_size < UNSYNCED_WAL_LIMIT
        except FileNotFoundError:
            return True
        except OSError:
            return False

    @contextmanager
    def _jobs_read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection to read the job tables, the journals folded first as for every read (duckdb_reads.py):
        a new job's rows ride in its park's journal write (jobs.py)."""
        with self._jobs_reading() as con:
            self.fold(others=time.monotonic() - self._others_at >= OTHERS_EVERY)
            yield con

    def _fold_jobs(self) -> None:
        self.fold()

    def _journal_window(self) -> Any:
        """(file takings, folds) while this process holds the file (no other process can fold its journal)
        or no other process can open it (`:memory:`); None otherwise."""
        with self._lock:
            if self._lockfile is not None and not self._leased:
                return None
            return (self.leases, self.folds)

    def _journal_guard(self) -> Any:
        return self._lock

    def _journal_open(self, window: Any) -> bool:
        """The file held all along since `window` (no other process could fold this one's journal) and no fold
        here since: what was journalled in the window is still only in the journal."""
        return window is not None and not self.closed and self._journal_window() == window

    def _journal_lines(self, lines: list[dict[str, Any]]) -> None:
        self.write(lines)  # synced with fsync=True, as a boundary
        self._last_use = time.monotonic()  # held on: the watcher still lets go at once for a process that waits

    @contextmanager
    def _jobs_reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection for the job tables' transactions, without folding the journal first (a fold costs
        milliseconds while a run writes; a job this process journalled is stored by its first transaction)."""
        with self._session(unsynced=True) as con:  # the file attached for this operation (docs/store.md "Who holds what")
            self._check_open()
            try:
                yield con
            except duckdb.Error as exc:
                raise StoreError(f"cannot read the agent jobs of {getattr(self, 'path', 'the store')}: {str(exc).splitlines()[0]}") from None
