"""The caller regains control when a station blocks the lab's event loop (issue 24 item 13).

asyncio cancels a coroutine only where it awaits. A station that blocks its thread without
being declared `blocking=True` (`time.sleep` in a loop, a synchronous client) holds the lab's
loop: the call's timeout cannot fire there, `cancel()` is not heard, Ctrl-C cannot unwind it.
The watchdog watches each *drive* (one `run.run()` / `run.step()` call, not each station: it
costs a set insert per call and nothing per station) and steps in only when a drive is
overdue: its deadline passed, `cancel()` asked, or the caller pressed Ctrl-C. It then asks the
loop to run a no-op; a loop that does not within `GRACE` seconds, with the notebook's own code on
its thread's stack (a station), is blocked (with only the lab's or a library's code there, say a
slow disk write, it gets `PATIENCE` seconds first). Every drive on it
is then settled by its run (`owner.rescue`): the run whose deadline passed fails with
`RunTimeout`, a cancelled one ends `cancelled`, any other (a run stepping beside it, a Ctrl-C'd
one) ends `interrupted`; each at its head checkpoint, its state restored from there, released.
Then the loop is abandoned (`lab.engine.loop.abandon`): the callers waiting on it return, and
later calls run on a fresh loop, so the kernel's other runs keep working.

What happens to the stuck station: Python cannot stop a thread, so it goes on until it returns
by itself; its result is discarded (its run no longer takes writes from that thread), and the
loop it blocked stops as soon as it returns. Side effects outside the run happen, as for any
cancelled station. Drives on a loop that is not the lab's (an `async for` over `run.stream()`
on the notebook's loop) are not watched, and a caller that waits on the lab's loop by other means
than `lab.engine.loop.submit` / `run_sync` / `delegate` is not released when its loop is
abandoned: declare such stations `blocking=True`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import sysconfig
import threading
import time
from types import FrameType
from typing import Protocol

from .loop import GRACE, abandon, loop_thread, on_blocked, responsive

__all__ = ("PATIENCE", "Stuck", "Watch", "ask", "leave", "unblock", "watch")

PATIENCE = 10.0
"""Seconds a loop that does not answer gets while no code of the notebook's is on its stack (the lab's
own work, say a slow disk write, is not a blocked station): after that it counts as blocked too."""

STUCK_FOR = 2.0
"""Seconds a loop must go on not answering, with the notebook's code on its stack, before it counts
as blocked: one missed probe is not enough on a busy machine (2 cores at load 5 can starve a healthy
loop for a second while a station's code runs; a false rescue would settle a run whose station goes on)."""

log = logging.getLogger(__name__)


class Stuck(Protocol):
    """What the watchdog needs of a run whose drive it watches."""

    def rescue(self, w: Watch, *, timed_out: bool, where: str, why: str) -> None:
        """Settle the drive stuck on a blocked loop (called on the watchdog's thread, or Ctrl-C's)."""


class Watch:
    """One drive on the lab's loop, as the watchdog sees it."""

    __slots__ = ("deadline", "due", "loop", "owner", "since", "state", "thread")

    def __init__(self, owner: Stuck, loop: asyncio.AbstractEventLoop, thread: threading.Thread, deadline: float | None):
        self.owner = owner
        self.loop = loop
        self.thread = thread
        self.deadline = deadline
        self.due = deadline
        """When to look at this drive next (None: only if asked)."""
        self.since: float | None = None
        """When the watchdog first found its loop not answering."""
        self.state = "live"  # "left" once its drive ended by itself, "rescued" once the watchdog settled it


_cond = threading.Condition()
_live: set[Watch] = set()
_thread: threading.Thread | None = None


def watch(owner: Stuck, loop: asyncio.AbstractEventLoop, seconds: float | None) -> Watch | None:
    """Watch `owner`'s drive on `loop` for this call (None when `loop` is not the lab's: nothing to watch)."""
    thread = loop_thread(loop)
    if thread is None:
        return None
    w = Watch(owner, loop, thread, None if seconds is None else time.monotonic() + seconds)
    with _cond:
        _live.add(w)
        if w.due is not None:
            _wake()
    return w


def leave(w: Watch | None) -> bool:
    """The drive ends: True when it cleans up itself, False when the watchdog already settled it."""
    if w is None:
        return True
    with _cond:
        if w.state == "rescued":
            return False
        w.state = "left"
        _live.discard(w)
        return True


def ask(w: Watch | None) -> None:
    """`cancel()` was asked (from any thread): if the loop cannot act on it, the watchdog does."""
    if w is None:
        return
    with _cond:
        if w.state == "live":
            w.due = time.monotonic()
            _wake()


def unblock(loop: asyncio.AbstractEventLoop, why: str) -> None:
    """Settle every drive on `loop`, found blocked by a caller (Ctrl-C), and abandon it."""
    _rescue(loop, why)


on_blocked(unblock)  # a caller's Ctrl-C on a blocked loop (lab.engine.loop) comes here


def _wake() -> None:  # with _cond held
    global _thread
    if _thread is None or not _thread.is_alive():
        _thread = threading.Thread(target=_serve, name="graphlab-watchdog", daemon=True)
        _thread.start()
    _cond.notify()


def _serve() -> None:
    while True:
        with _cond:
            now = time.monotonic()
            due = [w for w in _live if w.due is not None and w.due <= now]
            if not due:
                later = [w.due for w in _live if w.due is not None]
                _cond.wait(min(later) - now if later else None)
                continue
        for loop in {w.loop for w in due}:
            mine = [w for w in due if w.loop is loop]
            alive = responsive(loop)  # it runs: it handles the timeout or the cancellation itself
            if alive or _patience(mine):  # or it is busy in the lab's own code: look again later
                with _cond:
                    for w in mine:
                        w.due = time.monotonic() + GRACE
                        w.since = None if alive else w.since
                continue
            try:
                _rescue(loop, "the call's timeout ran out" if any(_overdue(w) for w in mine) else "cancel() was asked")
            except Exception:  # never let the watchdog die: later drives need it
                log.exception("the watchdog could not settle the drives on a blocked loop")


def _patience(stuck: list[Watch]) -> bool:
    """Whether to give a loop that does not answer more time: no code of the notebook's is on its thread's
    stack (it is in the lab's or a library's own code, say a slow disk write), for up to PATIENCE seconds."""
    now = time.monotonic()
    for w in stuck:
        w.since = w.since or now
    waited = now - min(w.since or now for w in stuck)
    if _user_frame(stuck[0].thread) is not None:
        return waited < STUCK_FOR
    return waited < PATIENCE


def _overdue(w: Watch) -> bool:
    return w.deadline is not None and time.monotonic() >= w.deadline


def _rescue(loop: asyncio.AbstractEventLoop, why: str) -> None:
    """Settle every live drive on the blocked `loop` (each by its run), then abandon the loop."""
    with _cond:
        stuck = [w for w in _live if w.loop is loop and w.state == "live"]
        for w in stuck:
            w.state = "rescued"
            _live.discard(w)
    thread = stuck[0].thread if stuck else None
    where = blocked_at(thread)
    for w in stuck:
        try:
            w.owner.rescue(w, timed_out=_overdue(w), where=where, why=why)
        except Exception:
            log.exception("could not settle a run stuck on a blocked loop")
    abandon(
        loop,
        f"the lab's event loop was blocked by a station ({where}) when {why}; it was replaced. The runs that "
        "were driven on it are settled (see their status); a station that blocks its thread must be declared "
        "@g.node(blocking=True)",
    )


_PATHS = sysconfig.get_paths()
_LIBRARY = tuple(
    os.path.normcase(p)
    for p in {_PATHS["stdlib"], _PATHS["purelib"], _PATHS["platlib"], os.path.dirname(os.path.dirname(__file__))}
)
"""Code that is not the notebook's own: the standard library, installed packages, the lab itself."""


_THREAD_FRAMES = "_current_frames"
"""CPython's documented `sys._current_frames()`: the only way to see where another thread is."""


def _frames(thread: threading.Thread | None) -> FrameType | None:
    if thread is None or thread.ident is None:
        return None
    return getattr(sys, _THREAD_FRAMES)().get(thread.ident)


def _user_frame(thread: threading.Thread | None) -> FrameType | None:
    """The innermost frame of the notebook's own code on `thread`'s stack (None: only library code)."""
    frame = _frames(thread)
    while frame is not None:
        if not os.path.normcase(frame.f_code.co_filename).startswith(_LIBRARY):
            return frame
        frame = frame.f_back
    return None


def blocked_at(thread: threading.Thread | None) -> str:
    """Where `thread` is stuck: the innermost frame of the notebook's own code ("in Stuck.run, file.py:12")."""
    frame = _user_frame(thread) or _frames(thread)
    if frame is None:
        return "where, is unknown"
    name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return f"in {name}, {frame.f_code.co_filename}:{frame.f_lineno}"
