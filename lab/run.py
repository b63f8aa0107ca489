"""A run: one execution of one pinned graph revision, stepped station by station.

The run is the engine's hooks: it turns "entered / settled / failed" into events and
checkpoints and hands them to the store in one journal transaction per boundary. It keeps the
live state and the pending node in memory so stepping never reads the store.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic_graph import EndMarker

from .attempts import try_number
from .display_hooks import show
from .engine.loop import LoopBlockedError, run_sync
from .engine.model import drive_model
from .engine.serial import Stop, drive
from .engine.superstep import drive_steps
from .engine.tasks import JoinAcc, node_id_of
from .errors import (
    ArgumentError,
    LabError,
    NodeExecutionError,
    RevisionMismatchError,
    RunOwnedError,
    RunStateError,
    RunTimeout,
    StepLimitError,
    StoreError,
)
from .events import RunStream, running_run
from .history import TimeTravel
from .limits import UNSET, Limits, check_step_limit, check_timeout
from .records import CheckpointRecord, Durability, EventRecord, RunRecord, Status, WaitRecord
from .rescue import Rescues
from .retry import Retries
from .run_values import Outcome, StepResult, new_run_id
from .steps import SuperSteps
from .usage import raised_from_caller
from .waits import Budgets, Waits

if TYPE_CHECKING:
    from .graph import BuiltGraph, LabGraph
    from .lab import Lab
    from .store.holders import Process

__all__ = ("Outcome", "Run", "StepResult", "new_run_id")

log = logging.getLogger(__name__)

_LIMIT_ERRORS = (f"{StepLimitError.__module__}.{StepLimitError.__qualname__}", f"{RunTimeout.__module__}.{RunTimeout.__qualname__}")
"""Failures of a run's bounds, not of a station: `run.run()` continues such a run directly."""



