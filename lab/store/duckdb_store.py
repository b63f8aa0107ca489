"""The DuckDB store: graphs, runs, checkpoint tree and events, with a journal in front.

Writes go to the journal (`journal.py`) and are folded into DuckDB in bulk (`duckdb_fold.py`);
every read folds first (`duckdb_reads.py`), so a read sees everything written before it. The
file is held only for an operation (`duckdb_files.py`); opening checks and migrates it
(`duckdb_schema.py`). DuckDB errors are translated, once, into the lab's own errors. One store
object per database file per process: opening the same path again shares it (a notebook re-runs
its cells). This module opens and closes the store and writes to it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import tempfile
import time
import weakref
from collections.abc import Sequence
from typing import Any

from ..errors import StoreError, StoreLockedError
from .base import Store
from .duckdb_calls import DuckDBCalls
from .duckdb_effects import DuckDBEffects
from .duckdb_evals import DuckDBEvals
from .duckdb_files import DB, MEMORY, OPEN, OPEN_LOCK, FileLease, not_writable, release
from .duckdb_fold import JournalFold
from .duckdb_instance import lend
from .duckdb_jobs import DuckDBJobs
from .duckdb_reads import DuckDBReads
from .duckdb_salvage import salvage_journal
from .duckdb_schema import SchemaChecks
from .holders import CountingLock, Process, StoreLock, claim_slot, this_process
from .journal import Journal
from .schema import FOLD_STATEMENTS

__all__ = ("DuckDBStore", "open_store", "salvage_journal", "MEMORY", "OPEN", "FOLD_STATEMENTS")

log = logging.getLogger(__name__)


def open_store(
    path: str | os.PathLike[str] = MEMORY,
    *,
    fsync: bool | None = None,
    fold_every: int = 20000,
    read_only: bool = False,
) -> DuckDBStore:
    """The store for `path`, shared within this process; `":memory:"` gives a private one.

    `read_only=True` gives a private reader that never writes (the CLI): it needs no write
    access to the file, folds the journal into its own view and never truncates it.
    `fsync=None` means "as the store is already open in this process, else False"; asking for
    the other value while it is open is an error (one store object has one fsync setting).
    """
    spath = os.fspath(path)
    if spath == MEMORY:
        return DuckDBStore(MEMORY, fsync=bool(fsync), fold_every=fold_every)
    real = os.path.realpath(spath)
    if read_only:
        return DuckDBStore(real, fold_every=fold_every, read_only=True)
    with OPEN_LOCK:
        store = OPEN.get(real)
        if store is not None and not store.closed:
            if fsync is not None and fsync != store.fsync:
                raise StoreError(
                    f"the store {real} is already open in this process with fsync={store.fsync}; one store has one "
                    f"fsync setting: call lab.close() on the Lab that holds it, then open Lab({spath!r}, fsync={fsync}) "
                    f"(or leave fsync out to share the open store)"
                )
            return store
        store = DuckDBStore(real, fsync=bool(fsync), fold_every=fold_every)
        OPEN[real] = store
        return store


@atexit.register
def _close_all_at_exit() -> None:
    """A script that ends without `lab.close()` still gets its buffered boundaries folded."""
    for store in list(OPEN.values()):
        try:
            if not store.closed:
                store.close()  # under the store's lock, which closes it once
        except Exception:  # pragma: no cover - best effort at interpreter exit
            log.exception("could not close the store %s at exit", store.path)


class DuckDBStore(
    DuckDBReads, JournalFold, SchemaChecks, FileLease, DuckDBJobs, DuckDBEffects, DuckDBCalls, DuckDBEvals, Store
):
    """Graph Lab's store on one DuckDB database (a file, or `:memory:` for tests)."""


    writer_records_answers = True

    def __init__(self, path: str, *, fsync: bool = False, fold_every: int = 20000, read_only: bool = False):
        self.path = path
        self.fsync = fsync
        self.fold_every = fold_every
        self._fold_after = 0
        """After a fold failed behind a write: the journal length at which to try again."""
        self.read_only = read_only
        self.closed = False
        self.recovered = False
        """True when opening replayed a journal a previous process left behind."""
        self.live_runs: dict[str, Any] = {}
        """Run handles open in this process, shared by every Lab on this store."""
        self.recovery_done = read_only
        self.me: Process = this_process()
        """This process: the writer recorded for the runs it creates or takes over."""
        self._lock = CountingLock()
        """This process's threads on the store, one at a time (a long lab.sql gives way to a waiting one)."""
        self._buffer: list[bytes] = []
        self._buffer_lines = 0
        self._buffer_durable = False
        self._tmpdir: str | None = None
        self._depth = 0
        """Nesting of `_session()`: > 0 while an operation uses the file."""
        self._leased = False
        """The file is attached and the store's lock held (during an operation, and LINGER s after)."""
        self._last_use = 0.0
        self._others_at = 0.0
        """When the journals of other processes were last folded here (`held()` always folds them)."""
        self._live_journals = 1
        """Journals of live processes at that fold (they may have written since); 1 until then."""
        self._lockfile: StoreLock | None = None
        self._journal: Journal | None = None
        # A private DuckDB instance for the store's life (reused once it closes: duckdb_instance.py); a
        # file store attaches its file to it only for an operation, under the store's lock, so other
        # processes can open it in between; an in-memory store attaches a database of its own for good.
        self._root, self._con = lend()
        try:
            if path == MEMORY:
                self._con.execute(f"ATTACH ':memory:' AS {DB}; USE {DB}")
                self._tmpdir = tempfile.mkdtemp(prefix="graphlab-")
                self._journal = Journal(os.path.join(self._tmpdir, "journal.ndjson"), fsync=fsync)
                self._migrate()
                self._journal.recover()
            elif read_only:
                self._lockfile = StoreLock(path + ".lock", read_only=True)
                self._lockfile.acquire(shared=True)  # held for the reader's (short) life
                self._attach()
                self._depth = 1
                self._check_schema()
                self._snapshot()
            else:
                try:
                    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
                except PermissionError as exc:
                    raise not_writable(path, str(exc), target=exc.filename) from None
                created = not os.path.exists(path + ".lock")
                self._lockfile = StoreLock(path + ".lock")
                with self._session():
                    if not self._migrate():  # a new store's tables were just made: nothing to probe
                        self._probe()
                    journal_path, fd = claim_slot(path)
                    self._journal = Journal(journal_path, fsync=fsync, fd=fd)
                    report = self._journal.recover()
                    if report.lines:
                        self.recovered = True
                        log.info("store %s: replaying %d journal lines", path, report.lines)
                    self._fold_locked()
        except BaseException as exc:
            self.closed, self._leased = True, False
            release(self._journal, self._root, self._con, self._tmpdir, self._lockfile)
            if locals().get("created") and self._journal is None and not isinstance(exc, StoreLockedError):
                # a refused open leaves the folder as it found it (the file is not a store, or is newer)
                for extra in (".lock", ".lock-wait"):
                    with contextlib.suppress(OSError):
                        os.unlink(path + extra)
            if isinstance(exc, PermissionError) and not isinstance(exc, StoreError):
                raise not_writable(path, str(exc), read_only, exc.filename) from None  # say, the journal
            raise
        # a store nobody closes (Lab(":memory:") dropped, or left at exit) still lets go of its files
        self._finalizer = weakref.finalize(
            self, release, self._journal, self._root, self._con, self._tmpdir, self._lockfile
        )
        self._finalizer.atexit = path == MEMORY  # a file store is folded and closed by _close_all_at_exit

    def close(self) -> None:
        """Fold the journal and release the file, for every Lab in this process that shares it.

        This process stops being the writer of its runs: another process may take them over
        with `lab.resume(run_id)`.
        """
        with self._lock:
            if self.closed:
                return
            try:
                if not self.read_only:
                    with self._session() as con:
                        self.fold()
                        if self._lockfile is not None:
                            me = self.me
                            con.execute(
                                "DELETE FROM writers WHERE pid = ? AND host = ? AND started = ?",
                                [me.pid, me.host, me.started],
                            )
            finally:
                self.closed = True
                if self.read_only and self._depth:
                    self._depth = 0
                    self._detach()
                if self._leased:
                    self._let_go()
                self._finalizer()
                with OPEN_LOCK:
                    if OPEN.get(self.path) is self:
                        del OPEN[self.path]

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError(
                f"the store {self.path} is closed (lab.close() releases it for every Lab in this process); "
                f"open it again with Lab({self.path!r})"
            )

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise StoreError(f"the store {self.path} is open read-only here; open it with Lab({self.path!r}) to change it")

    # -- writing -------------------------------------------------------------------------

    def write(self, rows: Sequence[dict[str, Any]], *, sync: bool = True, hot: bool = False) -> None:
        """Append one transaction of journal rows. `sync=False` buffers it (durability="batch").

        `hot`: a boundary inside a running drive, which checks the journal file only every
        `Journal.check_every` seconds (lab/store/journal.py says what that guarantees).

        A write that fails (`UnstorableValueError` for a value the store cannot hold, a
        `StoreError` for a full disk or a journal deleted under it) leaves the journal as it was
        before this transaction; earlier buffered transactions stay buffered. A new run (a `run`
        row) is recorded with this process as its writer, in the same transaction.
        """
        lock = self._lock
        if not lock.try_acquire(False):  # `with self._lock`, its uncontended path in C calls (the hot path)
            lock.acquire()
        try:
            if self.closed or self.read_only:
                self._check_writable()
            journal = self._journal
            assert journal is not None
            if not hot:  # a drive's boundary never starts a run
                for row in rows:
                    if row.get("t") == "run":
                        rows = [*rows, self.claim_row(row["run_id"])]
                        break
            blob = journal.encode(rows)
            # a boundary is synced (fsync=True) and checked; an `entered` event alone rides
            # along with the boundary write that follows it
            durable = hot or self._buffer_durable or len(rows) != 1 or rows[0].get("kind") != "entered"
            if sync and not self._buffer:  # the usual step: this transaction alone, written at once
                journal.write(blob, len(rows), sync=durable and self.fsync, check=durable, hot=hot)
                self._buffer_durable = False
            else:
                self._buffer_durable = durable
                self._buffer.append(blob)
                self._buffer_lines += len(rows)
                if not sync:
                    return
                try:
                    self._flush_buffer()
                except BaseException:
                    self._buffer.pop()  # this transaction failed: never written later
                    self._buffer_lines -= len(rows)
                    raise
            pending = journal.pending_lines
            if pending >= self.fold_every and pending >= self._fold_after:
                try:
                    self.fold()
                except StoreError as exc:
                    # this transaction is in the journal: a fold that cannot run now (disk full)
                    # is retried later, and a read or close reports it; the write succeeded
                    self._fold_after = pending + self.fold_every
                    log.warning("store %s: fold postponed: %s", self.path, exc)
                else:
                    self._fold_after = 0
        finally:
            lock.release()

    def flush(self) -> None:
        """Hand buffered transactions to the OS (durability="batch" calls this every N boundaries)."""
        with self._lock:
            self._flush_buffer()

    def _flush_buffer(self) -> None:
        if self._buffer:
            assert self._journal is not None
            blob = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
            durable = self._buffer_durable
            self._journal.write(blob, self._buffer_lines, sync=durable and self.fsync, check=durable)
            self._buffer.clear()
            self._buffer_lines = 0
            self._buffer_durable = False

    # -- who writes a run ----------------------------------------------------------------

    def claim_row(self, run_id: str) -> dict[str, Any]:
        """The journal row that makes this process the writer of `run_id`."""
        me = self.me
        return {"t": "own", "run_id": run_id, "pid": me.pid, "host": me.host, "started": me.started, "claimed_at": time.time()}

    def claim(self, run_id: str) -> None:
        """Record this process as the run's writer (call inside `held()`, after checking `writer`)."""
        self.write([self.claim_row(run_id)])

    def abandoned(self, run_id: str) -> bool:
        """No live process writes `run_id` (this one included): an attempt left open in it died."""
        if run_id in self.live_runs:
            return False
        return self.writer(run_id) is None

    def abandoned_among(self, run_ids: Sequence[str]) -> set[str]:
        """Which of `run_ids` no live process writes, read from what this store has folded (one query;
        `lab.runs()` shows them `interrupted`). Deciding a takeover goes through `writer`, which folds."""
        ids = [r for r in run_ids if r not in self.live_runs]
        if not ids:
            return set()
        with self._reading() as con:
            rows = con.execute(
                "SELECT run_id, pid, host, started FROM writers WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids]
            ).fetchall()
        writers = {r[0]: Process(int(r[1]), r[2], float(r[3])) for r in rows}
        return {r for r in ids if (p := writers.get(r)) is None or p == self.me or not p.is_alive()}

    def writer(self, run_id: str) -> Process | None:
        """The live process other than this one that writes `run_id`, or None (this one, none, or gone).

        A writer found gone has journalled all it ever will. If it may have been alive at the fold
        here (a live process's journal was read then, and it may have died a moment ago), every
        journal is folded again, so whoever decides on the run next reads every boundary it wrote,
        never a head it has passed (issue 24 item 2).
        """
        self.fold()  # every journal: a claim another process wrote a moment ago counts
        with self._reading() as con:
            row = con.execute("SELECT pid, host, started FROM writers WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            return None
        proc = Process(int(row[0]), row[1], float(row[2]))
        if proc == self.me:
            return None
        if proc.is_alive():
            return proc
        if self._live_journals:
            self.fold()
        return None

    # -- folding -------------------------------------------------------------------------

    def _fold_statements(self) -> Any:
        return FOLD_STATEMENTS  # this module's name, read at each fold (a crash test wraps it here)
