"""Who holds a run on a PostgreSQL store, and keeping that true when the connection drops.

A process keeps one connection of its own to the server, its *live session*, beside the pool:

- a shared session lock (`LIVE_LOCK`) on every run it writes anything to (a step, an answer);
- an exclusive session lock (`WRITER_LOCK`) on every run it steps, with a row in `writers`
  naming the process (pid, host, start time), as DuckDB's `writers` table does.

The server drops a session's locks when the session ends: when its process dies, but also when
the server restarts or an administrator ends the session. So a free lock alone does not prove a
writer dead. The live session notices a dropped connection (a watcher thread, and before every
write), reconnects and takes its locks again; a run another process took over meanwhile is *lost*
to this process, and its writes of that run are refused (`RunOwnedError`). A process judging
whether a run's writer lives (`holders`) counts a free lock as death only when the writer is
gone from this host's process table, or, for a writer on another host, when its claim is younger
than the server (its session ended while the server ran on) or the server has run for longer than
`RESTART_GRACE` seconds (time enough to reconnect).
"""

from __future__ import annotations

import select
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import RunOwnedError, StoreError
from .holders import Process, this_process
from .postgres_schema import LIVE_LOCK, WRITER_LOCK

__all__ = ("LiveSession", "RESTART_GRACE", "stale", "readable", "check_pooled", "holders")

RESTART_GRACE = 60.0
"""Seconds after a server (re)start during which a writer on another host whose lock is free is still
taken for alive: its process may be reconnecting. A writer on this host is looked up instead."""

_HOLDERS = f"""
SELECT
    EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
            AND l.classid::bigint IN ({LIVE_LOCK}, {WRITER_LOCK})
            AND l.objid::bigint = (hashtext(%(run)s)::bigint & 4294967295)
            AND l.pid <> ALL(%(mine)s)) AS held,
    EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
            AND l.classid::bigint = {WRITER_LOCK}
            AND l.objid::bigint = (hashtext(%(run)s)::bigint & 4294967295)
            AND l.pid <> ALL(%(mine)s)) AS writer_held,
    w.pid, w.host, w.started,
    w.claimed_at < (pg_postmaster_start_time() AT TIME ZONE 'UTC') AS before_restart,
    extract(epoch FROM now() - pg_postmaster_start_time()) AS up,
    r.status
FROM (SELECT 1) one LEFT JOIN writers w ON w.run_id = %(run)s LEFT JOIN runs r ON r.run_id = %(run)s
"""

_OWN = f"""
WITH lock AS (SELECT pg_try_advisory_lock({WRITER_LOCK}, hashtext(%(run)s)) AS got)
INSERT INTO writers (run_id, pid, host, started, claimed_at)
SELECT %(run)s, %(pid)s, %(host)s, %(started)s, now() AT TIME ZONE 'UTC' FROM lock WHERE got
ON CONFLICT (run_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, started = excluded.started,
    claimed_at = excluded.claimed_at
RETURNING 1
"""

def stale(con: Any) -> bool:
    """True when an idle connection is closed or has something to read: the server ended it."""
    if con.closed or con.broken:
        return True
    try:
        return readable(con.fileno(), 0)
    except (OSError, ValueError):
        return True


def readable(fd: int, timeout: float) -> bool:
    """`fd` has something to read, or its peer closed it, within `timeout` seconds (poll: any fd number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(int(timeout * 1000)))


def _readable_now(fd: int, other: int) -> tuple[bool, bool]:
    """Whether `fd` and `other` (-1: none) have something to read now, in one `poll` (a write checks
    the live session and the write connection with one system call, not two)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    if other >= 0 and other != fd:
        poller.register(other, select.POLLIN | select.POLLPRI)
    ready = {f for f, _ in poller.poll(0)}
    return fd in ready, other in ready


def check_pooled(con: Any) -> None:
    """The pool's check of a connection it hands out: one the server ended is replaced, not used."""
    if stale(con):
        import psycopg

        con.close()  # so the pool discards it
        raise psycopg.OperationalError("the server ended this connection (a restart?)")


def holders(con: Any, run_id: str, mine: list[int]) -> tuple[bool, Process | None, str | None]:
    """Who holds `run_id`, seen from `con`: (whether a session other than this process's `mine`
    holds a lock on it, its writer if that is another process and alive, the run's status)."""
    held, writer_held, pid, host, started, before_restart, up, status = con.execute(
        _HOLDERS, {"run": run_id, "mine": mine}
    ).fetchone()
    proc = None if pid is None else Process(int(pid), host, float(started))
    if proc is None or proc == this_process():
        return bool(held), None, status
    if writer_held:
        alive = True
    elif proc.host == this_process().host:
        alive = proc.is_alive()  # its lock went with its session; the process table knows
    else:  # its session ended: with the server (restarted lately) it may be reconnecting, else it died
        alive = bool(before_restart) and float(up) < RESTART_GRACE
    return bool(held), (proc if alive else None), status


