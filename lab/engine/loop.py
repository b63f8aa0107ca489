"""Run coroutines from synchronous code, also where an event loop is already running.

A Jupyter cell runs inside the kernel's event loop, so `asyncio.run` is refused there and
`nest_asyncio` is fragile. The lab keeps one private event loop on a daemon thread and hands
coroutines to it; the calling thread waits. Ctrl-C (KeyboardInterrupt) while waiting cancels
the coroutine and waits for it to unwind, so a station in flight is aborted and recorded before
the interrupt propagates. A `KeyboardInterrupt` or `SystemExit` raised *inside* the coroutine (a
node calling `sys.exit()`) is carried to the calling thread and raised there: raised on the loop
thread it would stop the loop, and every later call would wait forever.

The coroutine runs in a copy of the *caller's* context (`contextvars`): a ContextVar set in the
cell (a request id, a tracing span) is what the nodes see, as seed 003 asks ("Nodes run in the
coroutine context of the caller"). It is a copy, so what a node sets does not leak back.
`delegate` is the async form: a coroutine awaited on another loop (the notebook's own) runs on
the lab's loop too, so a station that blocks its thread never freezes the caller's loop.

A blocked loop (issue 24 item 13): a station that blocks its thread (`time.sleep` in a loop, a
synchronous client) holds the lab's loop, so no timeout fires there and no cancellation is
heard. The waiting caller is not stuck with it: the watchdog (`lab.engine.watchdog`) settles
the runs whose drives are stuck and then `abandon`s the loop: every call still waiting on it
gets `LoopBlockedError` at once, the next call starts a fresh loop, and the stuck thread is left
to finish by itself (it is a daemon). Nothing of an abandoned loop runs again once its current
callback returns (the loop is stopped), and its tasks are kept, never collected, so no
`finally` of a drive that was settled for it runs later.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from ..errors import LabError

__all__ = (
    "Call",
    "LoopBlockedError",
    "abandon",
    "delegate",
    "lab_loop",
    "on_blocked",
    "on_lab_loop",
    "responsive",
    "run_sync",
    "submit",
)

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()
_calls: set[Call[Any]] = set()
"""Calls handed to a lab loop and not settled yet (what `abandon` settles)."""
_abandoned: list[asyncio.AbstractEventLoop] = []
"""Loops given up because a station blocked them: kept for good, so their tasks are never collected."""

_POLL = 1.0
"""Seconds between checks, while waiting, that the loop thread is still alive."""
_UNWIND = 10.0
"""Seconds to wait, after Ctrl-C, for the cancelled coroutine to record its abort."""
GRACE = 1.0
"""Seconds a loop gets to show it still runs (to handle a timeout, a cancellation or a Ctrl-C)
before it counts as blocked."""


class LoopBlockedError(LabError, RuntimeError):
    """The lab's event loop was blocked by a station and replaced while this call waited on it.

    The runs whose drives were stuck are settled (see `lab.engine.watchdog`); a call that had not
    started yet did nothing: make it again.
    """

    def __init__(self, message: str, *, loop: asyncio.AbstractEventLoop | None = None):
        super().__init__(message)
        self.loop = loop


def lab_loop() -> asyncio.AbstractEventLoop:
    """The lab's private event loop, started on first use (and again after one was abandoned)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def _serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            _thread = threading.Thread(target=_serve, name="graphlab-loop", daemon=True)
            _thread.start()
            ready.wait()
            _loop = loop
        return _loop


def loop_thread(loop: asyncio.AbstractEventLoop) -> threading.Thread | None:
    """The thread that runs `loop`, if it is the lab's loop now."""
    with _lock:
        return _thread if loop is _loop else None


