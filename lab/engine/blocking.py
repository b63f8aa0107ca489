"""Stations that block their thread run on a thread of their own (issue 13 requirement 2).

asyncio cancels a coroutine only where it awaits. A node that blocks its thread (`time.sleep`
in a loop, a synchronous SDK call) holds the lab's event loop until it returns: no timeout
fires, `cancel()` is not heard, and every other run of the kernel stops stepping with it. A
station declared `blocking=True` is therefore run by `in_thread`: its coroutine runs to the end
in a fresh thread with its own event loop, and the engine awaits only a future. The engine's
await is what a timeout or `cancel()` interrupts, at once; the loop stays free for other runs.
(An undeclared one is caught by the watchdog, `lab.engine.watchdog`, about a second after the
deadline, at the price of the lab's loop: the runs driven on it beside the stuck one end
`interrupted`. Declaring it is better.)

What happens to the stuck node: Python cannot stop a thread, so the node keeps running on its
thread until it returns or raises by itself. Its result is discarded (nobody awaits it any
more) and nothing it returns is checkpointed. Its thread is a daemon, so it never keeps the
process alive at exit. What it changed on the run's state object is dropped too (a failed or
cancelled station's state is restored from the head checkpoint), but side effects outside the
run (files, API calls, objects in `deps`) happen, as for any cancelled station.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ("STEP_FUNCTION", "in_thread", "is_threaded", "set_blocking", "unthreaded")

T = TypeVar("T")

_MARK = "__graphlab_blocking__"

STEP_FUNCTION = "_call"
"""Where pydantic-graph's `Step` keeps the function it runs: it has no public way to wrap it, so
the lab names the attribute once, here (checked by tests/integration/test_timeouts.py)."""


def in_thread(fn: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., Coroutine[Any, Any, T]]:
    """`fn` (an async function) run to its end on a thread of its own, awaited as a future.

    The thread runs in a copy of the caller's context (the station's `interrupt()` / `warn()`
    context, a ContextVar the cell set), so the node sees what it would see on the loop.
    """
    if is_threaded(fn):
        return fn

    @functools.wraps(fn)
    async def run_in_thread(*args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()

        def settle(ok: bool, value: Any) -> None:
            if not done.done():  # a cancelled await: the result goes nowhere
                (done.set_result if ok else done.set_exception)(value)

        def work() -> None:
            try:
                result = context.run(asyncio.run, fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting engine, which decides
                outcome: tuple[bool, Any] = (False, exc)
            else:
                outcome = (True, result)
            try:
                loop.call_soon_threadsafe(settle, *outcome)
            except RuntimeError:  # the lab's loop is gone (the process is exiting)
                pass

        name = getattr(fn, "__qualname__", "station")
        threading.Thread(target=work, name=f"graphlab-blocking-{name}", daemon=True).start()
        return await done

    setattr(run_in_thread, _MARK, fn)
    return run_in_thread


def is_threaded(fn: Any) -> bool:
    return getattr(fn, _MARK, None) is not None


def unthreaded(fn: Any) -> Any:
    """The function `in_thread` wrapped, or `fn` itself."""
    return getattr(fn, _MARK, None) or fn


def set_blocking(node: Any, blocking: bool) -> None:
    """Run a station on its own thread (or back on the loop): a `BaseNode` class, a native `NodeStep` or `Step`.

    The station's own code is unchanged: a node class's `run` (a step's function) is wrapped,
    and unwrapped again when `blocking` is False.
    """
    from pydantic_graph.step import NodeStep, Step

    if isinstance(node, NodeStep):
        node = node.node_type
    if isinstance(node, Step):
        call = getattr(node, STEP_FUNCTION)
        setattr(node, STEP_FUNCTION, in_thread(call) if blocking else unthreaded(call))
        return
    run = node.__dict__.get("run") if isinstance(node, type) else None
    if blocking:
        node.run = in_thread(node.run)
    elif run is not None and is_threaded(run):
        node.run = unthreaded(run)
