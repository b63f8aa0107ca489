"""A call's timeout, and how a run is settled when a station blocks the lab's loop (issue 24 item 13).

Mixed into `Run`. A call's timeout (`run.run(timeout=...)`) is a timer on the loop that cancels
the step in flight; its hooks record the `RunTimeout`. A station that blocks its thread holds
the loop, so that timer cannot fire and `cancel()` is not heard: the watchdog
(`lab.engine.watchdog`) then calls `rescue`, on its own thread, which settles the run as its
hooks would have (`RunTimeout`, `cancelled`, or `interrupted` for a Ctrl-C or a run stepping
beside it), naming the stuck station and where it blocked, restores the head's state and
releases the run. The abandoned loop's thread may still return from the station later: from
then on the run refuses every write from that thread, so its late result is discarded.

The async forms hand the drive to the lab's loop when called on another loop (`delegate`), so
the same watchdog covers `await run.arun()` on the notebook's loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from .engine import watchdog
from .engine.loop import LoopBlockedError, delegate, on_lab_loop
from .errors import RunTimeout
from .events import running_run

if TYPE_CHECKING:
    from .engine.watchdog import Watch
    from .run import Run

__all__ = ("AbandonedDrive", "Rescues")


class AbandonedDrive(BaseException):
    """A drive the watchdog settled tried to write from its abandoned loop: its late result is discarded.

    A `BaseException`, so no `except Exception` in an engine records it as a failure.
    """


class Rescues:
    """Mixed into `Run`: the call's timeout, the watchdog's rescue of a stuck drive, the async hand-off."""

    _watch: Watch | None = None
    """The watchdog's view of this run's drive in flight (None between calls)."""
    _watch_seconds: float | None = None
    _fence: frozenset[threading.Thread] = frozenset()
    """Threads of loops abandoned while this run was driven there: their late writes are refused (by
    thread object: a thread's ident is reused by later threads)."""
    _rescued_on: Any = None
    """The loop the watchdog last settled this run's drive on (what `_after_rescue` checks)."""
    _blocked_at: str | None = None
    """While a rescue records a timeout: where the station blocked (the message says so)."""

    # -- the call's timeout ----------------------------------------------------------------

    def _time_out(self: Run, task: asyncio.Task[Any], seconds: float) -> None:  # type: ignore[misc]
        """The call's timeout ran out: cancel the step in flight (its hooks record the RunTimeout)."""
        if self._task is not None and self._task[1] is task and not task.done():
            self._timed_out = seconds
            task.cancel()

    def _timeout_error(self: Run, seconds: float, node_id: str | None) -> RunTimeout:  # type: ignore[misc]
        where = f"station {node_id} was in flight and was cancelled" if node_id else "no station was in flight"
        if node_id and self._blocked_at:
            where = (
                f"station {node_id} was in flight and could not be cancelled: it blocked its thread ({self._blocked_at}), "
                "and with it the lab's event loop. Declare it @g.node(blocking=True) (blocking=[...] when adopting) "
                "to run it on a thread of its own. Its late result is discarded"
            )
        return RunTimeout(
            f"run {self.id} ran out of its timeout of {seconds:g} s in one call; {where}. The run stopped at "
            f"checkpoint {self._head}: run.run() resumes it from there (timeout=... for a longer one, None for none)",
            run_id=self.id,
            timeout=seconds,
        )

    # -- the watchdog ----------------------------------------------------------------------

    def _watch_drive(self: Run, loop: asyncio.AbstractEventLoop, seconds: float | None) -> Watch | None:  # type: ignore[misc]
        """Have the watchdog watch this call's drive (per call: nothing per station)."""
        self._watch_seconds = seconds
        self._watch = watchdog.watch(self, loop, seconds)
        return self._watch

    def _leave_drive(self: Run, w: Watch | None) -> bool:  # type: ignore[misc]
        """The drive ends: True when it cleans up itself, False when the watchdog settled it already."""
        kept = watchdog.leave(w)
        if kept and self._watch is w:
            self._watch = None
        return kept

    def _ask_watchdog(self: Run) -> None:  # type: ignore[misc]
        """`cancel()` asked: if the loop is blocked, the watchdog settles the run `cancelled`."""
        watchdog.ask(self._watch)

    def rescue(self: Run, w: Watch, *, timed_out: bool, where: str, why: str) -> None:  # type: ignore[misc]
        """Settle this run's drive, stuck on the blocked loop of `w` (on the watchdog's thread)."""
        self._fence = self._fence | {w.thread}
        node_id = self.next_stations[0] if self.next_stations else "-"
        if timed_out and not self._cancel_requested and self._watch_seconds is not None:
            self._timed_out = self._watch_seconds
        self._blocked_at = where
        try:
            reason = f"station {node_id} blocked the lab's event loop ({where}) when {why}; the station was abandoned"
            self.aborted(attempt=self._inflight_attempt(), node_id=node_id, reason=reason)
            if self.durability == "batch" and self._unflushed:
                self.lab.store.flush()
                self._unflushed = 0
        finally:
            self._blocked_at = None
            self._task = None
            self._watch = None
            self._rescued_on = w.loop
            if self._busy.locked():
                self._busy.release()

    def _inflight_attempt(self: Run) -> int:  # type: ignore[misc]
        """The attempt of the station in flight: its `entered` event's sequence number."""
        for row in reversed(self._journal.stash):
            if row.get("kind") == "entered":
                return int(row["attempt"])
        _, tail = self.event_tail(50)
        return next((e.attempt for e in reversed(tail) if e.kind == "entered" and e.attempt is not None), 0)

    def _check_fence(self: Run) -> None:  # type: ignore[misc]
        """Refuse a write from the thread of a loop abandoned under this run (its late result)."""
        if threading.current_thread() in self._fence:
            raise AbandonedDrive(f"run {self.id}: a station abandoned on a blocked loop returned; its result is discarded")

    def _after_rescue(self: Run, exc: LoopBlockedError, raise_on_failure: bool | None) -> None:  # type: ignore[misc]
        """A call whose loop was abandoned: fine if the watchdog settled this run's drive (raise its failure if
        asked); otherwise the call never ran, and `exc` says so."""
        if exc.loop is None or self._rescued_on is not exc.loop:
            raise exc
        self._raise_failure(raise_on_failure)

    # -- the async forms on another loop ---------------------------------------------------

    def _hand_off(self: Run) -> bool:  # type: ignore[misc]
        """Whether an async call must drive on the lab's loop: it is made on another loop (the notebook's),
        unless a stream reads this run there (its reader's queue and backpressure live on that loop) or a
        station calls it (a subgraph's child runs where its parent's station runs, as it always did)."""
        return self._between is None and running_run.get() is None and not on_lab_loop()

    async def _handed(self: Run, coro: Coroutine[Any, Any, Any], raise_on_failure: bool | None) -> Any:  # type: ignore[misc]
        """Await `coro` (this run's async call) on the lab's loop; None if the watchdog settled it there."""
        try:
            return await delegate(coro)
        except LoopBlockedError as exc:
            self._after_rescue(exc, raise_on_failure)
            return None
