"""The DuckDB store: graphs, runs, checkpoint tree and events, with a journal in front.

Writes go to the journal (`journal.py`) and are folded into DuckDB in bulk; every read folds
first, so a read sees everything written before it. DuckDB errors are translated here, once,
into the lab's own errors. One store object per database file per process: opening the same
path again shares it (a notebook re-runs its cells).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb

from ..errors import (
    CheckpointError,
    RunNotFoundError,
    StoreError,
    StoreLockedError,
    StorePermissionError,
    StoreSchemaError,
)
from ..manifest import Manifest
from ..records import CheckpointRecord, EventRecord, PendingStation, RunRecord, WaitRecord, utcnow
from .base import Store
from .holders import CountingLock, Process, StoreLock, claim_slot, journal_slots, slot_is_free, this_process
from .jobs import JobTables
from .journal import Journal, JournalDamagedError, scan, stamp
from .schema import (
    CHECKPOINT_CONFLICTS,
    FOLD_NEEDS,
    FOLD_STATEMENTS,
    JOURNAL_SELECT,
    MIGRATIONS,
    SCHEMA_VERSION,
    TABLES,
    line_limit,
)
from .sql_read import check_statement, copy_tables, open_copy, run_to_private

__all__ = ("DuckDBStore", "open_store", "salvage_journal", "MEMORY")

log = logging.getLogger(__name__)

MEMORY = ":memory:"
_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
"""Every connection: no extension is installed or loaded behind the user's back (json is built in)."""
_DB = "graphlab_store"
"""The name the store's file is attached under in the store's private DuckDB instance."""
_SOURCE = 1 << 40
"""Journal line numbers of the n-th folded journal are offset by n * _SOURCE, so lines of several journals never tie."""
_END = b',"end":true}\n'
"""How a transaction's last line ends (the journal writes `end` last): where another process's journal may be cut."""
LINGER = 0.25
"""Seconds a process keeps the file attached after its last operation, unless another process waits."""
OTHERS_EVERY = 0.5
"""Seconds between two reads of the journals of other processes (what they wrote shows this late at most)."""
WATCH_EVERY = 0.01
"""Seconds between looks for another process waiting for the file, while this one keeps it."""
_OPEN: dict[str, DuckDBStore] = {}
_OPEN_LOCK = threading.Lock()
_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", " ".join(s for m in MIGRATIONS for s in m)))
"""Every table the migrations create: a store lacking one was edited by hand."""


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
    with _OPEN_LOCK:
        store = _OPEN.get(real)
        if store is not None and not store.closed:
            if fsync is not None and fsync != store.fsync:
                raise StoreError(
                    f"the store {real} is already open in this process with fsync={store.fsync}; one store has one "
                    f"fsync setting: call lab.close() on the Lab that holds it, then open Lab({spath!r}, fsync={fsync}) "
                    f"(or leave fsync out to share the open store)"
                )
            return store
        store = DuckDBStore(real, fsync=bool(fsync), fold_every=fold_every)
        _OPEN[real] = store
        return store


def salvage_journal(path: str | os.PathLike[str]) -> str:
    """Keep every complete journal transaction the database can fold; set the rest aside.

    For a journal that `Lab(path)` refuses (damage before complete transactions, or a line
    that cannot be folded). The original journal is kept beside the store as
    `lab.duckdb.journal.damaged-<time>`; the new journal holds the complete, foldable
    transactions from both sides of the damage and is replayed by the next `Lab(path)`.
    Every journal of a process that is gone is salvaged (`lab.duckdb.journal`, and any
    `.journal.N` with damage); a journal a live process holds is refused.
    Returns a one-paragraph summary.
    """
    real = os.path.realpath(os.fspath(path))
    with _OPEN_LOCK:
        held = _OPEN.get(real)
    if held is not None and not held.closed:
        raise StoreError(f"the store {real} is open in this process; call lab.close() before salvaging its journal")
    journals = [
        j for j in journal_slots(real) if j == real + ".journal" or _needs_salvage(j)
    ]
    if not journals:
        return f"no journal beside {real}: nothing to salvage"
    lock = StoreLock(real + ".lock")
    try:
        with lock.held():
            out = []
            for journal in journals:
                fd = slot_is_free(journal)
                if fd < 0:
                    raise StoreError(
                        f"the journal {journal} is held by a live process (a Graph Lab open on {real}); call "
                        "lab.close() there (or end it), then salvage"
                    )
                try:
                    out.append(_salvage_one(real, journal))
                finally:
                    os.close(fd)
    finally:
        lock.close()
    return "\n".join(out)


def _needs_salvage(journal: str) -> bool:
    with open(journal, "rb") as f:
        data = f.read()
    s = scan(data)
    return bool(s.damaged) or s.good_end < len(data)


