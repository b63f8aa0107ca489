"""Who holds what: the store's lock, each process's journal slot, and a run's writer.

DuckDB lets one process hold a database file read-write and no other process open it
meanwhile. So no process keeps the file: every operation that reads or folds takes the
store's lock (an exclusive `flock` on `lab.duckdb.lock`; a read-only reader takes it shared),
attaches the file, and lets both go when done. Writing a boundary needs neither: each process
appends to a journal of its own, `lab.duckdb.journal` for the first, `.journal.1`, `.journal.2`
... for the others, held with an exclusive `flock` for as long as the store is open, so a
slot whose lock is free belongs to a process that is gone (the kernel drops the lock of a
killed process). A run's writer is recorded as the process (pid, host and start time, so a
recycled pid is not mistaken for the writer) that created or last took over the run.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from ..errors import StoreLockedError

__all__ = ("CountingLock", "Process", "StoreLock", "this_process", "journal_slots", "claim_slot", "slot_is_free")

_SLOT = re.compile(r"\.journal(\.\d+)?$")


@dataclass(frozen=True, slots=True)
class Process:
    """A process on a host, told apart from a later one that reuses its pid by its start time."""

    pid: int
    host: str
    started: float
    """Unix seconds the process started (from /proc; 0.0 where unknown)."""

    def describe(self) -> str:
        when = datetime.fromtimestamp(self.started, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if self.started else "?"
        return f"process {self.pid} on host {self.host} (started {when})"

    def is_alive(self) -> bool:
        """Still running: on this host, the same pid with the same start time; elsewhere, assumed so."""
        if self.host != _HOST:
            return True
        started = _started(self.pid)
        if started is None:
            return False
        return not self.started or abs(started - self.started) < 1.0


def _boot_time() -> float:
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


_HOST = socket.gethostname()
_BOOT = _boot_time()
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _started(pid: int) -> float | None:
    """Unix start time of `pid`, or None when no such process runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return 0.0
    fields = data[data.rfind(b")") + 2 :].split()
    if fields and fields[0] in (b"Z", b"X"):
        return None
    return round(_BOOT + int(fields[19]) / _TICKS, 2) if _BOOT and len(fields) > 19 else 0.0


_ME: Process | None = None


def this_process() -> Process:
    global _ME
    if _ME is None or _ME.pid != os.getpid():  # after a fork the child is another process
        _ME = Process(os.getpid(), _HOST, _started(os.getpid()) or 0.0)
    return _ME


class CountingLock:
    """A re-entrant lock for a store's threads that counts those waiting for it.

    A long `lab.sql` holding it gives way once `waiting` is above zero (sql_read.py), as it does
    for another process waiting for the store's lock file.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._count = threading.Lock()
        self.waiting = 0
        self.try_acquire = self._lock.acquire
        """The uncontended path in one C call: `try_acquire(False)`, then `acquire()` if it said no (the hot path)."""
        self.release = self._lock.release  # type: ignore[method-assign]

    def acquire(self, blocking: bool = True) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if not blocking:
            return False
        with self._count:
            self.waiting += 1
        try:
            return self._lock.acquire()
        finally:
            with self._count:
                self.waiting -= 1

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> CountingLock:
        if not self._lock.acquire(blocking=False):  # uncontended (the usual case): one call
            self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class StoreLock:
    """The store's lock file: held exclusively to attach the database read-write, shared to read it."""

    def __init__(self, path: str, *, read_only: bool = False, timeout: float = 120.0):
        self.path = path
        self.timeout = timeout
        want = path + "-wait"
        if read_only:
            # a reader needs no write access: without a lock file no writer has opened the store yet
            self._fd = os.open(path, os.O_RDONLY) if os.path.exists(path) else -1
            self._want = os.open(want, os.O_RDONLY) if os.path.exists(want) else -1
        else:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            self._want = os.open(want, os.O_RDWR | os.O_CREAT, 0o644)

    def wanted(self) -> bool:
        """Another process waits for the lock (it holds `lock-wait` shared while it waits)."""
        if self._want < 0:
            return False
        try:
            fcntl.flock(self._want, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._want, fcntl.LOCK_UN)
        return False

    def acquire(self, *, shared: bool = False) -> None:
        """Wait for the lock (polling, so a stuck holder becomes an error naming it, not a hang).

        A process that keeps the store attached between operations (a lease) lets go as soon as
        it sees another one waiting: the waiter says so by holding `lock-wait` shared.
        """
        if self._fd < 0:
            return
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        try:
            fcntl.flock(self._fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if self._want >= 0:
                fcntl.flock(self._want, fcntl.LOCK_SH)
            try:
                self._wait(mode)
            finally:
                if self._want >= 0:
                    fcntl.flock(self._want, fcntl.LOCK_UN)
        if not shared:
            me = this_process()
            try:
                os.pwrite(self._fd, f"{me.pid} {me.host}\n".ljust(64).encode(), 0)
            except OSError:
                pass

    def _wait(self, mode: int) -> None:
        deadline = time.monotonic() + self.timeout
        pause = 0.0002
        while True:
            time.sleep(pause)
            pause = min(pause * 2, 0.005)
            try:
                fcntl.flock(self._fd, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreLockedError(
                        f"the store {self.path.removesuffix('.lock')} has been busy for {self.timeout:.0f} s: "
                        f"another process holds its lock ({self.holder() or 'unknown process'}) and does not let "
                        "go; if that process is stopped (a debugger, Ctrl-Z), continue or end it"
                    ) from None

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextmanager
    def held(self, *, shared: bool = False) -> Iterator[None]:
        self.acquire(shared=shared)
        try:
            yield
        finally:
            self.release()

    def holder(self) -> str:
        """The last process that took the lock exclusively, as the lock file says."""
        try:
            text = os.pread(self._fd, 64, 0).decode(errors="replace").split()
        except OSError:
            return ""
        return f"PID {text[0]} on {text[1]}" if len(text) == 2 else ""

    def close(self) -> None:
        for name in ("_fd", "_want"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)


def journal_slots(db_path: str) -> list[str]:
    """Every journal file beside the database: `.journal` and `.journal.N`, in slot order."""
    folder, base = os.path.split(db_path)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return []
    found = []
    for name in names:
        if name.startswith(base) and _SLOT.fullmatch(name[len(base) :]):
            tail = name[len(base) + len(".journal") :]
            found.append((int(tail[1:]) if tail else 0, os.path.join(folder, name)))
    return [p for _, p in sorted(found)]


def slot_path(db_path: str, n: int) -> str:
    return f"{db_path}.journal" if n == 0 else f"{db_path}.journal.{n}"


def claim_slot(db_path: str) -> tuple[str, int]:
    """Open and lock the first journal slot no live process holds: (path, fd). Held until closed."""
    n = 0
    while True:
        path = slot_path(db_path, n)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            n += 1
            continue
        except BaseException:
            os.close(fd)
            raise
        return path, fd


def slot_is_free(path: str) -> int:
    """An fd holding the journal at `path` locked if no process holds it (its writer is gone), else -1."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return -1
    return fd