def on_lab_loop() -> bool:
    """Whether the caller runs on the lab's loop now."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return False
    return running is _loop


def responsive(loop: asyncio.AbstractEventLoop, within: float = GRACE) -> bool:
    """Whether `loop` runs a callback within `within` seconds (False: it is blocked, or gone)."""
    seen = threading.Event()
    try:
        loop.call_soon_threadsafe(seen.set)
    except RuntimeError:  # closed
        return False
    return seen.wait(within)


class _Escaped(Exception):
    """Carries a KeyboardInterrupt or SystemExit from the loop thread to the caller."""

    def __init__(self, exc: BaseException):
        super().__init__(repr(exc))
        self.exc = exc


async def _guarded(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return await coro
    except (KeyboardInterrupt, SystemExit) as exc:
        raise _Escaped(exc) from None


class Call(Generic[T]):
    """One coroutine handed to the lab's loop: its task there, and the future its caller waits on."""

    __slots__ = ("_coro", "_tasks", "future", "loop", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop, thread: threading.Thread | None, coro: Coroutine[Any, Any, T]):
        self.loop = loop
        self.thread = thread
        self.future: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._coro = coro
        self._tasks: list[asyncio.Task[T]] = []

    def start(self, context: contextvars.Context) -> None:  # on the loop
        """Create the coroutine's task on the loop (called there, through `call_soon_threadsafe`)."""
        if not self.future.done():
            task = self.loop.create_task(_guarded(self._coro), context=context)
            task.add_done_callback(self._finish)
            self._tasks.append(task)

    def _finish(self, task: asyncio.Task[T]) -> None:  # on the loop
        self._coro.close()  # a no-op unless the task was cancelled before `coro` started
        if self.future.done():  # settled by `abandon`: the late outcome goes nowhere
            return
        try:
            if task.cancelled():
                self.future.set_exception(concurrent.futures.CancelledError())
            elif (exc := task.exception()) is not None:
                self.future.set_exception(exc)
            else:
                self.future.set_result(task.result())
        except concurrent.futures.InvalidStateError:  # `abandon` settled it meanwhile
            pass

    def outcome(self) -> T:
        """Wait for the coroutine's result in this thread (what it raised, raised here; `LoopBlockedError`
        if its loop was abandoned)."""
        try:
            return _wait(self.future, self.thread)
        except _Escaped as exc:
            escaped = exc.exc
        raise escaped  # outside the handler, so it does not chain the carrier

    @property
    def started(self) -> bool:
        """Whether the coroutine's task was created on the loop."""
        return bool(self._tasks)

    def close_unstarted(self) -> None:
        """Close a coroutine that never started: nothing to unwind, and no "never awaited" warning."""
        if not self._tasks:
            self._coro.close()

    def cancel(self) -> None:
        """Cancel the coroutine (from any thread); its task unwinds on the loop and records its abort."""
        try:
            self.loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:  # the loop is closed
            pass

    def _cancel(self) -> None:  # on the loop, after start if that was scheduled (callbacks run in order)
        if self._tasks:
            self._tasks[0].cancel()
        elif not self.future.done():
            self._coro.close()
            self.future.set_exception(concurrent.futures.CancelledError())


def submit(coro: Coroutine[Any, Any, T]) -> Call[T]:
    """Start `coro` on the lab's loop, in a copy of the caller's context; the `Call` to wait on."""
    call = _prepare(coro)
    _launch(call)
    return call


def _prepare(coro: Coroutine[Any, Any, T]) -> Call[T]:
    loop = lab_loop()
    with _lock:
        thread = _thread if loop is _loop else None
    call = Call(loop, thread, coro)
    with _lock:
        _calls.add(call)
    call.future.add_done_callback(lambda _f: _forget(call))
    return call


def _launch(call: Call[Any]) -> None:
    call.loop.call_soon_threadsafe(call.start, contextvars.copy_context())