def _salvage_one(real: str, journal: str) -> str:
    with open(journal, "rb") as f:
        data = f.read()
    s = scan(data)
    txns = [data[a:b] for a, b in s.complete]
    con = DuckDBStore._connect(real)
    try:
        with tempfile.TemporaryDirectory(prefix="graphlab-salvage-") as tmp:
            probe = os.path.join(tmp, "probe.ndjson")

            def foldable(part: list[bytes]) -> bool:
                blob = b"".join(part)
                with open(probe, "wb") as f:
                    f.write(blob)
                try:
                    con.execute("BEGIN")
                    try:
                        con.execute(
                            "CREATE OR REPLACE TEMP TABLE journal_rows AS " + JOURNAL_SELECT, [probe, line_limit(len(blob))]
                        )
                        for stmt in FOLD_STATEMENTS:
                            con.execute(stmt)
                    finally:
                        con.execute("ROLLBACK")
                except duckdb.Error:
                    return False
                return True

            def keep(part: list[bytes]) -> list[bytes]:
                if not part or foldable(part):
                    return part
                if len(part) == 1:
                    return []
                half = len(part) // 2
                return keep(part[:half]) + keep(part[half:])

            kept = keep(txns)
            while kept and not foldable(kept):  # halves that fold alone but not together: drop the last
                kept = kept[:-1]
    finally:
        con.close()
    backup = f"{journal}.damaged-{stamp()}"
    fresh = journal + ".salvaged"
    with open(fresh, "wb") as f:
        f.write(b"".join(kept))
        f.flush()
        os.fsync(f.fileno())
    os.replace(journal, backup)
    os.replace(fresh, journal)
    unfoldable = len(txns) - len(kept)
    damaged = len(s.damaged) + (1 if s.good_end < len(data) else 0)
    return (
        f"kept {len(kept)} complete transaction(s) of {journal} (replayed by the next Lab({real!r})); left out "
        f"{damaged} damaged part(s) and {unfoldable} transaction(s) the database cannot fold. The original journal "
        f"is kept as {backup}"
    )


@atexit.register
def _close_all_at_exit() -> None:
    """A script that ends without `lab.close()` still gets its buffered boundaries folded."""
    for store in list(_OPEN.values()):
        try:
            with store._lock:
                if not store.closed:
                    store.close()
        except Exception:  # pragma: no cover - best effort at interpreter exit
            log.exception("could not close the store %s at exit", store.path)


def _release(
    journal: Journal | None, con: duckdb.DuckDBPyConnection, tmpdir: str | None, lock: StoreLock | None
) -> None:
    """Close a store's files (on close, or when an unclosed store is collected or the process exits)."""
    if journal is not None:
        journal.close()  # lets go of the journal slot
    con.close()
    if lock is not None:
        lock.close()
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _loads(value: Any) -> Any:
    return None if value is None else json.loads(value)


def _not_writable(path: str, detail: str, read_only: bool = False, target: str | None = None) -> StorePermissionError:
    """The store (or its folder) is read-only to this process: say which and what to do.

    `target` is the path the OS refused (the journal beside the file, a folder to create)."""
    if read_only:
        return StorePermissionError(
            f"cannot read the store {path}: permission denied ({detail}); give this user read access to the "
            "file and its folder, or copy the file somewhere readable"
        )
    target = os.fspath(target or path)
    folder = target
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder) or "."
    what = f"the file {target}" if os.path.isfile(target) else f"the folder {folder}"
    return StorePermissionError(
        f"cannot open the store {path} for writing: {what} is read-only to this process ({detail}). Make it "
        f"writable (say chmod u+w), open another path with Lab('elsewhere.duckdb'), or read it without writing: "
        f"python -m lab runs --store {path}"
    )