class Run(Waits, TimeTravel, SuperSteps, Retries, Rescues):
    """Step, run, retry or cancel one run; answer its waits; read its history and events."""

    def __init__(
        self,
        lab: Lab,
        graph: LabGraph,
        built: BuiltGraph,
        record: RunRecord,
        *,
        state: Any,
        deps: Any,
        pending: list[Any],
        state_json: Any,
        next_cp: int,
        next_ev: int,
        batch_size: int,
        wait: WaitRecord | None = None,
        counters: dict[str, Any] | None = None,
    ):
        self.lab = lab
        self.graph = graph
        self._built = built
        self.id: str = record.run_id
        self._status: Status = record.status
        self._head: int | None = record.head_seq
        self._output_json = record.output
        self._output: Any = built.codec.decode_output(record.output, run_id=self.id) if record.status == "done" else None
        self._error = record.error
        self.durability: Durability = record.durability
        self.batch_size = max(1, int(batch_size))
        self._state = state
        self._deps = deps
        self._pending = pending
        self._state_json = state_json
        self._next_cp = next_cp
        self._next_ev = next_ev
        self._unflushed = 0
        self._busy = threading.Lock()
        self._pause_requested = False
        self._cancel_requested = False
        self._task: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = None
        self._inflight_started: float = 0.0
        self._observers: list[Callable[[EventRecord], None]] = []
        self._sinks: list[Callable[[list[EventRecord]], None]] = []
        self._between: Callable[[], Awaitable[None]] | None = None
        """A stream's wait at every boundary until its reader has taken what was written (backpressure)."""
        """Streams: each gets every written batch of events (one journal transaction) at once."""
        self._stash: list[dict[str, Any]] = []
        """Journal rows of a batch-durability `entered`, written with the station's settlement."""
        self._last: StepResult | None = None
        self._wait: WaitRecord | None = wait
        self._resume: Any = None
        """The StationContext that answers the head's wait, armed for the next station only."""
        self._head_waits: list[WaitRecord] = []
        """A parallel run's waits at the head when several branches parked in one step."""
        self._resume_tasks: dict[int | None, Any] = {}
        """A parallel run's answered waits by task id, armed for the next step only."""
        self._task_contexts: dict[int, Any] = {}
        """The contexts of a parallel step's tasks in flight (their `warn()` notes become events)."""
        bps = record.breakpoints or {}
        self._breakpoints: dict[str, set[str]] = {w: set(bps.get(w, ())) for w in ("before", "after")}
        self._counters: dict[str, Any] = dict(counters or {})
        self.limits: Limits = Limits.from_counters(self._counters)
        """The run's step limit and timeout per call (recorded with it, so a resume keeps them)."""
        self._timed_out: float | None = None
        """The seconds of the call's timeout once it ran out (the cancellation is the lab's own)."""
        self._tries: dict[str, int] = {}
        """Failed tries of the pending station in this step (its retry policy's count)."""
        self._failure: BaseException | None = None
        """The exception of the failure the current call recorded (what `raise_on_failure` raises)."""
        self._station: Any = None
        """The StationContext of the station in flight (its `warn()` notes become events)."""
        self._writer: Process | None = None
        """The live process that advances this run, when it is not this one: the handle reads, forks and
        answers a wait, and refuses the rest (docs/store.md "Who holds what, when")."""

    # -- creation ------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        lab: Lab,
        graph: LabGraph,
        built: BuiltGraph,
        entry: Any,
        *,
        state: Any,
        deps: Any,
        durability: Durability,
        batch_size: int,
        breakpoints: dict[str, Sequence[str]] | None = None,
        budgets: Budgets | None = None,
        limits: Limits | None = None,
        parent: tuple[str, int | None] | None = None,
        tags: dict[str, Any] | None = None,
    ) -> Run:
        if durability not in ("step", "batch"):
            raise ValueError(f"durability must be 'step' or 'batch', got {durability!r}")
        bps = _check_breakpoints(breakpoints, built)
        codec = built.codec
        station = codec.encode_node(entry)
        state_json = codec.encode_state(state)
        record = RunRecord(
            run_id=new_run_id(),
            graph_key=built.key,
            revision=built.revision,
            digest=built.manifest.digest,
            status="created",
            head_seq=0,
            durability=durability,
            breakpoints=bps,
            parent_run_id=parent[0] if parent else None,
            parent_seq=parent[1] if parent else None,
        )
        budget_json = (budgets or Budgets()).to_json()
        limits_json = (limits or Limits()).to_json()
        counters = {**({"budgets": budget_json} if budget_json else {}), **({"limits": limits_json} if limits_json else {})} or None
        cp = CheckpointRecord(
            run_id=record.run_id, seq=0, parent_seq=None, status="created", state=state_json, next=(station,), counters=counters
        )
        ev = EventRecord(
            run_id=record.run_id,
            seq=0,
            kind="started",
            node_id=station.node_id,
            checkpoint_seq=0,
            payload={
                "entry": station.node_id, "revision": built.revision, "durability": durability,
                **({"breakpoints": bps} if bps else {}), **({"budgets": budget_json} if budget_json else {}),
                **({"limits": limits_json} if limits_json else {}), **({"tags": tags} if tags else {}),
            },  # fmt: skip
        )
        store = lab.store
        store.write([store.run_row(record), store.checkpoint_row(cp), store.event_row(ev)])
        run = cls(
            lab,
            graph,
            built,
            record,
            state=state,
            deps=deps,
            pending=[entry],
            state_json=state_json,
            next_cp=1,
            next_ev=1,
            batch_size=batch_size,
            counters=counters,
        )
        lab._live[run.id] = run
        return run

    # -- what a person reads -------------------------------------------------------------

    @property
    def status(self) -> Status:
        return self._status

    @property
    def output(self) -> Any:
        """The End data once the run is done, else None."""
        return self._output

    @property
    def error(self) -> dict[str, Any] | None:
        """The last failure: exception type, message, traceback and station."""
        return self._error

    @property
    def head(self) -> int | None:
        """The sequence number of the checkpoint the next step starts from."""
        return self._head

    @property
    def state(self) -> Any:
        """The live state object (as of the head, or mid-station while one runs)."""
        return self._state

    @property
    def deps(self) -> Any:
        return self._deps

    @property
    def next_stations(self) -> tuple[str, ...]:
        """The stations of the pending tasks (a parallel run lists one per task; open joins are not tasks)."""
        return tuple(node_id_of(n) for n in self._pending if not isinstance(n, JoinAcc))

    @property
    def frontier(self) -> tuple[Any, ...]:
        """What the next step starts from: pending nodes/tasks and, in a parallel run, open joins."""
        return tuple(self._pending)

    @property
    def revision(self) -> int:
        return self._built.revision

    # read-only views of the run for lab.views, lab.widgets and kernel_ext (issue 26: no private reaches)

    @property
    def busy(self) -> bool:
        """An action (a step, `run()`, a retry, continuing after an answer) is moving the run now, here."""
        return self._busy.locked()

    @property
    def state_json(self) -> Any:
        """The state at the head checkpoint as the store keeps it (JSON values)."""
        return self._state_json

    @property
    def output_json(self) -> Any:
        """The End data as the store keeps it (JSON values) once the run is done, else None."""
        return self._output_json

    def follow(self) -> bool:
        """Take in what another process wrote to this run (its progress, or an answer given there);
        True when something changed. The run view calls it on a timer."""
        return self._follow()

    def events(self, kind: str | None = None) -> list[EventRecord]:
        """Everything observed during the run, in order; `kind` filters (say `"failed"`)."""
        return self.lab.store.events(self.id, kind=kind)

    def event_tail(self, n: int = 200) -> tuple[int, list[EventRecord]]:
        """The number of events and the last `n` of them: what a view of a long run needs."""
        return self.lab.store.event_tail(self.id, n)

    def settled_stations(self) -> dict[int, str]:
        """Checkpoint seq -> the station that settled into it (visit counts, timeline labels)."""
        return self.lab.store.settled_stations(self.id)

    def stream(
        self, max_steps: int | None = None, *, step_limit: int | None = UNSET, timeout: float | None = UNSET
    ) -> RunStream:
        """Drive the run as `run()` does, yielding typed events as they happen (seed 003 `stream`).

        `async for ev in run.stream(): ...` on your loop, or `for ev in run.stream(): ...` in a cell.
        Nothing runs until it is iterated; it ends with `Completed`, `Failed` or `Interrupted`
        (failures are that final event, never raised); leaving the loop early pauses the run at
        the next boundary. See lab.events.
        """
        if step_limit is not UNSET:
            check_step_limit(step_limit, "run.stream")
        if timeout is not UNSET:
            check_timeout(timeout, "run.stream")
        return RunStream(
            self, lambda: self.arun(max_steps, step_limit=step_limit, timeout=timeout, raise_on_failure=False)
        )

    def watch(
        self, sink: Callable[[Any], None], *, between: Callable[[], Awaitable[None]] | None = None
    ) -> Callable[[], None]:
        """Hand `sink` every batch of events this run writes (one journal transaction at a time).

        For streams and subgraphs (lab.events, lab.subgraph); `between` is awaited at every
        boundary of the next drives (a stream's backpressure). Returns the function that stops it.
        """
        self._sinks.append(sink)
        if between is not None:
            self._between = between

        def stop() -> None:
            if sink in self._sinks:
                self._sinks.remove(sink)
            if between is not None and self._between is between:
                self._between = None

        return stop

    def relay(self, batch: Any) -> None:
        """Hand `batch` (a subgraph child's events) to whatever watches this run."""
        for sink in list(self._sinks):
            sink(batch)

    def record_event(self, kind: str, *, node_id: str | None = None, payload: dict[str, Any] | None = None) -> None:
        """Write one event of this run at its head, through to the journal (a subgraph's link)."""
        self._write([self._event_row(kind, node_id=node_id, checkpoint_seq=self._head, payload=payload)], sync=True)

    def record_progress(self, node_id: str, value: Any, details: dict[str, Any]) -> None:
        """A `progress` event from the node in flight (`report_progress`), written and streamed at once."""
        if self._fence:  # a station abandoned on a blocked loop: it reports into a drive that is over
            self._check_fence()
        task = self._task
        if task is None:
            return  # the drive is over (a blocking node still running after a timeout): nobody listens
        loop = task[0]
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not loop:  # a blocking node's own thread: write from the run's loop
            loop.call_soon_threadsafe(self.record_progress, node_id, value, details)
            return
        payload = {"value": _jsonable(value, "report_progress(value)"), "details": _jsonable(details, "report_progress(**details)")}
        self._write([self._event_row("progress", node_id=node_id, checkpoint_seq=self._head, payload=payload)], sync=False)


    @property
    def writer(self) -> str | None:
        """Who advances this run when another process does ("process 123 on host h (started ...)"), else None."""
        return self._writer.describe() if self._writer is not None else None

    def _follow(self) -> bool:
        """Take in what another process wrote: its progress on a run it advances, or an answer given there.

        Returns True when something changed. The run view calls it on a timer; stepping does it itself.
        """
        if self._writer is not None:
            return self._reload()
        if self._status == "waiting" and not self._busy.locked():
            return self._take_in_answers()
        return False

    def _reload(self) -> bool:
        """Read this run (advanced by another process) from the store again."""
        store = self.lab.store
        codec = self._built.codec
        with store.held():
            rec = store.get_run(self.id)
            seen = (self._status, self._head, len(self._head_waits), self._wait.resolution if self._wait else None)
            head = store.checkpoint(self.id, rec.head_seq) if rec.head_seq is not None else None
            waits = [w for w in store.waits(self.id) if w.checkpoint_seq == rec.head_seq]
        self._status, self._head, self._error, self._output_json = rec.status, rec.head_seq, rec.error, rec.output
        self._output = codec.decode_output(rec.output, run_id=self.id) if rec.status == "done" else None
        bps = rec.breakpoints or {}
        self._breakpoints = {w: set(bps.get(w, ())) for w in ("before", "after")}
        if head is not None and head.state != self._state_json:
            self._state_json = head.state
            self._state = codec.decode_state(head.state, run_id=self.id, seq=head.seq)
        if head is not None:
            self._pending = [codec.decode_node(p, run_id=self.id, seq=head.seq) for p in head.next]
            self._counters = dict(head.counters or {})
        self._head_waits = waits if len(waits) > 1 else []
        self._wait = next((w for w in waits if w.resolution is None), waits[-1] if waits else None)
        return seen != (self._status, self._head, len(self._head_waits), self._wait.resolution if self._wait else None)

    def _check_writer(self, action: str) -> None:
        """Refuse to change a run another live process advances, naming it and what to do."""
        writer = self._writer
        if writer is None:
            return
        if writer.is_alive():
            raise RunOwnedError(
                f"cannot {action} run {self.id}: it is advanced by {writer.describe()}, one writer at a time. "
                f"{action.capitalize()} it in that process, or end it (or call lab.close() there) and take the run over "
                f"here with lab.resume({self.id!r}). From here you can read it (run.history(), run.state_at(seq), "
                "lab.sql(...)), fork it, and answer its wait once"
            )
        raise RunOwnedError(
            f"cannot {action} run {self.id} with this handle: it was advanced by {writer.describe()}, which has "
            f"ended; take the run over here with run = lab.resume({self.id!r})"
        )

    def on_event(self, callback: Callable[[EventRecord], None]) -> None:
        """Call `callback(event)` after each event is written. Its errors are logged, never raised."""
        self._observers.append(callback)

    # -- stepping ------------------------------------------------------------------------

    @property
    def step_limit(self) -> int | None:
        """Steps one `run()` call may take before the run fails with `StepLimitError` (None: no limit)."""
        return self.limits.step_limit

    @property
    def timeout(self) -> float | None:
        """Seconds one call may drive the run before it fails with `RunTimeout` (None: no limit)."""
        return self.limits.timeout

    @raised_from_caller
    def step(self, *, timeout: float | None = UNSET, raise_on_failure: bool | None = None) -> StepResult:
        """Run exactly one station and return what happened.

        `raise_on_failure=True` (or `Lab(raise_on_failure=True)`) raises `NodeExecutionError`
        when the station fails, after the failure is recorded.
        """
        try:
            return run_sync(self.astep(timeout=timeout, raise_on_failure=raise_on_failure))
        except LoopBlockedError as exc:  # a station blocked the lab's loop: the watchdog settled the run
            self._after_rescue(exc, raise_on_failure)
            return self._last  # type: ignore[return-value]

    @raised_from_caller
    def run(
        self,
        max_steps: int | None = None,
        *,
        step_limit: int | None = UNSET,
        timeout: float | None = UNSET,
        raise_on_failure: bool | None = None,
    ) -> Run:
        """Run until End, a failure, a wait, `max_steps` stations, or `pause()`. Returns the run.

        `step_limit` bounds this call (default: the run's own, 100 unless set): reaching it fails
        the run with `StepLimitError`, and `run.run(step_limit=...)` goes on. `timeout` (seconds,
        default the run's own) cancels the step in flight when it runs out and fails the run with
        `RunTimeout` at its last checkpoint; `run.run()` resumes it. Failures are recorded and
        shown; `raise_on_failure=True` (or `Lab(raise_on_failure=True)`) also raises them:
        `NodeExecutionError` for a station, `StepLimitError` / `RunTimeout` for a bound.
        """
        try:
            run_sync(self.arun(max_steps=max_steps, step_limit=step_limit, timeout=timeout, raise_on_failure=raise_on_failure))
        except LoopBlockedError as exc:  # a station blocked the lab's loop: the watchdog settled the run
            self._after_rescue(exc, raise_on_failure)
        return self

    async def astep(self, *, timeout: float | None = UNSET, raise_on_failure: bool | None = None) -> StepResult:
        """The async form of `step()`."""
        if timeout is not UNSET:
            check_timeout(timeout, "run.step")
        if self._hand_off():  # called on another loop (the notebook's): driven on the lab's, watched there
            return await self._handed(self.astep(timeout=timeout, raise_on_failure=raise_on_failure), raise_on_failure) or self._last
        await self._advance(max_steps=1, step_limit=UNSET, timeout=timeout)
        self._raise_failure(raise_on_failure)
        assert self._last is not None
        return self._last

    async def arun(
        self,
        max_steps: int | None = None,
        *,
        step_limit: int | None = UNSET,
        timeout: float | None = UNSET,
        raise_on_failure: bool | None = None,
    ) -> Run:
        """The async form of `run()`."""
        if max_steps is not None and (not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 0):
            raise ArgumentError(
                f"run.run(max_steps={max_steps!r}): max_steps is how many stations to run at most, an int >= 0, "
                "or None to run until End, a failure or a wait"
            )
        if step_limit is not UNSET:
            check_step_limit(step_limit, "run.run")
        if timeout is not UNSET:
            check_timeout(timeout, "run.run")
        if self._hand_off():  # called on another loop (the notebook's): driven on the lab's, watched there
            await self._handed(self.arun(max_steps, step_limit=step_limit, timeout=timeout, raise_on_failure=raise_on_failure), raise_on_failure)
            return self
        await self._advance(max_steps=max_steps, step_limit=step_limit, timeout=timeout)
        self._raise_failure(raise_on_failure)
        return self

    @raised_from_caller
    def retry(self, *, raise_on_failure: bool | None = None) -> StepResult:
        """Attempt the failed or interrupted station again from the same head, as a new attempt."""
        return run_sync(self.aretry(raise_on_failure=raise_on_failure))

    async def aretry(self, *, raise_on_failure: bool | None = None) -> StepResult:
        self._check_writer("retry")
        if self._status not in ("failed", "interrupted"):
            raise RunStateError(
                f"run {self.id} is {self._status}, not failed or interrupted; retry() follows a failure or an interrupt"
            )
        with self._exclusive("retry"):
            self._write(
                [
                    self._event_row(
                        "retry",
                        node_id=self.next_stations[0],
                        checkpoint_seq=self._head,
                        payload={"by": "person", "after": self._error or {"status": self._status}},
                    ),
                    self.lab.store.update_row(self.id, status="running", head_seq=self._head),
                ],
                sync=True,
            )
            self._status = "running"
            self._error = None
        return await self.astep(raise_on_failure=raise_on_failure)

    def _continue_interrupted(self) -> None:
        """`lab.resume` of a run interrupted in this process: its station may run again."""
        with self._exclusive("resume"):
            if self._status != "interrupted":
                return
            self._write(
                [
                    self._event_row("resumed", checkpoint_seq=self._head, payload={"status_before": "interrupted"}),
                    self.lab.store.update_row(self.id, status="running", head_seq=self._head),
                ],
                sync=True,
            )
            self._status = "running"

    def pause(self) -> None:
        """Stop a `run()` at the next boundary (the station in flight finishes)."""
        self._pause_requested = True

    def cancel(self) -> None:
        """Cancel the run: between stations at once, or the station in flight (from any thread)."""
        self._check_writer("cancel")
        if self._status in ("done", "cancelled"):
            raise RunStateError(f"run {self.id} is already {self._status}; there is nothing to cancel")
        self._cancel_requested = True
        task = self._task
        if task is not None:
            loop, t = task
            loop.call_soon_threadsafe(t.cancel)
            self._ask_watchdog()  # if a station blocks the loop, the watchdog settles the run cancelled
            return
        if self._busy.acquire(blocking=False):
            try:
                self._finish_cancel(node_id=None, attempt=None)
            finally:
                self._busy.release()

    @contextmanager
    def _exclusive(self, action: str, *, answering: bool = False) -> Iterator[None]:
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

    # -- the engine's driver -------------------------------------------------------------

    def _check_runnable(self) -> None:
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
            raise RevisionMismatchError(self.lab._mismatch_message(self.id, self._built.manifest, current.manifest))
        if bounded:  # stopped by its step limit or timeout, not by a station: it goes on from its head
            self._continue_after_limit()

    def _continue_after_limit(self) -> None:
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

    async def _advance(self, max_steps: int | None, step_limit: int | None = UNSET, timeout: float | None = UNSET) -> None:
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

    async def _drive(self, max_steps: int | None, limit: int | None) -> tuple[Stop, int | None]:
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

    def _step_limit_error(self, limit: int) -> StepLimitError:
        nxt = ", ".join(self.next_stations) or "-"
        return StepLimitError(
            f"run {self.id} took {limit} steps in one call without reaching End (step_limit={limit}); its graph may "
            f"loop forever. The head stays checkpoint {self._head} (next: {nxt}): look at run.history(), then go on "
            "with run.run(step_limit=N) for a higher limit (None for none), or set it for the run "
            "(g.start(..., step_limit=N)) or the graph (lab.graph(..., step_limit=N))",
            run_id=self.id,
            limit=limit,
        )

    def _fail_run(self, error: LabError, *, node_id: str | None = None, attempt: int | None = None) -> None:
        """The run stops at its head for a reason of its own (a bound), not a station's failure."""
        nid = node_id or (self.next_stations[0] if self.next_stations else None)
        err = {
            "node_id": nid,
            "attempt": None
            if attempt is None
            else try_number(lambda: self.lab.store.events(self.id), nid, self._head, seen=self._tries.get(nid or "", 0)),
            "entered_seq": attempt,
            "type": f"{type(error).__module__}.{type(error).__qualname__}",
            "message": str(error),
            "traceback": "",
        }
        self._status = "failed"
        self._error = err
        self._failure = error
        self._write(
            [
                self._event_row("failed", node_id=err["node_id"], attempt=attempt, checkpoint_seq=self._head, payload=err),
                self.lab.store.update_row(self.id, status="failed", head_seq=self._head, error=err),
            ],
            sync=True,
        )
        self._unflushed = 0
        self._last = StepResult(err["node_id"], "failed", None, self.next_stations, error=f"{type(error).__name__}: {error}")

    def _raise_failure(self, raise_on_failure: bool | None) -> None:
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

    def _after_stop(self, stop: Stop) -> None:
        if self._cancel_requested and self._status not in ("done", "failed", "cancelled"):
            self._finish_cancel(node_id=None, attempt=None)
        elif stop.reason == "paused" and self._last is None:
            self._last = StepResult(None, "paused", self._head, self.next_stations)
        if self.durability == "batch" and self._unflushed:
            self.lab.store.flush()
            self._unflushed = 0

    # -- EngineHooks ---------------------------------------------------------------------

    def entered(self, *, node_id: str) -> int:
        attempt = self._next_ev
        rows = [self._event_row("entered", node_id=node_id, attempt=attempt, checkpoint_seq=self._head)]
        if self._status != "running":
            self._status = "running"
            rows.append(self.lab.store.update_row(self.id, status="running", head_seq=self._head))
        # Every mode records the attempt before the call (seed 001: "It never guesses a replay"): a
        # kill mid-station leaves an `entered` without a settlement, and recovery marks the run
        # interrupted. In batch mode this one `os.write` also carries the settlements buffered
        # since, so a kill loses no settled boundary either; batch saves the settlement's own write.
        self._write(rows, sync=True)
        self._unflushed = 0
        self._inflight_started = time.perf_counter()
        return attempt

    def settled(self, *, attempt: int, node_id: str, successors: Sequence[Any], end: EndMarker[Any] | None) -> None:
        codec = self._built.codec
        stations = [codec.encode_node(n) for n in successors]
        output_json = codec.encode_output(end.value) if end is not None else None
        state_json = codec.encode_state(self._state)
        seq = self._next_cp
        status: Status = "done" if end is not None else "running"
        cp_row = {
            "t": "cp",
            "run_id": self.id,
            "seq": seq,
            "parent_seq": self._head,
            "status": status,
            "state": state_json,
            "next": [st.to_json() for st in stations],
            "output": output_json,
            "created_at": time.time(),
            "counters": self._settled_counters() if self._counters else None,
        }
        ms = round((time.perf_counter() - self._inflight_started) * 1000, 3)
        rows = [
            *self._warning_rows(node_id, attempt),
            cp_row,
            self._event_row("settled", node_id=node_id, attempt=attempt, checkpoint_seq=seq, payload={"ms": ms, "next": [s.node_id for s in stations]}),
        ]
        if end is not None:
            rows.append(self._event_row("done", node_id=node_id, checkpoint_seq=seq, payload={"output": output_json}))
        self._unflushed += 1
        sync = self.durability == "step" or end is not None or self._unflushed >= self.batch_size
        self._write(rows, sync=sync)
        if sync:
            self._unflushed = 0
        self._state_json = state_json
        self._next_cp = seq + 1
        self._head = seq
        self._pending = list(successors)
        self._resume = None
        if self._tries:
            self._tries.clear()
        self._status = status
        if end is not None:
            self._output = end.value
            self._output_json = output_json
        self._last = StepResult(node_id, "done" if end is not None else "settled", seq, tuple(s.node_id for s in stations), self._output)

    def _warning_rows(self, node_id: str, attempt: int) -> list[dict[str, Any]]:
        """The station's `warn()` notes as `warning` events (they ride with its settlement)."""
        station, self._station = self._station, None
        if station is None or not station.notes:
            return []
        return [
            self._event_row("warning", node_id=node_id, attempt=attempt, checkpoint_seq=self._head, payload=note)
            for note in station.notes
        ]

    def failed(self, *, attempt: int, node_id: str, error: BaseException) -> None:
        err = {
            "node_id": node_id,
            "attempt": try_number(  # the try, from 1
                lambda: self.lab.store.events(self.id), node_id, self._head, seen=self._tries.get(node_id, 0)
            ),
            "entered_seq": attempt,  # the event seq of its `entered` (the events' `attempt` column)
            "type": f"{type(error).__module__}.{type(error).__qualname__}",
            "message": str(error),
            "traceback": "".join(traceback.format_exception(error)),
        }
        self._restore_head_state()
        self._status = "failed"
        self._error = err
        self._failure = error
        self._write(
            [
                self._event_row("failed", node_id=node_id, attempt=attempt, checkpoint_seq=self._head, payload=err),
                self.lab.store.update_row(self.id, status="failed", head_seq=self._head, error=err),
            ],
            sync=True,
        )
        self._unflushed = 0
        self._last = StepResult(node_id, "failed", None, self.next_stations, error=f"{type(error).__name__}: {error}")

    def aborted(self, *, attempt: int, node_id: str, reason: str = "cancelled in flight") -> None:
        self._restore_head_state()
        if self._cancel_requested:
            self._finish_cancel(node_id=node_id, attempt=attempt)
            return
        if self._timed_out is not None:
            self._fail_run(self._timeout_error(self._timed_out, node_id), node_id=node_id, attempt=attempt)
            return
        self._status = "interrupted"
        self._write(
            [
                self._event_row("interrupted", node_id=node_id, attempt=attempt, checkpoint_seq=self._head, payload={"reason": reason}),
                self.lab.store.update_row(self.id, status="interrupted", head_seq=self._head),
            ],
            sync=True,
        )
        self._last = StepResult(node_id, "interrupted", None, self.next_stations)

    # -- helpers -------------------------------------------------------------------------

    def _finish_cancel(self, *, node_id: str | None, attempt: int | None) -> None:
        wait = self.wait
        if wait is not None and wait.kind == "delegate" and wait.resolution is None:
            self.lab.agents.contain(wait)  # cancelling the run stops its agent job first (docs/agents.md)
        self._status = "cancelled"
        self._write(
            [
                self._event_row("cancelled", node_id=node_id, attempt=attempt, checkpoint_seq=self._head),
                self.lab.store.update_row(self.id, status="cancelled", head_seq=self._head),
            ],
            sync=True,
        )
        self._unflushed = 0
        self._last = StepResult(node_id, "cancelled", None, self.next_stations)

    def _restore_head_state(self) -> None:
        """A failed or aborted station may have mutated state; the head checkpoint is the truth."""
        self._state = self._built.codec.decode_state(self._state_json, run_id=self.id, seq=self._head)

    def _event_row(
        self,
        kind: str,
        *,
        node_id: str | None = None,
        attempt: int | None = None,
        checkpoint_seq: int | None = None,
        payload: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The journal row of the run's next event (built directly: this is the hot path)."""
        seq = self._next_ev
        self._next_ev = seq + 1
        row = {
            "t": "ev",
            "run_id": self.id,
            "seq": seq,
            "kind": kind,
            "node_id": node_id,
            "attempt": attempt,
            "checkpoint_seq": checkpoint_seq,
            "payload": payload or {},
            "created_at": time.time(),
        }
        if self._observers or self._sinks:
            self._pending_events.append(
                EventRecord(
                    run_id=self.id,
                    seq=seq,
                    kind=kind,  # type: ignore[arg-type]
                    node_id=node_id,
                    attempt=attempt,
                    checkpoint_seq=checkpoint_seq,
                    payload=row["payload"],
                    created_at=datetime.fromtimestamp(row["created_at"], UTC).replace(tzinfo=None),
                )
            )
        return row

    @property
    def _pending_events(self) -> list[EventRecord]:
        pe = self.__dict__.get("_pe")
        if pe is None:
            pe = self.__dict__["_pe"] = []
        return pe

    def _write(self, rows: list[dict[str, Any]], *, sync: bool) -> None:
        if self._fence:  # a loop was abandoned under this run: nothing from its thread is written
            self._check_fence()
        if self._stash:
            rows, self._stash = [*self._stash, *rows], []
        try:
            self.lab.store.write(rows, sync=sync)
        except StoreError:
            # nothing of this transaction was kept: its events never happened, the head stands
            seqs = [r["seq"] for r in rows if r.get("t") == "ev" and r.get("run_id") == self.id]
            if seqs:
                self._next_ev = min(seqs)
                self.__dict__["_pe"] = [e for e in self._pending_events if e.seq < self._next_ev]
            raise
        self._notify()

    def _notify(self) -> None:
        if self._observers or self._sinks:
            events, self.__dict__["_pe"] = self._pending_events, []
            for ev in events:
                for cb in list(self._observers):
                    try:
                        cb(ev)
                    except Exception:
                        log.exception("event observer failed on %s event of run %s", ev.kind, self.id)
            for sink in list(self._sinks) if events else ():
                try:
                    sink(events)
                except Exception:
                    log.exception("event stream of run %s failed", self.id)

    def __repr__(self) -> str:
        nxt = ", ".join(self.next_stations) or "-"
        return f"<Run {self.id} {self._built.key}@{self._built.revision} {self._status} head={self._head} next={nxt}>"

    def _ipython_display_(self) -> None:
        """`display(run)` shows the run view `lab.views` registers (the run widget), one per run."""
        show("run.display", self)


def _jsonable(value: Any, what: str) -> Any:
    from pydantic_core import PydanticSerializationError, to_jsonable_python

    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise ArgumentError(f"{what} must be JSON-serialisable (numbers, strings, lists, dicts, dataclasses): {exc}") from None


def _check_breakpoints(breakpoints: dict[str, Sequence[str]] | None, built: BuiltGraph) -> dict[str, list[str]] | None:
    """`{"before": [...], "after": [...]}` naming declared stations, or a clear error."""
    if not breakpoints:
        return None
    if not isinstance(breakpoints, dict) or set(breakpoints) - {"before", "after"}:
        raise ValueError(
            f"breakpoints must be a dict with keys 'before' and/or 'after' listing station ids, got {breakpoints!r}"
        )
    out: dict[str, list[str]] = {}
    stations = built.manifest.station_ids
    for when, ids in breakpoints.items():
        if isinstance(ids, str):
            ids = [ids]
        unknown = [i for i in ids if i not in stations]
        if unknown:
            from .errors import GraphDefinitionError

            raise GraphDefinitionError(
                f"breakpoints {when} {unknown}: graph {built.key!r} has no such station(s); its stations are {list(stations)}"
            )
        out[when] = sorted(set(ids))
    return out