class LiveSession:
    """This process's own connection to the server, holding its runs' locks across reconnects."""

    def __init__(self, connect: Callable[[], Any], describe: Callable[[BaseException], str]):
        self._connect = connect
        self._describe = describe
        self._mutex = threading.RLock()
        self._stop = threading.Event()
        self.claimed: set[str] = set()
        self.owned: set[str] = set()
        self.others: set[str] = set()
        """Runs another live process steps (a parked run answered from here): not tried again per write."""
        self.lost: dict[str, str] = {}
        """Runs another process took over while this one was disconnected: who took each."""
        self._con = connect()
        self._backend = _identity(self._con)
        self.reconnects = 0
        self.on_drop: Callable[[], None] | None = None
        """Called when the session is found dropped: the store checks its pool's idle connections too."""
        self._thread = threading.Thread(target=_watch, args=(weakref.ref(self), self._stop), daemon=True,
                                        name="graph-lab-pg-live")
        self._thread.start()

    # -- holding runs ----------------------------------------------------------------------

    def hold(self, run_ids: Iterable[str], own: Iterable[str] = (), *, also: Any = None) -> bool:
        """Before a write: reconnect if the session dropped, refuse runs lost to another process
        meanwhile, and lock the runs new to this process (`own`: as their writer).

        `also`, the store's idle write connection, is checked in the same `poll` as the session:
        True back when the server ended it (the store replaces it before writing)."""
        run_ids, own = set(run_ids), set(own)
        with self._mutex:
            try:
                also_stale = self._ensure(also)
                if not self.lost and run_ids <= self.claimed and own <= self.owned:  # a station of a run held already
                    return also_stale
                own = own - self.owned - self.others
                lost = sorted(r for r in run_ids if r in self.lost)
                if lost:
                    run_id = lost[0]
                    raise RunOwnedError(
                        f"cannot write run {run_id}: while this process's connection to the server was lost (a "
                        f"server restart, or its session was ended), {self.lost[run_id]} took the run over and now "
                        f"steps it; nothing was written. Read it with lab.resume({run_id!r}), or step it in that process"
                    )
                for run_id in sorted(run_ids - self.claimed):
                    self._con.execute("SELECT pg_advisory_lock_shared(%s, hashtext(%s))", [LIVE_LOCK, run_id])
                    self.claimed.add(run_id)
                for run_id in sorted(own):
                    self._own(run_id)
                return also_stale
            except Exception as exc:
                if _is_driver_error(exc):
                    raise StoreError(self._describe(exc)) from None
                raise

    def own(self, run_id: str) -> None:
        """Become the writer of `run_id` (after the store said no live process steps it)."""
        self.others.discard(run_id)
        self.hold([run_id], own=[run_id])

    def _own(self, run_id: str) -> None:
        me = this_process()
        got = self._con.execute(_OWN, {"run": run_id, "pid": me.pid, "host": me.host, "started": me.started}).fetchone()
        if got:
            self.owned.add(run_id)
            self.lost.pop(run_id, None)
        else:  # another live process steps it (a parked run answered from here): it stays that one's
            self.others.add(run_id)

    # -- a dropped connection --------------------------------------------------------------

    def _ensure(self, also: Any = None) -> bool:
        """Reconnect if the server ended the session, and take every lock again (under the mutex).

        True when `also` (another idle connection, checked in the same `poll`) was ended by the server."""
        session_stale, also_stale = _both_stale(self._con, also)
        if not session_stale:
            return also_stale
        if not (self._con.closed or self._con.broken):
            try:
                self._con.execute("SELECT 1")
                return also_stale  # something harmless was waiting to be read (a notice): the session is there
            except Exception as exc:
                if not _is_driver_error(exc):
                    raise
        try:
            self._con.close()
        except Exception:  # pragma: no cover - best effort
            pass
        if self.on_drop is not None:
            try:
                self.on_drop()
            except Exception:  # pragma: no cover - the pool replaces what it finds broken on use
                pass
        old = self._backend
        self._con = self._connect()
        self._backend = _identity(self._con)
        self.reconnects += 1
        try:
            self._end_old_session(old)
            for run_id in sorted(self.claimed):
                self._con.execute("SELECT pg_advisory_lock_shared(%s, hashtext(%s))", [LIVE_LOCK, run_id])
            for run_id in sorted(self.owned):
                self._retake(run_id)
        except BaseException:
            self._con.close()  # the next look starts again, and takes every lock
            raise
        return also_stale

    def _end_old_session(self, old: tuple[int, Any]) -> None:
        """A session the server has not noticed is gone (a network cut) still holds this process's
        locks: end it (it is this role's; the same pid and start, so never another's), and wait a
        little for its locks to go."""
        where = "FROM pg_stat_activity WHERE pid = %s AND backend_start = %s"
        try:
            if not self._con.execute(f"SELECT count(pg_terminate_backend(pid)) {where}", list(old)).fetchone()[0]:
                return
        except Exception as exc:  # not allowed here: the server ends it when it notices, as before
            if _is_driver_error(exc) and not stale(self._con):
                return
            raise
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and self._con.execute(f"SELECT 1 {where}", list(old)).fetchone():
            time.sleep(0.02)

    def _retake(self, run_id: str) -> None:
        """Hold `run_id` as its writer again, unless another process took it over meanwhile."""
        me = this_process()
        got = self._con.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", [WRITER_LOCK, run_id]).fetchone()[0]
        row = self._con.execute("SELECT pid, host, started FROM writers WHERE run_id = %s", [run_id]).fetchone()
        writer = None if row is None else Process(int(row[0]), row[1], float(row[2]))
        if got and writer in (None, me):
            self._con.execute(_OWN, {"run": run_id, "pid": me.pid, "host": me.host, "started": me.started})
            return
        if got:
            self._con.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [WRITER_LOCK, run_id])
        self.owned.discard(run_id)
        self.lost[run_id] = writer.describe() if writer is not None else "another process"

    def watch_once(self) -> None:
        """Reconnect now if the session dropped (the watcher does this about every 0.2 s)."""
        with self._mutex:
            if self._stop.is_set():
                return
            try:
                self._ensure()
            except Exception as exc:
                if not _is_driver_error(exc):
                    raise

    def backend_pid(self) -> int:
        """The server process of this session (-1 while disconnected): its locks are this process's."""
        try:
            return -1 if self._con.closed else int(self._con.info.backend_pid)
        except Exception:
            return -1

    def fileno(self) -> int:
        try:
            return -1 if self._con.closed else self._con.fileno()
        except Exception:
            return -1

    def close(self) -> None:
        """Let go of every run (its `writers` rows go) and the connection."""
        self._stop.set()
        with self._mutex:
            try:
                if self.owned and not stale(self._con):
                    me = this_process()
                    self._con.execute(
                        "DELETE FROM writers WHERE run_id = ANY(%s) AND pid = %s AND host = %s AND started = %s",
                        [sorted(self.owned), me.pid, me.host, me.started],
                    )
            except Exception:  # pragma: no cover - best effort: the server may be gone
                pass
            try:
                self._con.close()
            except Exception:  # pragma: no cover - best effort
                pass