def _forget(call: Call[Any]) -> None:
    with _lock:
        _calls.discard(call)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the lab loop and wait for its result in this thread."""
    lab_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError(
            "a synchronous Graph Lab call was made from inside a running station; use the async form "
            "(await run.astep() / await run.arun())"
        )
    call = _prepare(coro)
    escaped: BaseException | None = None
    try:
        _launch(call)  # inside the try: a Ctrl-C from here on cancels what was started
        return _wait(call.future, call.thread)
    except KeyboardInterrupt:
        # Ctrl-C here: cancel the station in flight and let it record the abort, then propagate.
        call.cancel()
        _unwind(call)
        raise
    except _Escaped as exc:
        escaped = exc.exc
    raise escaped  # outside the handler, so it does not chain the carrier


_unblock: Callable[[asyncio.AbstractEventLoop, str], None] | None = None
"""Who settles the drives of a loop found blocked (the watchdog, which needs this module and so
registers itself with `on_blocked` when imported: the arrow points one way)."""


def on_blocked(settle: Callable[[asyncio.AbstractEventLoop, str], None]) -> None:
    """Have `settle(loop, why)` settle every drive on a loop a caller found blocked (Ctrl-C)."""
    global _unblock
    _unblock = settle


def _unwind(call: Call[Any]) -> None:
    """Wait for a cancelled call to record its abort; if its loop is blocked, have the watchdog settle it."""
    if concurrent.futures.wait([call.future], timeout=GRACE).done:
        return
    if not responsive(call.loop) and _unblock is not None:
        _unblock(call.loop, "a KeyboardInterrupt (Ctrl-C)")
        return
    concurrent.futures.wait([call.future], timeout=_UNWIND)


async def delegate(coro: Coroutine[Any, Any, T]) -> T:
    """Await `coro` run on the lab's loop, from another loop (the notebook's own), without blocking it.

    Cancelling the awaiting task cancels the coroutine there and waits for it to record its abort.
    """
    call = submit(coro)
    here = asyncio.get_running_loop()
    waiter: asyncio.Future[T] = here.create_future()

    def copy(fut: concurrent.futures.Future[T]) -> None:  # on this loop
        if waiter.done():
            return
        if fut.cancelled():
            waiter.cancel()
        elif (exc := fut.exception()) is not None:
            waiter.set_exception(exc.exc if isinstance(exc, _Escaped) else exc)
        else:
            waiter.set_result(fut.result())

    def relay(fut: concurrent.futures.Future[T]) -> None:
        try:
            here.call_soon_threadsafe(copy, fut)
        except RuntimeError:  # the caller's loop is closed: nobody waits any more
            pass

    call.future.add_done_callback(relay)
    try:
        return await asyncio.shield(waiter)
    except asyncio.CancelledError:
        if not waiter.done():
            call.cancel()
            await asyncio.to_thread(_unwind, call)
        raise


def abandon(loop: asyncio.AbstractEventLoop, reason: str) -> None:
    """Give up `loop` (a station blocks it): stop it, settle every call waiting on it, start afresh next time.

    Called by the watchdog once it settled the runs whose drives were stuck there.
    """
    global _loop, _thread
    with _lock:
        if _loop is loop:
            _loop, _thread = None, None
        if loop not in _abandoned:
            _abandoned.append(loop)
        waiting = [c for c in _calls if c.loop is loop]
    loop.stop()  # only sets a flag: the loop ends after the callback it is stuck in returns
    try:
        loop.call_soon_threadsafe(loop.stop)  # and wakes it, if it is idle by now
    except RuntimeError:
        pass
    for call in waiting:
        call.close_unstarted()
        try:
            call.future.set_exception(LoopBlockedError(reason, loop=loop))
        except concurrent.futures.InvalidStateError:  # it finished meanwhile
            pass


def _wait(fut: concurrent.futures.Future[T], thread: threading.Thread | None) -> T:
    """`fut.result()`, but an error instead of a hang if the loop thread has died."""
    while True:
        try:
            return fut.result(timeout=_POLL)
        except TimeoutError:
            if fut.done():
                raise  # the coroutine's own TimeoutError
            if thread is not None and not thread.is_alive():
                raise RuntimeError(
                    "the lab's event-loop thread stopped while a call was waiting on it; the call cannot "
                    "finish. Later calls start a new loop: lab.resume(run_id) continues the run"
                ) from None
