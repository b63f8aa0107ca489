"""A run: one execution of one pinned graph revision, stepped station by station.

The run is the engine's hooks: it turns "entered / settled / failed" into events and
checkpoints and hands them to the store in one journal transaction per boundary. It keeps the
live state and the pending node in memory so stepping never reads the store.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from .attempts import wait_attempt
from .budgets import Budgets
from .display_hooks import show
from .engine.loop import LoopBlockedError, run_sync
from .engine.tasks import JoinAcc, node_id_of
from .errors import (
    ArgumentError,
    RunStateError,
)
from .events import RunStream
from .history import TimeTravel
from .limits import UNSET, Limits, check_step_limit, check_timeout
from .recording import note_new_run
from .records import CheckpointRecord, Durability, EventRecord, RunRecord, Status, WaitRecord
from .rescue import Rescues
from .retry import Retries
from .run_driver import Driving
from .run_hooks import SerialHooks
from .run_ownership import Ownership
from .run_total import TotalSteps
from .run_values import Outcome, StepResult, new_run_id
from .run_writes import Journal
from .steps import SuperSteps
from .usage import raised_from_caller
from .waits import Waits

if TYPE_CHECKING:
    from .graph import BuiltGraph, LabGraph
    from .lab import Lab
    from .store.holders import Process

__all__ = ("Outcome", "Run", "StepResult", "new_run_id")

log = logging.getLogger(__name__)


class Run(TotalSteps, Driving, SerialHooks, Ownership, Waits, TimeTravel, SuperSteps, Retries, Rescues):
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
        self._replay = "auto"
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
        self._journal = Journal(lab, record.run_id, next_ev, record)
        """The run's event numbering and writes (lab.run_writes), and who hears of them."""
        self._unflushed = 0
        self._busy = threading.Lock()
        self._pause_requested = False
        self._cancel_requested = False
        self._task: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = None
        self._inflight_started: float = 0.0
        self._between: Callable[[], Awaitable[None]] | None = None
        """A stream's wait at every boundary until its reader has taken what was written (backpressure)."""
        self._last: StepResult | None = None
        self._wait: WaitRecord | None = wait
        self._resume: Any = None
        """The StationContext that answers the head's wait, armed for the next station only."""
        self._head_waits: list[WaitRecord] = []
        """A parallel run's waits at the head when several branches parked in one step."""
        self._park_attempts: dict[str, int | None] = {}
        """The attempt each wait this handle parked on carries in its `waiting` event, by owner: its verdict
        names it without reading the run's events back (a read folds the journal: milliseconds, issue 27)."""
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
        self.created_here = False
        """True for a run this handle's process created (`Run.create`), not read back from the store:
        nothing else wrote anything of it (its agent jobs, say) before this process did."""

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
        lab.store.live_runs[run.id] = run
        note_new_run(run.id, record.parent_run_id)  # its recordings are known without a read (lab.recording)
        run.created_here = True
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
        """What the stations get as `ctx.deps` (live objects: never stored)."""
        return self._deps

    @deps.setter
    def deps(self, deps: Any) -> None:
        self._deps = deps

    @property
    def built(self) -> BuiltGraph:
        """The graph revision this run is pinned to: its manifest, codec and node classes."""
        return self._built

    @property
    def driving(self) -> bool:
        """Whether a drive (`step()`, `run()` or their async forms) of this run is in flight in this process."""
        return self._task is not None

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

    @property
    def replay(self) -> str:
        """How this run's recorded calls replay (docs/replay.md): `"auto"` (the default: a recorded response
        when the request is the same, a real call when it differs), `"strict"` (a request with no recording
        raises `ReplayMissError`) or `"off"` (every call is real). A change is stored as a `replay` event, so
        `lab.resume` (in this kernel or a new one) and a fork keep the mode the run chose."""
        return self._replay

    @replay.setter
    def replay(self, mode: str) -> None:
        if mode not in ("auto", "strict", "off"):
            raise ArgumentError(f"run.replay is 'auto', 'strict' or 'off', got {mode!r}")
        if mode == self._replay:
            return
        self._replay = mode
        if self._writer is None:  # the process advancing the run numbers its events; here it is this handle's
            self.record_event("replay", payload={"mode": mode})

    def restore_replay(self, mode: Any) -> None:
        """Take the replay mode a stored `replay` event chose (reopening, forking), writing nothing."""
        if mode in ("auto", "strict", "off"):
            self._replay = mode

    @property
    def next_checkpoint(self) -> int:
        """The sequence number the run's next checkpoint gets (a kind keys work done in this step by it)."""
        return self._next_cp

    def events(self, kind: str | None = None) -> list[EventRecord]:
        """Everything observed during the run, in order; `kind` filters (say `"failed"`)."""
        return self.lab.store.events(self.id, kind=kind)

    def calls(self) -> list[Any]:
        """The calls this run's stations made (model requests, `@lab.recorded` functions), oldest first:
        `CallRecord`s marked `mode="live"` or `"replayed"`, with their tokens (docs/replay.md)."""
        return self.lab.store.calls(self.id) if hasattr(self.lab.store, "calls") else []

    def event_tail(self, n: int = 200) -> tuple[int, list[EventRecord]]:
        """The number of events and the last `n` of them: what a view of a long run needs."""
        return self.lab.store.event_tail(self.id, n)

    def settled_stations(self) -> dict[int, str]:
        """Checkpoint seq -> the station that settled into it (visit counts, timeline labels)."""
        return self.lab.store.settled_stations(self.id)

    def export_html(self, path: Any) -> Any:
        """Write this run as one self-contained HTML file: drawing, timeline, state, events, waits,
        subgraph children; no kernel, no network (docs/share.md). Returns the path written."""
        return show("share.export_html", self, path)

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
        self._journal.sinks.append(sink)
        if between is not None:
            self._between = between

        def stop() -> None:
            if sink in self._journal.sinks:
                self._journal.sinks.remove(sink)
            if between is not None and self._between is between:
                self._between = None

        return stop

    def relay(self, batch: Any) -> None:
        """Hand `batch` (a subgraph child's events) to whatever watches this run."""
        for sink in list(self._journal.sinks):
            sink(batch)

    def record_event(
        self,
        kind: str,
        *,
        node_id: str | None = None,
        payload: dict[str, Any] | None = None,
        sync: bool = True,
        rows: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Write one event of this run at its head, through to the journal (a subgraph's link); `sync=False`
        holds it for the run's next write, as `durability="batch"` holds a boundary (a recorded call's event).
        `rows`: store rows that go in the same transaction, before the event (a recorded call's row)."""
        event = self._event_row(kind, node_id=node_id, checkpoint_seq=self._head, payload=payload)
        self._write([*rows, event] if rows else [event], sync=sync)

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


    def on_event(self, callback: Callable[[EventRecord], None]) -> None:
        """Call `callback(event)` after each event is written. Its errors are logged, never raised."""
        self._journal.observers.append(callback)

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
        await self._advance(max_steps=1, step_limit=self.call_step_limit(UNSET), timeout=timeout)
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
        await self._advance(max_steps=max_steps, step_limit=self.call_step_limit(step_limit), timeout=timeout)
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

    @property
    def cancel_requested(self) -> bool:
        """Whether `cancel()` was asked of the drive in flight (a kind awaiting outside work checks it)."""
        return self._cancel_requested

    @property
    def timed_out(self) -> float | None:
        """The seconds of the drive's timeout once it ran out, else None (a kind awaiting outside work checks it)."""
        return self._timed_out

    def record_cancelled(self, *, node_id: str | None = None, attempt: int | None = None) -> None:
        """Record the run cancelled at its head: the end of a drive `cancel()` stopped while a kind awaited
        outside work for station `node_id` (an agent job, say) and contained that work first."""
        self._finish_cancel(node_id=node_id, attempt=attempt)

    # -- the journal -----------------------------------------------------------------------

    def _event_row(
        self,
        kind: str,
        *,
        node_id: str | None = None,
        attempt: int | None = None,
        checkpoint_seq: int | None = None,
        payload: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The journal row of the run's next event (`Journal.event_row`)."""
        return self._journal.event_row(kind, node_id=node_id, attempt=attempt, checkpoint_seq=checkpoint_seq, payload=payload)

    def _wait_attempt(self, owner: str) -> int | None:
        """The attempt of the station try that parked on wait `owner` (`attempts.wait_attempt`): known
        when this handle parked it, else read from the run's `waiting` events (a run reopened here)."""
        if owner in self._park_attempts:
            return self._park_attempts[owner]
        return wait_attempt(lambda: self.lab.store.events(self.id, kind="waiting"), owner)

    def _write(self, rows: list[dict[str, Any]], *, sync: bool) -> None:
        """Write `rows` as one journal transaction, unless they come from a loop abandoned under this run."""
        if self._fence:  # a loop was abandoned under this run: nothing from its thread is written
            self._check_fence()
        self._journal.write(rows, sync=sync)

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
