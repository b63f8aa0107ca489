"""The run's driver: one `run()` / `step()` call, from the checks before it to the outcome after it.

Mixed into `Run`. `_advance` takes the run (one drive at a time), checks it may go on, arms its
timeout and the watchdog, and `_drive` runs the engine of the run's graph (serial, super-step or
the super-step model) until it stops for good: End, a failure, a wait no provider grants, the
step limit, `max_steps`, `pause()` or `cancel()`. A retry policy's backoff happens here, between
two tries of the pending station.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .engine.model import drive_model
from .engine.serial import Stop, drive
from .engine.superstep import drive_steps
from .errors import NodeExecutionError, RevisionMismatchError, RunStateError, RunTimeout, StepLimitError
from .events import running_run
from .limits import UNSET
from .run_values import StepResult

if TYPE_CHECKING:
    from .run import Run

__all__ = ("Driving",)

PARK_GRACE = 5.0
"""Seconds an answer waits for a drive that parked at its wait to let go of the run (`_let_the_park_finish`)."""
_LIMIT_ERRORS = (f"{StepLimitError.__module__}.{StepLimitError.__qualname__}", f"{RunTimeout.__module__}.{RunTimeout.__qualname__}")
"""Failures of a run's bounds, not of a station: `run.run()` continues such a run directly."""


