"""The DuckDB store's hold on its file: the store's lock, the file attached for an operation.

No process keeps the file (holders.py): an operation takes the store's lock, attaches the file to
the store's private DuckDB instance, and a watcher thread lets both go once another process
waits or nothing used them for `LINGER` seconds. Also the errors of opening a file, said once.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import duckdb

from ..errors import StoreError, StoreLockedError, StorePermissionError
from .duckdb_instance import CONFIG, MEMORY, Instance, give_back
from .holders import CountingLock, StoreLock
from .journal import Journal
from .lease_watch import WATCH_EVERY, watch

if TYPE_CHECKING:
    from .duckdb_store import DuckDBStore

__all__ = (
    "MEMORY", "CONFIG", "DB", "LINGER", "WATCH_EVERY", "OPEN", "OPEN_LOCK",
    "FileLease", "connect_file", "open_error", "not_writable", "release",
)  # fmt: skip

log = logging.getLogger(__name__)

DB = "graphlab_store"
"""The name the store's file is attached under in the store's private DuckDB instance."""
LINGER = 0.25
"""Seconds a process keeps the file attached after its last operation, unless another process waits."""
OPEN: dict[str, DuckDBStore] = {}
"""The file stores open in this process, by real path (one store object per file per process)."""
OPEN_LOCK = threading.Lock()


def release(
    journal: Journal | None,
    root: Instance,
    con: duckdb.DuckDBPyConnection,
    tmpdir: str | None,
    lock: StoreLock | None,
) -> None:
    """Close a store's files (on close, or when an unclosed store is collected or the process exits).

    The file is detached (synced) before the store's lock is let go; the instance is kept for the
    next store (duckdb_instance.py)."""
    if journal is not None:
        journal.close()  # lets go of the journal slot
    give_back(root, con)
    if lock is not None:
        lock.close()
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)


def not_writable(path: str, detail: str, read_only: bool = False, target: str | None = None) -> StorePermissionError:
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


def open_error(path: str, read_only: bool, exc: duckdb.Error) -> StoreError:
    """What failed opening the file `path`, and what to do."""
    text = str(exc)
    low = text.lower()
    if "permission denied" in low or "read-only file system" in low:
        return not_writable(path, text.splitlines()[0], read_only)
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


def connect_file(path: str, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A connection of its own to the file (salvage), its errors said as `open_error` says them."""
    try:
        return duckdb.connect(path, read_only=read_only, config=CONFIG)
    except duckdb.Error as exc:
        raise open_error(path, read_only, exc) from None


class FileLease:
    """Hold the file for an operation (mixed into `DuckDBStore`)."""

    path: str
    read_only: bool
    closed: bool
    _con: duckdb.DuckDBPyConnection
    _lock: CountingLock
    _lockfile: StoreLock | None
    _depth: int
    _leased: bool
    _last_use: float
    _check_open: Any
    fold: Any
    leases = 0
    """How many times this process took the file (a job's journal window, duckdb_jobs.py, holds while this stays)."""
    _unsynced = False
    """The connection's `fsync_mode` is 'none', left so by a job commit (duckdb_jobs.py): every other use of
    the connection sets it back first (`_synced`), so nothing but a job commit is ever unsynced."""

    def _synced(self) -> None:
        """Set the connection's `fsync_mode` back to 'standard' if a job commit left it 'none'."""
        if self._unsynced:
            self._con.execute("SET fsync_mode = 'standard'")
            self._unsynced = False

    def _attach(self) -> None:
        """Attach the file to the private instance (read-only for a reader) and make it the default."""
        mode = " (READ_ONLY)" if self.read_only else ""
        quoted = self.path.replace("'", "''")
        try:
            self._con.execute(f"ATTACH '{quoted}' AS {DB}{mode}")
        except duckdb.Error as exc:
            raise open_error(self.path, self.read_only, exc) from None
        self._con.execute(f"USE {DB}")

    def _detach(self) -> None:
        con = self._con
        try:
            con.execute("ROLLBACK")  # an error left a transaction open
        except duckdb.Error:
            pass
        try:
            self._synced()  # DETACH may checkpoint the file: never unsynced
        except duckdb.Error as exc:  # pragma: no cover - DuckDB refuses a SET only on a broken connection
            log.warning("store %s: could not set fsync_mode back before letting go of the file: %s", self.path, exc)
        try:
            con.execute("USE memory")
            con.execute(f"DETACH {DB}")
        except duckdb.Error as exc:  # pragma: no cover - the file stays attached until the store closes
            log.warning("store %s: could not let go of the file: %s", self.path, exc)

    @contextmanager
    def _session(self, *, unsynced: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """Hold the file for one operation: the store's lock, then the file attached (nested calls share it).

        The connection's `fsync_mode` is 'standard' inside, unless `unsynced` (the job tables, duckdb_jobs.py:
        their commits may run unsynced, and their reads commit nothing)."""
        with self._lock:
            if not unsynced:
                self._synced()
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
                self.leases += 1
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
        """Have the process's watcher thread let go of the file once another process waits or nothing used it for LINGER s.

        Keeping the file attached between close operations of one process saves attaching and
        detaching (several ms each) per read; another process never waits longer than WATCH_EVERY
        for it, plus the operation under way.
        """
        watch(self)

    def watch_tick(self) -> bool:
        """One look of the watcher thread: let go of the file if another process waits or it lingered.

        Returns False once there is nothing to watch (the store is closed, or the file let go)."""
        if self.closed or not self._leased:
            return False
        assert self._lockfile is not None
        if self._lockfile.wanted() or time.monotonic() - self._last_use > LINGER:
            if self._lock.acquire(blocking=False):
                try:
                    if self._depth == 0:
                        self._let_go()
                finally:
                    self._lock.release()
        return True

    def watch_done(self) -> bool:
        """The file is let go or the store closed (asked by the watcher thread, under its lock)."""
        return self.closed or not self._leased

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

    def _waited_for(self) -> bool:
        """Another thread of this process, or another process, waits for the store."""
        return self._lock.waiting > 0 or (self._lockfile is not None and self._lockfile.wanted())