def _both_stale(con: Any, also: Any) -> tuple[bool, bool]:
    """`stale(con)` and `stale(also)` (False for None), in one `poll` while both are open."""
    if also is not None and (also.closed or also.broken):
        return stale(con), True
    if con.closed or con.broken:
        return True, also is not None and stale(also)
    try:
        return _readable_now(con.fileno(), -1 if also is None else also.fileno())
    except (OSError, ValueError):  # as `stale` takes it: each looked at alone
        return stale(con), also is not None and stale(also)


def _identity(con: Any) -> tuple[int, Any]:
    """The session's server process and its start: a later session with the same pid is another."""
    return con.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()


def _is_driver_error(exc: BaseException) -> bool:
    return type(exc).__module__.startswith(("psycopg", "psycopg_pool"))


def _watch(ref: weakref.ref[LiveSession], stop: threading.Event) -> None:
    """Reconnect a live session soon after the server ends it, so its locks are held again."""
    pause = 0.2
    while not stop.is_set():
        session = ref()
        if session is None:
            return
        fd = session.fileno()
        del session
        try:
            dropped = readable(fd, pause) if fd >= 0 else True
        except (OSError, ValueError):
            dropped = True
        if stop.is_set():
            return
        if not dropped:
            continue
        session = ref()
        if session is None:
            return
        try:
            session.watch_once()
        except Exception:  # pragma: no cover - the next write says what failed
            pass
        del session
        time.sleep(pause)  # the server may still be starting: try again shortly