class DuckDBStore(JobTables, Store):
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
        self._watcher: threading.Thread | None = None
        self._lockfile: StoreLock | None = None
        self._journal: Journal | None = None
        # A private DuckDB instance for the store's life; a file store attaches its file to it only
        # for an operation, under the store's lock, so other processes can open it in between.
        self._con = duckdb.connect(MEMORY, config=_CONFIG)
        try:
            if path == MEMORY:
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
                    raise _not_writable(path, str(exc), target=exc.filename) from None
                created = not os.path.exists(path + ".lock")
                self._lockfile = StoreLock(path + ".lock")
                with self._session():
                    self._migrate()
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
            _release(self._journal, self._con, self._tmpdir, self._lockfile)
            if locals().get("created") and self._journal is None and not isinstance(exc, StoreLockedError):
                # a refused open leaves the folder as it found it (the file is not a store, or is newer)
                for extra in (".lock", ".lock-wait"):
                    with contextlib.suppress(OSError):
                        os.unlink(path + extra)
            if isinstance(exc, PermissionError) and not isinstance(exc, StoreError):
                raise _not_writable(path, str(exc), read_only, exc.filename) from None  # say, the journal
            raise
        # a store nobody closes (Lab(":memory:") dropped, or left at exit) still lets go of its files
        self._finalizer = weakref.finalize(self, _release, self._journal, self._con, self._tmpdir, self._lockfile)
        self._finalizer.atexit = path == MEMORY  # a file store is folded and closed by _close_all_at_exit

    # -- opening -------------------------------------------------------------------------

    def _attach(self) -> None:
        """Attach the file to the private instance (read-only for a reader) and make it the default."""
        mode = " (READ_ONLY)" if self.read_only else ""
        quoted = self.path.replace("'", "''")
        try:
            self._con.execute(f"ATTACH '{quoted}' AS {_DB}{mode}")
        except duckdb.Error as exc:
            raise self._open_error(exc) from None
        self._con.execute(f"USE {_DB}")

    def _detach(self) -> None:
        con = self._con
        try:
            con.execute("ROLLBACK")  # an error left a transaction open
        except duckdb.Error:
            pass
        try:
            con.execute("USE memory")
            con.execute(f"DETACH {_DB}")
        except duckdb.Error as exc:  # pragma: no cover - the file stays attached until the store closes
            log.warning("store %s: could not let go of the file: %s", self.path, exc)

    @contextmanager
    def _session(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """Hold the file for one operation: the store's lock, then the file attached (nested calls share it)."""
        with self._lock:
            if self._depth or self._lockfile is None:
                self._depth += 1
                try:
                    yield self._con
                finally:
                    self._depth -= 1
                return
            self._check_open()
            if not self._leased:
                self._lockfile.acquire()
                try:
                    self._attach()
                except BaseException:
                    self._lockfile.release()
                    raise
                self._leased = True
                self._start_watch()
            self._depth = 1
            try:
                yield self._con
            finally:
                self._depth = 0
                self._last_use = time.monotonic()
                if self._lockfile.wanted():
                    self._let_go()

    def _let_go(self) -> None:
        """Detach the file and release the store's lock (another process waits, or the lease ran out)."""
        if self._leased:
            self._leased = False
            try:
                self._detach()
            finally:
                self._lockfile.release()

    def _start_watch(self) -> None:
        """A daemon thread that lets go of the file once another process waits or nothing used it for LINGER s.

        Keeping the file attached between close operations of one process saves attaching and
        detaching (several ms each) per read; another process never waits longer than WATCH_EVERY
        for it, plus the operation under way.
        """
        if self._watcher is not None and self._watcher.is_alive():
            return
        ref = weakref.ref(self)

        def watch() -> None:
            while True:
                time.sleep(WATCH_EVERY)
                store = ref()
                if store is None or store.closed:
                    return
                if not store._leased:
                    store._watcher = None
                    return
                if store._lockfile.wanted() or time.monotonic() - store._last_use > LINGER:
                    if store._lock.acquire(blocking=False):
                        try:
                            if store._depth == 0:
                                store._let_go()
                        finally:
                            store._lock.release()
                del store

        self._watcher = threading.Thread(target=watch, name=f"graphlab-store-{os.path.basename(self.path)}", daemon=True)
        self._watcher.start()

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the store across several reads and writes that no other process may come between.

        Everything every process has journalled is folded first. A takeover (`lab.resume` of a run
        whose writer is gone) and an answer to a wait run inside: the check and the write are one
        step for every process on the store.
        """
        with self._session():
            self._check_open()
            self.fold()
            yield

    def _open_error(self, exc: duckdb.Error) -> StoreError:
        path = self.path
        text = str(exc)
        low = text.lower()
        if "permission denied" in low or "read-only file system" in low:
            return _not_writable(path, text.splitlines()[0], self.read_only)
        if "lock" in low:
            pid = text.split("PID ")[-1].split(")")[0] if "PID " in text else "another process"
            return StoreLockedError(
                f"the store {path} is open in another process (PID {pid}) that is not a Graph Lab of this version "
                "(a duckdb connection, or an older Graph Lab); close that connection or kernel (lab.close() there), "
                "or open a different path with Lab('other.duckdb')"
            )
        if isinstance(exc, duckdb.IOException) or "not a valid" in low or "database file" in low:
            return StoreError(
                f"cannot open the store {path}: it is not a DuckDB database or is damaged ({text.splitlines()[0]}); "
                "move the file aside to start a new store, or open another path"
            )
        return StoreError(
            f"cannot open the store {path}: {text.splitlines()[0]}; "
            "move the file aside to start a new store, or open another path"
        )

    @staticmethod
    def _connect(path: str, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(path, read_only=read_only, config=_CONFIG)
        except duckdb.Error as exc:
            store = DuckDBStore.__new__(DuckDBStore)
            store.path, store.read_only = path, read_only
            raise store._open_error(exc) from None

    def _version(self) -> int:
        con = self._con
        try:
            has_meta = con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'"
            ).fetchone()[0]
            version = 0
            if has_meta:
                row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = int(row[0]) if row else 0
        except ValueError:
            raise StoreSchemaError(
                f"the store {self.path} says its schema_version is {row[0]!r}, not a number: its meta table was "
                "edited outside Graph Lab; restore the file from a backup, or move it aside to start a new store"
            ) from None
        except duckdb.Error as exc:
            raise StoreError(
                f"cannot open the store {self.path}: it is damaged or not a Graph Lab store "
                f"({str(exc).splitlines()[0]}); move the file aside to start a new store, or restore it from a backup"
            ) from None
        if version > SCHEMA_VERSION:
            raise StoreSchemaError(
                f"the store {self.path} was written by a newer Graph Lab (schema {version}; this version "
                f"knows up to {SCHEMA_VERSION}); upgrade graph-lab to open it"
            )
        return version

    def _check_tables(self, version: int) -> None:
        con = self._con
        present = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'"
            ).fetchall()
        }
        missing = sorted(_TABLES - present)
        if missing:
            raise StoreError(
                f"the store {self.path} (schema {version}) lacks its table(s) {missing}: it was edited outside "
                "Graph Lab; restore it from a backup, or move the file aside to start a new store"
            )

    def _probe(self) -> None:
        """Read every table once before anything is created beside the file (a damaged file fails here)."""
        try:
            for table in sorted(_TABLES):
                self._con.execute(f"SELECT count(*) FROM {table}").fetchone()
            self._con.execute("SELECT * FROM journal_marks").fetchall()
        except duckdb.Error as exc:
            raise StoreError(
                f"cannot open the store {self.path}: it is not a DuckDB database or is damaged "
                f"({str(exc).splitlines()[0]}); move the file aside to start a new store, or restore it from a backup"
            ) from None

    def _check_schema(self) -> None:
        """A reader migrates nothing: an older store is read once a Lab has opened (and upgraded) it."""
        version = self._version()
        if version < SCHEMA_VERSION:
            raise StoreSchemaError(
                f"the store {self.path} has schema {version} (this Graph Lab writes {SCHEMA_VERSION}); reading it "
                f"without writing needs the current schema: open it once with Lab({self.path!r}) to upgrade it"
            )
        self._check_tables(version)

    def _snapshot(self) -> None:
        """A reader's view: the tables as the file holds them, plus every journal folded in memory.

        Temp tables shadow the file's (unqualified names find `temp` first), so every read
        below works unchanged and nothing is written to the file or a journal. A run left
        `running` by a process that is gone is shown `interrupted`.
        """
        con = self._con
        db = con.execute("SELECT current_database()").fetchone()[0]
        sources = self._unfolded(read_only=True)
        shadow = ("runs", "checkpoints", "waits", "events", "writers") if sources else ("runs", "writers")
        for table in shadow:
            ddl = con.execute(
                "SELECT sql FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' AND table_name = ?",
                [db, table],
            ).fetchone()[0]
            con.execute(re.sub(r"^CREATE TABLE [^(\s]+", f"CREATE TEMP TABLE {table}", ddl, count=1))
            con.execute(f'INSERT INTO temp.main.{table} SELECT * FROM "{db}".main.{table}')
        if sources:
            with tempfile.TemporaryDirectory(prefix="graphlab-read-") as tmp:
                try:
                    self._load_journal_rows(con, sources, tmp)
                    for stmt in FOLD_STATEMENTS:
                        con.execute(stmt)
                    con.execute("DROP TABLE journal_rows")
                except duckdb.Error as exc:
                    raise StoreError(
                        f"cannot read the journals of {self.path}: {str(exc).splitlines()[0]}; a line of one was "
                        f"damaged or edited by hand: run `python -m lab salvage --store {self.path}`"
                    ) from None
        running = con.execute(
            "SELECT r.run_id, w.pid, w.host, w.started FROM runs r LEFT JOIN writers w USING (run_id) "
            "WHERE r.status = 'running'"
        ).fetchall()
        gone = [run_id for run_id, pid, host, started in running if pid is None or not Process(pid, host, started).is_alive()]
        if gone:
            con.execute("UPDATE runs SET status = 'interrupted' WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [gone])

    def _migrate(self) -> None:
        con = self._con
        version = self._version()
        for v in range(version, SCHEMA_VERSION):
            con.execute("BEGIN")
            for stmt in MIGRATIONS[v]:
                con.execute(stmt)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(v + 1)])
            con.execute("COMMIT")
        self._check_tables(version)

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
                with _OPEN_LOCK:
                    if _OPEN.get(self.path) is self:
                        del _OPEN[self.path]

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

    def write(self, rows: Sequence[dict[str, Any]], *, sync: bool = True) -> None:
        """Append one transaction of journal rows. `sync=False` buffers it (durability="batch").

        A write that fails (`UnstorableValueError` for a value the store cannot hold, a
        `StoreError` for a full disk or a journal deleted under it) leaves the journal as it was
        before this transaction; earlier buffered transactions stay buffered. A new run (a `run`
        row) is recorded with this process as its writer, in the same transaction.
        """
        with self._lock:
            self._check_writable()
            assert self._journal is not None
            for row in rows:
                if row.get("t") == "run":
                    rows = [*rows, self.claim_row(row["run_id"])]
                    break
            blob = self._journal.encode(rows)
            if not self._buffer_durable:
                # a boundary is synced (fsync=True) and checked; an `entered` event alone rides
                # along with the boundary write that follows it
                self._buffer_durable = len(rows) != 1 or rows[0].get("kind") != "entered"
            self._buffer.append(blob)
            self._buffer_lines += len(rows)
            if sync:
                try:
                    self._flush_buffer()
                except BaseException:
                    self._buffer.pop()  # this transaction failed: never written later
                    self._buffer_lines -= len(rows)
                    raise
                pending = self._journal.pending_lines
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

    def fold(self, *, others: bool = True) -> None:
        """Move everything journalled, by every process on the store, into the DuckDB tables.

        `others=False` folds only this process's journal (a read between two looks at the others).
        """
        with self._lock:
            if self.read_only:
                return
            self._flush_buffer()
            if (self._lockfile is None or not others) and not self._journal.needs_fold():
                return
            with self._session():
                self._fold_locked(others=others)

    def _unfolded(self, *, read_only: bool = False, others: bool = True) -> list[tuple[str, int, int, bytes, int, bool]]:  # noqa: C901
        """What each journal holds beyond its fold mark: (path, inode, mark, bytes, fd to truncate or -1, own).

        This process's journal is all complete transactions. A slot no process holds belongs to
        a process that is gone: it is read whole (a torn tail is left out; damage before a complete
        transaction is an error) and, once folded, emptied. A live process's journal is cut after
        its last complete transaction (a write may be under way). Called with the file attached.
        """
        con = self._con
        marks = {f: (ino, folded) for f, ino, folded in con.execute("SELECT file, ino, folded FROM journal_marks").fetchall()}
        out: list[tuple[str, int, int, bytes, int, bool]] = []
        own = self._journal
        paths = journal_slots(self.path) if self._lockfile is not None and others else []
        if others:
            self._others_at = time.monotonic()
            self._live_journals = 0
        if own is not None and own.path not in paths:
            paths.append(own.path)
        for path in paths:
            name = os.path.basename(path)
            if own is not None and path == own.path:
                ino, size, fd = own.identity(), own.written(), -2
            else:
                fd = -1 if read_only else slot_is_free(path)
                self._live_journals += fd == -1
                try:
                    st = os.stat(path)
                except OSError:
                    if fd >= 0:
                        os.close(fd)
                    continue
                ino, size = st.st_ino, st.st_size
            mark_ino, mark = marks.get(name, (ino, 0))
            if mark_ino != ino or mark > size:
                mark = 0
            if size <= mark:
                if fd >= 0:
                    os.close(fd)
                continue
            if fd == -2:
                data = os.pread(own._fd, size - mark, mark)
            else:
                with open(path, "rb") as f:
                    f.seek(mark)
                    data = f.read(size - mark)
            if fd >= 0 or read_only:
                try:
                    data = self._complete(path, data, mark, warn=fd >= 0)
                except JournalDamagedError:
                    if fd >= 0:
                        os.close(fd)
                    raise
            elif fd == -1:
                cut = data.rfind(_END)
                data = data[: cut + len(_END)] if cut >= 0 else b""
            out.append((path, ino, mark, data, fd, fd == -2))
        return out

    def _complete(self, path: str, data: bytes, mark: int, *, warn: bool) -> bytes:
        """The complete transactions of a journal whose writer is gone (or read by a reader): a torn tail left out."""
        s = scan(data)
        if s.damaged:
            line, start, _ = s.damaged[0]
            after = f" after the {mark} bytes already folded" if mark else ""
            raise JournalDamagedError(
                f"the journal {path} is damaged at line {line} (byte {mark + start}{after}), before "
                f"{len(s.complete)} complete transaction(s) that follow or precede it; it was not replayed and "
                f"is left as it is. Run `python -m lab salvage --store {self.path}` to keep every complete "
                "transaction on both sides, or restore it from a backup"
            )
        if s.good_end < len(data) and warn:
            log.warning("journal %s: dropped a torn tail of %d bytes left by a killed process", path, len(data) - s.good_end)
        return data[: s.good_end]

    def _load_journal_rows(self, con: duckdb.DuckDBPyConnection, sources: list[tuple[str, int, int, bytes, int, bool]], tmp: str) -> None:
        """`journal_rows` from each journal's unfolded bytes; this process's lines keep their numbers."""
        parts, params = [], []
        order = sorted(range(len(sources)), key=lambda i: not sources[i][5])  # own journal first: offset 0
        for n, i in enumerate(order):
            data = sources[i][3]
            if not data:
                continue
            chunk = os.path.join(tmp, f"{n}.ndjson")
            with open(chunk, "wb") as f:
                f.write(data)
            parts.append(f"SELECT * REPLACE (j + {n * _SOURCE} AS j) FROM ({JOURNAL_SELECT})")
            params += [chunk, line_limit(len(data))]
        self._sources = [sources[i][0] for i in order]
        if not parts:
            parts, params = [f"SELECT * FROM ({JOURNAL_SELECT}) LIMIT 0"], [os.path.join(tmp, "none.ndjson"), line_limit(0)]
            with open(params[0], "wb"):
                pass
        con.execute("CREATE OR REPLACE TEMP TABLE journal_rows AS " + " UNION ALL ".join(parts), params)

    def _fold_locked(self, *, others: bool = True) -> None:  # noqa: C901
        """Fold every journal (with the file attached and the store's lock held), then empty what may be."""
        con = self._con
        own = self._journal
        sources = self._unfolded(others=others)
        if not any(data for _, _, _, data, _, _ in sources) and not any(fd >= 0 for *_, fd, _ in sources):
            return
        truncate: list[tuple[str, int]] = []
        try:
            with tempfile.TemporaryDirectory(prefix="graphlab-fold-") as tmp:
                try:
                    con.execute("BEGIN")
                    self._load_journal_rows(con, sources, tmp)
                    kinds = {r[0] for r in con.execute("SELECT DISTINCT t FROM journal_rows").fetchall()}
                    if "cp" in kinds:
                        self._refuse_checkpoint_conflict(con)
                    for stmt, needs in zip(FOLD_STATEMENTS, FOLD_NEEDS, strict=True):
                        if needs & kinds:
                            con.execute(stmt)
                    con.execute("DROP TABLE journal_rows")
                    for path, ino, mark, data, fd, mine in sources:
                        emptied = fd >= 0 or (mine and not own._broken)
                        folded = 0 if emptied else mark + len(data)
                        con.execute(
                            "INSERT OR REPLACE INTO journal_marks VALUES (?, ?, ?)", [os.path.basename(path), ino, folded]
                        )
                        if emptied:
                            truncate.append((path, fd))
                    con.execute("COMMIT")
                except CheckpointError:
                    con.execute("ROLLBACK")
                    raise
                except duckdb.Error as exc:
                    try:
                        con.execute("ROLLBACK")
                    except duckdb.Error:
                        pass
                    db = self.path if self.path != MEMORY else "the in-memory store"
                    journal = own.path if own is not None else f"{self.path}.journal"
                    raise StoreError(
                        f"cannot fold the journal {journal} into {self.path}: {str(exc).splitlines()[0]}; "
                        "nothing is lost: the journal is kept and replayed on the next open. If this repeats, a line of "
                        f"the journal was damaged or edited by hand: run `python -m lab salvage --store {db}` to fold "
                        "every transaction that can be folded (the journal is first copied aside), or move "
                        f"{journal} aside (it holds the boundaries written since the last fold) to open the "
                        "store without it"
                    ) from None
            for _path, fd in truncate:
                if fd == -2:
                    own.truncate()
                else:
                    os.ftruncate(fd, 0)
        finally:
            for *_, fd, _ in sources:
                if fd >= 0:
                    os.close(fd)

    def _refuse_checkpoint_conflict(self, con: duckdb.DuckDBPyConnection) -> None:
        """A different checkpoint under an id already taken fails the fold, naming both (nothing is folded)."""
        taken = con.execute(
            "SELECT EXISTS (SELECT 1 FROM journal_rows j JOIN checkpoints c ON c.run_id = j.run_id AND c.seq = j.seq "
            "WHERE j.t = 'cp') OR (SELECT count(*) <> count(DISTINCT (run_id, seq)) FROM journal_rows WHERE t = 'cp')"
        ).fetchone()[0]
        if not taken:  # the usual case: every checkpoint line is new (the full comparison below costs more)
            return
        row = con.execute(CHECKPOINT_CONFLICTS).fetchone()
        if row is None:
            return
        run_id, seq, first_line, second_line, first, second = row
        sources = getattr(self, "_sources", [])

        def line(j: int) -> str:
            n, at = divmod(int(j), _SOURCE)
            return f"journal line {at} of {sources[n] if n < len(sources) else self._journal.path}"

        where = "stored" if first_line is None else line(first_line)

        def short(text: str) -> str:
            return text if len(text) <= 300 else text[:300] + "..."

        raise CheckpointError(
            f"two different checkpoints claim this id: the {where} one is {short(first)}; "
            f"{line(second_line)} is {short(second)}. A checkpoint id is written once, so "
            "one of them was edited by hand or comes from another store; nothing was folded and the journal is "
            f"kept: remove the line that is wrong from the journal (or move the journal aside) and open the store again",
            run_id=run_id,
            seq=seq,
        )

    def register_graph(self, manifest: Manifest) -> int:
        """The revision number of this manifest's digest under its key, stored on first sight."""
        self._check_writable()
        with self._session() as con:
            row = con.execute(
                "SELECT revision FROM graphs WHERE graph_key = ? AND digest = ?", [manifest.key, manifest.digest]
            ).fetchone()
            if row:
                return int(row[0])
            nxt = con.execute(
                "SELECT coalesce(max(revision), 0) + 1 FROM graphs WHERE graph_key = ?", [manifest.key]
            ).fetchone()[0]
            body = manifest.with_revision(int(nxt)).to_json()
            con.execute(
                "INSERT INTO graphs VALUES (?, ?, ?, ?, ?)",
                [manifest.key, int(nxt), manifest.digest, json.dumps(body), utcnow().replace(tzinfo=None)],
            )
            return int(nxt)

    def manifest(self, key: str, revision: int) -> Manifest | None:
        self._check_open()
        with self._session() as con:
            row = con.execute(
                "SELECT manifest FROM graphs WHERE graph_key = ? AND revision = ?", [key, revision]
            ).fetchone()
        return Manifest.from_json(json.loads(row[0])) if row else None

    # rows: the journal's wire format is the interface's (`Store.run_row`, `checkpoint_row`, ...)

    # -- reading -------------------------------------------------------------------------

    def waits(self, run_id: str) -> list[WaitRecord]:
        """Every wait of a run, oldest first: the open one (if any) and the answered evidence."""
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {_WAIT_COLS} FROM waits WHERE run_id = ? ORDER BY checkpoint_seq, created_at", [run_id]
            ).fetchall()
        return [_wait_record(r) for r in rows]

    def wait_at(self, run_id: str, seq: int) -> WaitRecord | None:
        """The wait bound to checkpoint `seq` of a run (a waiting checkpoint has exactly one)."""
        with self._reading() as con:
            row = con.execute(
                f"SELECT {_WAIT_COLS} FROM waits WHERE run_id = ? AND checkpoint_seq = ? "
                "ORDER BY created_at DESC LIMIT 1",
                [run_id, seq],
            ).fetchone()
        return _wait_record(row) if row else None

    def open_waits(self) -> list[WaitRecord]:
        """Every unanswered wait of a waiting run in the store (what needs a person)."""
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {', '.join('w.' + c.strip() for c in _WAIT_COLS.split(','))} FROM waits w "
                "JOIN runs r ON r.run_id = w.run_id AND r.head_seq = w.checkpoint_seq "
                "WHERE w.resolved_at IS NULL AND r.status = 'waiting' ORDER BY w.created_at"
            ).fetchall()
        return [_wait_record(r) for r in rows]

    @contextmanager
    def _reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._session() as con:
            self._check_open()
            # this process's own writes are always folded first; the other processes' journals at
            # most every OTHERS_EVERY s (a read in a tight loop would fold a few lines each time)
            self.fold(others=time.monotonic() - self._others_at >= OTHERS_EVERY)
            try:
                yield con
            except duckdb.Error as exc:
                raise StoreError(
                    f"cannot read the store {self.path}: {str(exc).splitlines()[0]}; if it was edited outside "
                    "Graph Lab, restore it from a backup"
                ) from None

    def get_run(self, run_id: str) -> RunRecord:
        with self._reading() as con:
            row = con.execute(f"SELECT {_RUN_COLS} FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise RunNotFoundError(f"no run {run_id!r} in the store {self.path}; lab.runs() lists the runs it holds")
        return _run_record(row)

    def list_runs(self, *, graph_key: str | None = None, status: str | None = None) -> list[RunRecord]:
        sql = f"SELECT {_RUN_COLS} FROM runs WHERE 1=1"
        params: list[Any] = []
        if graph_key is not None:
            sql += " AND graph_key = ?"
            params.append(graph_key)
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        with self._reading() as con:
            rows = con.execute(sql + " ORDER BY created_at, run_id", params).fetchall()
        return [_run_record(r) for r in rows]

    def checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {_CP_COLS} FROM checkpoints WHERE run_id = ? ORDER BY seq", [run_id]
            ).fetchall()
        return [_checkpoint_record(r) for r in rows]

    def checkpoint(self, run_id: str, seq: int) -> CheckpointRecord | None:
        with self._reading() as con:
            row = con.execute(
                f"SELECT {_CP_COLS} FROM checkpoints WHERE run_id = ? AND seq = ?", [run_id, seq]
            ).fetchone()
        return _checkpoint_record(row) if row else None

    def events(self, run_id: str, *, kind: str | None = None) -> list[EventRecord]:
        sql = f"SELECT {_EV_COLS} FROM events WHERE run_id = ?"
        params: list[Any] = [run_id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        with self._reading() as con:
            rows = con.execute(sql + " ORDER BY seq", params).fetchall()
        return [_event_record(r) for r in rows]

    def event_tail(self, run_id: str, n: int) -> tuple[int, list[EventRecord]]:
        """How many events a run has, and its last `n` in order (a view of a long run reads only these)."""
        with self._reading() as con:
            count = con.execute("SELECT count(*) FROM events WHERE run_id = ?", [run_id]).fetchone()[0]
            rows = con.execute(
                f"SELECT {_EV_COLS} FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT ?", [run_id, max(0, n)]
            ).fetchall()
        return int(count), [_event_record(r) for r in reversed(rows)]

    def settled_stations(self, run_id: str) -> dict[int, str]:
        """Checkpoint seq -> the station whose settlement wrote it, for every settled boundary."""
        with self._reading() as con:
            rows = con.execute(
                "SELECT checkpoint_seq, node_id FROM events WHERE run_id = ? AND kind = 'settled' "
                "AND checkpoint_seq IS NOT NULL AND node_id IS NOT NULL",
                [run_id],
            ).fetchall()
        return {int(seq): node for seq, node in rows}

    def next_seqs(self, run_id: str) -> tuple[int, int]:
        """The next free checkpoint and event sequence numbers of a run."""
        with self._reading() as con:
            cp = con.execute("SELECT coalesce(max(seq), -1) + 1 FROM checkpoints WHERE run_id = ?", [run_id])
            cp_next = cp.fetchone()[0]
            ev_next = con.execute(
                "SELECT coalesce(max(seq), -1) + 1 FROM events WHERE run_id = ?", [run_id]
            ).fetchone()[0]
        return int(cp_next), int(ev_next)

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> duckdb.DuckDBPyRelation:
        """Run read-only SQL; returns a DuckDB relation (it prints and displays as a table).

        Read-only by construction (sql_read.py). A query that another process (or another thread of
        this one) waits behind is interrupted and run again on a private copy of the tables it
        names, with the store let go.
        """
        args: Any = params if params else None
        with tempfile.TemporaryDirectory(prefix="graphlab-sql-") as tmp:
            with self._reading() as con:
                inner = check_statement(con, query, args)
                explain = inner is not query
                # nobody waits behind a reader (the CLI: one thread, the lock file held shared)
                wanted = None if self.read_only else self._waited_for
                rel = run_to_private(con, query, args, explain=explain, tmp=tmp, wanted=wanted)
                if rel is not None:
                    return rel
                # another process or thread waits for the store: copy what the query reads, let go (issue 24 item 3)
                present = [
                    r[0]
                    for r in con.execute(
                        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
                        "AND schema_name = 'main'"
                    ).fetchall()
                ]
                copy = os.path.join(tmp, f"{_DB}.duckdb")  # its name, so a query naming the store works on it
                copy_tables(con, inner, present, copy)
            copy_con = open_copy(copy)
            try:
                rel = run_to_private(copy_con, query, args, explain=explain, tmp=tmp)
            finally:
                copy_con.close()
            assert rel is not None
            return rel

    def _waited_for(self) -> bool:
        """Another thread of this process, or another process, waits for the store."""
        return self._lock.waiting > 0 or (self._lockfile is not None and self._lockfile.wanted())

    def seqs(self, run_id: str) -> list[int]:
        """Every checkpoint sequence number of a run, ascending."""
        with self._reading() as con:
            row = con.execute("SELECT list(seq ORDER BY seq) FROM checkpoints WHERE run_id = ?", [run_id]).fetchone()
        return list(row[0] or [])

    def parents(self, run_id: str) -> dict[int, int | None]:
        """Each checkpoint's parent (`seq -> parent_seq`): the run's checkpoint tree, without states."""
        with self._reading() as con:
            row = con.execute(
                "SELECT list(seq ORDER BY seq), list(parent_seq ORDER BY seq) FROM checkpoints WHERE run_id = ?",
                [run_id],
            ).fetchone()
        return dict(zip(row[0] or [], row[1] or [], strict=True))

    def branch(self, run_id: str, head: int) -> list[int]:
        """The sequence numbers from the root to `head`, following parent links."""
        with self._reading() as con:
            linear = con.execute(
                "SELECT count(*) > 0 AND count(*) FILTER (WHERE parent_seq IS DISTINCT FROM "
                "CASE WHEN seq = 0 THEN NULL ELSE seq - 1 END) = 0 AND max(seq) + 1 = count(*) "
                "FROM checkpoints WHERE run_id = ?",
                [run_id],
            ).fetchone()[0]
            if linear:  # never rewound: every checkpoint's parent is the one before it
                return list(range(head + 1))
            row = con.execute(
                "SELECT list(seq), list(parent_seq) FROM checkpoints WHERE run_id = ?", [run_id]
            ).fetchone()
        parent = dict(zip(row[0] or [], row[1] or [], strict=True))
        path: list[int] = []
        seq: int | None = head
        while seq is not None and seq in parent and len(path) <= len(parent):
            path.append(seq)
            seq = parent[seq]
        path.reverse()
        return path

    def checkpoints_in(self, run_id: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        """The checkpoints with these sequence numbers, in the order given."""
        if not seqs:
            return []
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {_CP_COLS} FROM checkpoints WHERE run_id = ? AND seq IN (SELECT unnest(?::BIGINT[]))",
                [run_id, list(seqs)],
            ).fetchall()
        by_seq = {int(r[1]): r for r in rows}
        return [_checkpoint_record(by_seq[s]) for s in seqs if s in by_seq]

    def delete_checkpoints(self, run_id: str, keep: Sequence[int]) -> int:
        """Delete a run's checkpoints except `keep`; returns how many went. Callers check terminality."""
        self._check_writable()
        with self._reading() as con:
            n = con.execute(
                "SELECT count(*) FROM checkpoints WHERE run_id = ? AND seq NOT IN (SELECT unnest(?::BIGINT[]))",
                [run_id, list(keep)],
            ).fetchone()[0]
            con.execute("BEGIN")
            try:
                con.execute(
                    "DELETE FROM checkpoints WHERE run_id = ? AND seq NOT IN (SELECT unnest(?::BIGINT[]))",
                    [run_id, list(keep)],
                )
                con.execute("COMMIT")
            except duckdb.Error as exc:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot prune run {run_id}: {str(exc).splitlines()[0]}") from None
        return int(n)

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its checkpoints and events. Callers check terminality."""
        self._check_writable()
        with self._reading() as con:
            con.execute("BEGIN")
            try:
                for table in ("checkpoints", "events", "waits", "runs"):
                    con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
                con.execute("COMMIT")
            except duckdb.Error as exc:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot delete run {run_id}: {str(exc).splitlines()[0]}") from None

    def family(self, run_id: str) -> list[RunRecord]:
        """The run's lineage: its ancestors (root first), itself, then every descendant."""
        with self._reading() as con:
            rows = con.execute(f"SELECT {_RUN_COLS} FROM runs WHERE run_id = ? OR parent_run_id IS NOT NULL", [run_id]).fetchall()
        recs = {r[0]: _run_record(r) for r in rows}
        if run_id not in recs:
            raise RunNotFoundError(f"no run {run_id!r} in the store {self.path}; lab.runs() lists the runs it holds")
        chain = [recs[run_id]]
        while chain[0].parent_run_id is not None:
            parent = recs.get(chain[0].parent_run_id) or self._run_or_none(chain[0].parent_run_id)
            if parent is None:
                break
            chain.insert(0, parent)
        children: dict[str, list[RunRecord]] = {}
        for rec in recs.values():
            if rec.parent_run_id is not None:
                children.setdefault(rec.parent_run_id, []).append(rec)
        out = list(chain)
        queue = [run_id]
        while queue:
            for child in sorted(children.get(queue.pop(0), []), key=lambda r: r.run_id):
                out.append(child)
                queue.append(child.run_id)
        return out

    def _run_or_none(self, run_id: str) -> RunRecord | None:
        try:
            return self.get_run(run_id)
        except RunNotFoundError:
            return None

    def table_snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, for tests that prove a refused action changed nothing."""
        out = {}
        with self._reading() as con:
            for table in TABLES:
                out[table] = con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        return out


_RUN_COLS = (
    "run_id, graph_key, revision, digest, status, head_seq, durability, output, error, "
    "created_at, updated_at, parent_run_id, parent_seq, breakpoints"
)
_CP_COLS = "run_id, seq, parent_seq, status, state, next, output, created_at, counters"
_WAIT_COLS = (
    "run_id, owner, kind, node_id, checkpoint_seq, prompt, details, prior, created_at, resolved_at, resolution"
)
_EV_COLS = "run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at"


def _run_record(r: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        run_id=r[0],
        graph_key=r[1],
        revision=int(r[2]),
        digest=r[3],
        status=r[4],
        head_seq=r[5],
        durability=r[6],
        output=_loads(r[7]),
        error=_loads(r[8]),
        created_at=r[9],
        updated_at=r[10],
        parent_run_id=r[11],
        parent_seq=r[12],
        breakpoints=_loads(r[13]),
    )


def _checkpoint_record(r: tuple[Any, ...]) -> CheckpointRecord:
    run_id, seq = r[0], int(r[1])
    try:
        state = _loads(r[4])
        nxt = _loads(r[5])
        output = _loads(r[6])
        counters = _loads(r[8])
        stations = tuple(PendingStation.from_json(p) for p in nxt)
    except (ValueError, TypeError, KeyError) as exc:
        from ..errors import CheckpointError

        raise CheckpointError(
            f"stored JSON is damaged ({exc}); other runs and checkpoints are unaffected: fork the run from "
            "an earlier checkpoint (lab.fork(run_id, seq)), or restore the store file from a backup",
            run_id=run_id,
            seq=seq,
        ) from None
    return CheckpointRecord(
        run_id=run_id,
        seq=seq,
        parent_seq=r[2],
        status=r[3],
        state=state,
        next=stations,
        output=output,
        created_at=r[7],
        counters=counters,
    )


def _event_record(r: tuple[Any, ...]) -> EventRecord:
    try:
        payload = _loads(r[6]) or {}
    except ValueError:
        payload = {"damaged_payload": r[6]}
    return EventRecord(
        run_id=r[0],
        seq=int(r[1]),
        kind=r[2],
        node_id=r[3],
        attempt=r[4],
        checkpoint_seq=r[5],
        payload=payload,
        created_at=r[7],
    )


def _wait_record(r: tuple[Any, ...]) -> WaitRecord:
    try:
        details, prior, resolution = _loads(r[6]), _loads(r[7]) or [], _loads(r[10])
    except ValueError as exc:
        from ..errors import CheckpointError

        raise CheckpointError(
            f"the stored wait {r[1]} is damaged ({exc}); other runs are unaffected", run_id=r[0], seq=r[4]
        ) from None
    return WaitRecord(
        run_id=r[0],
        owner=r[1],
        kind=r[2],
        node_id=r[3],
        checkpoint_seq=int(r[4]),
        prompt=r[5],
        details=details,
        prior=prior,
        created_at=r[8],
        resolved_at=r[9],
        resolution=resolution,
    )
