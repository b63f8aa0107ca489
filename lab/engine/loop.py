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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ("run_sync", "lab_loop")

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()

_POLL = 1.0
"""Seconds between checks, while waiting, that the loop thread is still alive."""
_UNWIND = 10.0
"""Seconds to wait, after Ctrl-C, for the cancelled coroutine to record its abort."""


def lab_loop() -> asyncio.AbstractEventLoop:
    """The lab's private event loop, started on first use."""
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


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the lab loop and wait for its result in this thread."""
    loop = lab_loop()
    thread = _thread
    if threading.current_thread() is thread:
        coro.close()
        raise RuntimeError(
            "a synchronous Graph Lab call was made from inside a running station; use the async form "
            "(await run.astep() / await run.arun())"
        )
    context = contextvars.copy_context()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    tasks: list[asyncio.Task[T]] = []

    def _finish(task: asyncio.Task[T]) -> None:
        coro.close()  # a no-op unless the task was cancelled before `coro` started
        if task.cancelled():
            done.set_exception(concurrent.futures.CancelledError())
        elif (exc := task.exception()) is not None:
            done.set_exception(exc)
        else:
            done.set_result(task.result())

    def _start() -> None:
        if not done.done():
            task = loop.create_task(_guarded(coro), context=context)
            task.add_done_callback(_finish)
            tasks.append(task)

    def _cancel() -> None:  # on the loop, after _start if that was scheduled (callbacks run in order)
        if tasks:
            tasks[0].cancel()
        elif not done.done():
            coro.close()
            done.set_exception(concurrent.futures.CancelledError())

    escaped: BaseException | None = None
    try:
        loop.call_soon_threadsafe(_start)
        return _wait(done, thread)
    except KeyboardInterrupt:
        # Ctrl-C here: cancel the station in flight and let it record the abort, then propagate.
        loop.call_soon_threadsafe(_cancel)
        concurrent.futures.wait([done], timeout=_UNWIND)
        raise
    except _Escaped as exc:
        escaped = exc.exc
    raise escaped  # outside the handler, so it does not chain the carrier


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
