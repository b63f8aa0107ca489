"""Run coroutines from synchronous code, also where an event loop is already running.

A Jupyter cell runs inside the kernel's event loop, so `asyncio.run` is refused there and
`nest_asyncio` is fragile. The lab keeps one private event loop on a daemon thread and hands
coroutines to it; the calling thread waits. Ctrl-C (KeyboardInterrupt) while waiting cancels
the coroutine, so a station in flight is aborted and recorded, then the interrupt propagates.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ("run_sync", "lab_loop")

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()


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


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the lab loop and wait for its result in this thread."""
    loop = lab_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError(
            "a synchronous Graph Lab call was made from inside a running station; use the async form "
            "(await run.astep() / await run.arun())"
        )
    fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return fut.result()
    except KeyboardInterrupt:
        fut.cancel()
        try:
            fut.result(timeout=10)
        except (concurrent.futures.CancelledError, Exception):
            pass
        raise