class Driving:
    """Mixed into `Run`: the drive behind `step()`, `run()` and their async forms, and the run held while it lasts."""

    @contextmanager
    def _exclusive(self: Run, action: str, *, answering: bool = False) -> Iterator[None]:  # type: ignore[misc]
        """Hold the run while changing its head, so no station runs meanwhile."""
        if not answering:
            self._check_writer(action)
        if not self._busy.acquire(blocking=False):
            raise RunStateError(
                f"run {self.id} is running in another task; pause it (run.pause()) or wait before you {action} it"
            )
        try:
            yield
        finally:
            self._busy.release()

    def _let_the_park_finish(self: Run) -> None:  # type: ignore[misc]
        """Wait, briefly, for a drive that parked at the wait being answered to let go of the run.

        The run shows `waiting` from the park's write on, and a view enables its buttons then; the
        drive still holds the run for its last steps (a provider's look, its bookkeeping), which a
        loaded machine can stretch past a person's click. Without this wait the click failed "running
        in another task". Not done under the store's lock (the drive's last writes need it), nor on
        the drive's own event loop (blocking it would keep the drive from letting go).
        """
        if self._status != "waiting" or not self._busy.locked():
            return
        held = self._task
        if held is not None:
            try:
                if asyncio.get_running_loop() is held[0]:
                    return
            except RuntimeError:  # no loop in this thread: a kernel cell, a widget's click
                pass
        if self._busy.acquire(timeout=PARK_GRACE):  # then the answer takes it as before
            self._busy.release()

    def _check_runnable(self: Run) -> None:  # type: ignore[misc]
        if self._status in ("done", "cancelled"):
            raise RunStateError(f"run {self.id} is {self._status}; start a new run or fork this one")
        bounded = self._status == "failed" and (self._error or {}).get("type") in _LIMIT_ERRORS
        if self._status == "failed" and not bounded:
            station = (self._error or {}).get("node_id", "?")
            message = (self._error or {}).get("message", "")
            raise RunStateError(
                f"run {self.id} failed at station {station} ({message}); call run.retry() to attempt it again"
            )
        if self._status == "interrupted":
            raise RunStateError(
                f"run {self.id} was interrupted while a station was in flight; call run.retry() or "
                f"lab.resume({self.id!r}) to run that station again"
            )
        current = self.graph.build()
        if current.manifest.digest != self._built.manifest.digest:
            raise RevisionMismatchError(self.lab.mismatch_message(self.id, self._built.manifest, current.manifest))
        if bounded:  # stopped by its step limit or timeout, not by a station: it goes on from its head
            self._continue_after_limit()

    def _continue_after_limit(self: Run) -> None:  # type: ignore[misc]
        """A run stopped by its step limit or timeout goes on from its head when driven again."""
        self._write(
            [
                self._event_row("resumed", checkpoint_seq=self._head, payload={"status_before": "failed", "after": self._error}),
                self.lab.store.update_row(self.id, status="running", head_seq=self._head),
            ],
            sync=True,
        )
        self._status = "running"
        self._error = None

    async def _advance(self: Run, max_steps: int | None, step_limit: int | None = UNSET, timeout: float | None = UNSET) -> None:  # type: ignore[misc]
        self._check_writer("step")
        if not self._busy.acquire(blocking=False):
            raise RunStateError(f"run {self.id} is already running in another task; wait for it or cancel it")
        kept = True  # False once the watchdog settled this drive (a station blocked the loop): it released the run
        try:
            self._failure = None
            self._tries = {}  # every call gives the pending station all its tries again (seed 003)
            self._check_runnable()
            self._prepare_continue()  # refuses an unanswered wait, continues a breakpoint, arms an answer
            self._pause_requested = False
            self._cancel_requested = False
            self._last = None
            task = asyncio.current_task()
            assert task is not None
            loop = asyncio.get_running_loop()
            self._task = (loop, task)
            self._timed_out = None
            running = running_run.set(self)  # report_progress() finds the run through it (node tasks copy it)
            seconds = self.limits.timeout if timeout is UNSET else timeout
            timer = loop.call_later(seconds, self._time_out, task, seconds) if seconds is not None else None
            watch = self._watch_drive(loop, seconds)
            try:
                stop, reached = await self._drive(max_steps, self.limits.step_limit if step_limit is UNSET else step_limit)
            except asyncio.CancelledError:
                if self._cancel_requested:
                    if self._status not in ("cancelled", "done"):  # cancelled between stations (a retry's backoff)
                        self._finish_cancel(node_id=None, attempt=None)
                    return  # the hooks recorded the cancellation; the caller asked for it
                if self._timed_out is not None:
                    task.uncancel()  # the lab's own cancellation, handled here: callers above never see it
                    if self._status != "failed":  # timed out between stations (a retry's backoff, a provider)
                        self._fail_run(self._timeout_error(self._timed_out, None))
                    return
                raise
            finally:
                if kept := self._leave_drive(watch):
                    self._task = None
                running_run.reset(running)
                if timer is not None:
                    timer.cancel()
            if reached is not None:
                self._fail_run(self._step_limit_error(reached))
            self._after_stop(stop)
        finally:
            if kept:
                self._busy.release()

    async def _drive(self: Run, max_steps: int | None, limit: int | None) -> tuple[Stop, int | None]:  # type: ignore[misc]
        """Drive the engine until it stops for good; the stop, and the step limit if this call reached it."""
        await self._provide()
        remaining, left = max_steps, limit  # stations asked for / steps the limit still allows (None: no bound)
        built = self._built
        engine = drive_steps if built.manifest.engine == "superstep" else functools.partial(drive, manifest=built.manifest)
        if getattr(self.graph, "model", None) == "superstep":
            engine = functools.partial(drive_model, spec=self.graph.model_spec())
        while True:
            stop = await engine(
                built.native,
                state=self._state,
                deps=self._deps,
                pending=self._pending,
                hooks=self,
                max_steps=left if remaining is None else remaining if left is None else min(remaining, left),
                should_pause=lambda: self._pause_requested or self._cancel_requested,
                timeouts=getattr(self.graph, "node_timeouts", None),
                between=self._between,
            )
            remaining = None if remaining is None else remaining - stop.settled
            left = None if left is None else left - stop.settled
            if stop.reason == "retry":  # a retry policy tries the pending station again
                if self._status == "failed":  # the policy itself failed (a backoff function raised): recorded
                    return Stop("failed", stop.settled), None
                if stop.delay:
                    await self.back_off(stop.delay)
                if self._pause_requested or self._cancel_requested:
                    return Stop("paused", stop.settled), None  # the next call gives the station all its tries
                continue
            # A provider grants a capability wait at once (live stasis): go on from it.
            if stop.reason != "waiting" or (remaining is not None and remaining <= 0):
                break
            if self._pause_requested or self._cancel_requested or not await self._provide():
                break
        reached = (
            stop.reason == "paused" and left is not None and left <= 0 and (remaining is None or remaining > 0)
            and not (self._pause_requested or self._cancel_requested)
        )  # fmt: skip
        return stop, (limit if reached else None)

    def _step_limit_error(self: Run, limit: int) -> StepLimitError:  # type: ignore[misc]
        nxt = ", ".join(self.next_stations) or "-"
        return StepLimitError(
            f"run {self.id} took {limit} steps in one call without reaching End (step_limit={limit}); its graph may "
            f"loop forever. The head stays checkpoint {self._head} (next: {nxt}): look at run.history(), then go on "
            "with run.run(step_limit=N) for a higher limit (None for none), or set it for the run "
            "(g.start(..., step_limit=N)) or the graph (lab.graph(..., step_limit=N))",
            run_id=self.id,
            limit=limit,
        )

    def _raise_failure(self: Run, raise_on_failure: bool | None) -> None:  # type: ignore[misc]
        """Raise the failure this call recorded, if the caller (or the lab) asked failures to raise."""
        failure = self._failure
        if failure is None or self._status != "failed":
            return
        if not (self.lab.raise_on_failure if raise_on_failure is None else raise_on_failure):
            return
        self._failure = None
        if isinstance(failure, (StepLimitError, RunTimeout)):
            raise failure
        err = self._error or {}
        if isinstance(failure, NodeExecutionError):  # a reducer's or an edge's (it names them)
            failure.run_id = failure.run_id or self.id
            failure.node_id = failure.node_id or err.get("node_id")
            failure.attempt = failure.attempt if failure.attempt is not None else err.get("attempt")
            if getattr(failure, "entered_seq", None) is None:
                failure.entered_seq = err.get("entered_seq")
            raise failure
        node_id, attempt = err.get("node_id"), err.get("attempt")
        raise NodeExecutionError(
            f"run {self.id}: station {node_id} failed (attempt {attempt}): {type(failure).__name__}: {failure}. "
            f"The head stays checkpoint {self._head}; run.retry() attempts the station again",
            run_id=self.id,
            node_id=node_id,
            attempt=attempt,
            original=failure,
            entered_seq=err.get("entered_seq"),
        ) from failure

    def _after_stop(self: Run, stop: Stop) -> None:  # type: ignore[misc]
        if self._cancel_requested and self._status not in ("done", "failed", "cancelled"):
            self._finish_cancel(node_id=None, attempt=None)
        elif stop.reason == "paused" and self._last is None:
            self._last = StepResult(None, "paused", self._head, self.next_stations)
        if self.durability == "batch" and self._unflushed:
            self.lab.store.flush()
            self._unflushed = 0
