"""The typed event stream of a run: `async for ev in run.stream()` and `for ev in run.stream()`.

Seed 003: a stream "emits a GraphEvent as each node starts and finishes and after every step,
and ends with GraphEvent.Completed or GraphEvent.Interrupted. What a node passes to
reportProgress while it runs arrives as a GraphEvent.NodeProgress [...] and a try of a node that
failed and is followed by another as a GraphEvent.NodeRetry. Nothing runs until the flow is
collected".

`run.stream()` drives the run as `run.run()` does and yields, as they happen:

| class | when | fields |
| --- | --- | --- |
| `NodeStarted` | a station (a parallel task) is about to run | `node_id`, `attempt`, `task` |
| `NodeFinished` | it returned: a serial station once its boundary is checkpointed (`checkpoint`, `next`), a parallel task as soon as it returns, before its step's checkpoint (`checkpoint` None: the step's `StepCompleted` names it) | `node_id`, `attempt`, `checkpoint`, `next`, `ms`, `task` |
| `StepCompleted` | after every step's checkpoint | `checkpoint`, `nodes` |
| `NodeRetry` | a failed try that its retry policy follows with another | `node_id`, `attempt`, `try_number`, `of`, `error_type`, `message`, `delay` |
| `NodeProgress` | a node called `report_progress(value, **details)` | `node_id`, `value`, `details` |
| `NodeWarning` | a node called `warn(...)` (delivered with its settlement) | `node_id`, `message`, `details` |
| `Waiting` | the run parked (gate, `interrupt()`, breakpoint, capability) | `node_id`, `wait_kind`, `prompt`, `owner`, `details` |
| `SubgraphEvent` | any event of a subgraph's child run (lab.subgraph) | `node_id` (the parent's station), `child_run_id`, `event` |
| `Completed` | last: the run reached End | `output` |
| `Failed` | last: a station failed, or a bound (step limit, timeout) | `node_id`, `error_type`, `message` |
| `Interrupted` | last: the run stopped without ending | `reason`: `waiting`, `paused`, `cancelled` or `interrupted` |

Every event has `run_id` and `seq` (the stored event's sequence number, None for `StepCompleted`
and the final events, which are not stored rows). Nothing runs until the stream is iterated;
leaving the loop early (`break`, closing the iterator) pauses the run at the next boundary: the
station in flight finishes and is checkpointed, and `run.run()` goes on later. Each iteration of
`run.stream()` is a new drive of the same run, as `run.run()` twice is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import queue
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from .gates import station_context

if TYPE_CHECKING:
    from .records import EventRecord
    from .run import Run

__all__ = (
    "RunEvent",
    "NodeStarted",
    "NodeFinished",
    "StepCompleted",
    "NodeRetry",
    "NodeProgress",
    "NodeWarning",
    "Waiting",
    "Completed",
    "Failed",
    "Interrupted",
    "SubgraphEvent",
    "SubgraphBatch",
    "ReturnedBatch",
    "RunStream",
    "ColdStream",
    "report_progress",
    "running_run",
)


@dataclass(frozen=True, slots=True)
class RunEvent:
    """What every stream event has: the run it belongs to and the stored event's sequence number."""

    kind: ClassVar[str] = "event"
    run_id: str
    seq: int | None


@dataclass(frozen=True, slots=True)
class NodeStarted(RunEvent):
    kind: ClassVar[str] = "node_started"
    node_id: str
    attempt: int | None
    task: int | None = None


@dataclass(frozen=True, slots=True)
class NodeFinished(RunEvent):
    kind: ClassVar[str] = "node_finished"
    node_id: str
    attempt: int | None
    checkpoint: int | None
    next: tuple[str, ...] = ()
    ms: float | None = None
    task: int | None = None


@dataclass(frozen=True, slots=True)
class StepCompleted(RunEvent):
    kind: ClassVar[str] = "step_completed"
    checkpoint: int
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeRetry(RunEvent):
    kind: ClassVar[str] = "node_retry"
    node_id: str
    attempt: int | None
    try_number: int
    of: int
    error_type: str
    message: str
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class NodeProgress(RunEvent):
    kind: ClassVar[str] = "node_progress"
    node_id: str
    value: Any
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeWarning(RunEvent):
    kind: ClassVar[str] = "node_warning"
    node_id: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Waiting(RunEvent):
    kind: ClassVar[str] = "waiting"
    node_id: str
    wait_kind: str
    prompt: str | None = None
    owner: str | None = None
    details: Any = None


@dataclass(frozen=True, slots=True)
class SubgraphEvent(RunEvent):
    """An event of a subgraph's child run, inside its parent's stream (seed 003 SubgraphEvent)."""

    kind: ClassVar[str] = "subgraph"
    node_id: str
    """The parent's station that runs the subgraph."""
    child_run_id: str
    event: RunEvent


@dataclass(frozen=True, slots=True)
class SubgraphBatch:
    """A batch of a child run's events, handed to its parent's streams (lab.subgraph)."""

    run_id: str
    node_id: str
    child_run_id: str
    batch: list[Any]


@dataclass(frozen=True, slots=True)
class ReturnedBatch:
    """A parallel task's node returned, handed to the run's streams at once (never stored): its
    `NodeFinished` arrives as it finishes, not when its whole step is checkpointed (seed 003)."""

    run_id: str
    node_id: str
    attempt: int | None
    task: int | None
    ms: float | None


@dataclass(frozen=True, slots=True)
class Completed(RunEvent):
    kind: ClassVar[str] = "completed"
    output: Any


@dataclass(frozen=True, slots=True)
class Failed(RunEvent):
    kind: ClassVar[str] = "failed"
    node_id: str | None
    error_type: str
    message: str


@dataclass(frozen=True, slots=True)
class Interrupted(RunEvent):
    kind: ClassVar[str] = "interrupted"
    reason: Literal["waiting", "paused", "cancelled", "interrupted"]
    node_id: str | None = None


# -- from stored events to typed ones -------------------------------------------------------------


def translate(batch: list[EventRecord] | SubgraphBatch | ReturnedBatch, announced: set[tuple[str, int | None]] | None = None) -> list[RunEvent]:
    """The typed events of one written batch (one journal transaction), in order.

    A batch that settles a step ends with its `StepCompleted`. The run's own final events
    (`done`, `failed`, `cancelled`, ...) are not translated: the stream ends with one final
    event read from the run's status.
    """
    if isinstance(batch, SubgraphBatch):
        return [
            SubgraphEvent(batch.run_id, None, batch.node_id, batch.child_run_id, ev) for ev in translate(batch.batch, announced)
        ]
    if isinstance(batch, ReturnedBatch):
        if announced is not None:
            announced.add((batch.run_id, batch.attempt))
        return [NodeFinished(batch.run_id, None, batch.node_id, batch.attempt, None, (), batch.ms, batch.task)]
    return _translate_rows(batch, announced)


def _translate_rows(batch: list[EventRecord], announced: set[tuple[str, int | None]] | None) -> list[RunEvent]:
    """The typed events of stored rows; a `settled` whose NodeFinished is in `announced` adds none."""
    out: list[RunEvent] = []
    step: int | None = None
    nodes: list[str] = []
    for ev in batch:
        p = ev.payload or {}
        if ev.kind == "entered":
            out.append(NodeStarted(ev.run_id, ev.seq, ev.node_id or "?", ev.attempt, p.get("task")))
        elif ev.kind == "settled":
            nxt = tuple(p.get("next") or ())
            if announced is not None and (ev.run_id, ev.attempt) in announced:
                announced.discard((ev.run_id, ev.attempt))  # its NodeFinished came as it returned
            else:
                out.append(NodeFinished(ev.run_id, ev.seq, ev.node_id or "?", ev.attempt, ev.checkpoint_seq, nxt, p.get("ms"), p.get("task")))
            step = ev.checkpoint_seq
            nodes.append(ev.node_id or "?")
        elif ev.kind == "retry" and p.get("by") == "policy":
            err = p.get("error") or {}
            out.append(
                NodeRetry(
                    ev.run_id, ev.seq, ev.node_id or "?", ev.attempt, int(p.get("try", 0)), int(p.get("of", 0)),
                    str(err.get("type", "")), str(err.get("message", "")), float(p.get("delay") or 0.0),
                )
            )  # fmt: skip
        elif ev.kind == "progress":
            out.append(NodeProgress(ev.run_id, ev.seq, ev.node_id or "?", p.get("value"), dict(p.get("details") or {})))
        elif ev.kind == "warning":
            details = {k: v for k, v in p.items() if k != "message"}
            out.append(NodeWarning(ev.run_id, ev.seq, ev.node_id or "?", str(p.get("message", "")), details))
        elif ev.kind == "waiting":
            out.append(
                Waiting(ev.run_id, ev.seq, ev.node_id or "?", str(p.get("kind")), p.get("prompt"), p.get("owner"), p.get("details"))
            )
    if step is not None:
        out.append(StepCompleted(batch[0].run_id, None, step, tuple(nodes)))
    return out


def final_event(run: Run) -> RunEvent:
    """How the drive ended, read from the run."""
    status = run.status
    nxt = run.next_stations[0] if run.next_stations else None
    if status == "done":
        return Completed(run.id, None, run.output)
    if status == "failed":
        err = run.error or {}
        return Failed(run.id, None, err.get("node_id"), str(err.get("type", "")), str(err.get("message", "")))
    if status == "waiting":
        wait = run.wait
        return Interrupted(run.id, None, "waiting", wait.node_id if wait is not None else nxt)
    if status in ("cancelled", "interrupted"):
        return Interrupted(run.id, None, status, nxt)  # type: ignore[arg-type]
    return Interrupted(run.id, None, "paused", nxt)


# -- progress from inside a node ------------------------------------------------------------------

running_run: contextvars.ContextVar[Run | None] = contextvars.ContextVar("graph_lab_run", default=None)
"""The run whose drive this code runs in (set by the run around a drive; node tasks copy it)."""


def report_progress(value: Any = None, **details: Any) -> None:
    """Report how far the running node got (seed 003 reportProgress): a `progress` event, live.

    `value` and `details` must be JSON-serialisable (a number, a string, a dict...). A stream
    yields it as `NodeProgress`; `run.events("progress")` keeps it.
    """
    ctx = station_context.get()
    run = running_run.get()
    if ctx is None or run is None:
        raise RuntimeError("report_progress() is called from inside a node while a run steps it")
    run.record_progress(ctx.node_id, value, details)


# -- the stream -----------------------------------------------------------------------------------


_DONE = object()


class RunStream:
    """`run.stream(...)`: iterate it with `async for` (on your loop) or `for` (it drives on the lab's loop).

    The drive waits at every boundary until the reader has taken every event written so far (a
    cold flow's backpressure), so leaving the loop stops the run right where the reader stood.
    """

    def __init__(self, run: Run, drive: Callable[[], Any]):
        self._run = run
        self._drive = drive  # makes the coroutine that drives the run (`run.arun(...)`)

    def _attach(self, loop: asyncio.AbstractEventLoop, put: Callable[[Any], None]) -> asyncio.Event:
        """Receive the run's batches through `put`; the event is set while the reader is caught up."""
        caught_up = asyncio.Event()
        caught_up.set()

        def sink(batch: list[EventRecord]) -> None:
            try:
                on_loop = asyncio.get_running_loop() is loop
            except RuntimeError:
                on_loop = False
            if on_loop:  # the drive's own writes: the next boundary must wait for this batch
                caught_up.clear()
                put(batch)
            else:  # a write from another thread (an answer given while the stream waits)
                loop.call_soon_threadsafe(caught_up.clear)
                put(batch)

        self._stop = self._run.watch(sink, between=caught_up.wait)
        return caught_up

    def _detach(self) -> None:
        self._stop()

    # -- async ------------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self._aiter()

    async def _aiter(self) -> AsyncIterator[RunEvent]:
        loop = asyncio.get_running_loop()
        batches: asyncio.Queue[Any] = asyncio.Queue()
        caught_up = self._attach(loop, batches.put_nowait)
        task = asyncio.ensure_future(self._drive())
        task.add_done_callback(lambda _t: batches.put_nowait(_DONE))
        finished = False
        announced: set[tuple[str, int | None]] = set()
        try:
            while True:
                item = await batches.get()
                if item is _DONE:
                    break
                for ev in translate(item, announced):
                    yield ev
                if batches.empty():
                    caught_up.set()
            await task  # its exception (a bad argument, a BaseException) reaches the caller
            finished = True
            yield final_event(self._run)
        finally:
            self._detach()
            caught_up.set()
            if not finished and not task.done():  # the reader left: pause at the next boundary
                self._run.pause()
                await asyncio.shield(task)

    # -- sync -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[RunEvent]:
        from .engine.loop import LoopBlockedError, lab_loop, submit

        loop = lab_loop()
        batches: queue.SimpleQueue[Any] = queue.SimpleQueue()
        caught_up = self._attach(loop, batches.put)
        call = None
        finished = False
        announced: set[tuple[str, int | None]] = set()
        try:
            call = submit(self._drive())  # in a copy of this context; ended also if a station blocks the loop
            call.future.add_done_callback(lambda _f: batches.put(_DONE))
            while True:
                item = batches.get()
                if item is _DONE:
                    break
                yield from translate(item, announced)
                if batches.empty():
                    loop.call_soon_threadsafe(caught_up.set)
            try:
                call.outcome()
            except LoopBlockedError:  # a station blocked the loop: the watchdog settled the run (lab.engine.watchdog)
                if self._run.status not in ("failed", "cancelled", "interrupted"):
                    raise
            finished = True
            yield final_event(self._run)
        finally:
            leaving = not finished and call is not None and not call.future.done()
            if leaving:  # the reader left: pause at the next boundary, asked before the drive may go on
                self._run.pause()  # (asked after, a busy machine let the loop run dozens of stations first)
            self._detach()
            loop.call_soon_threadsafe(caught_up.set)
            if leaving:
                concurrent.futures.wait([call.future], timeout=60)


class ColdStream:
    """`run.fork_stream(...)` / `lab.resume_stream(...)` (seed 003 forkStream, resumeStream): "Like fork
    [resume], but returns a cold Flow of GraphEvents".

    Nothing is forked or resumed until it is iterated; then it makes the run (`make()`: the fork,
    or the resumed handle) and streams it as `run.stream(...)` does. Each iteration makes it again:
    a fork stream forks anew, a resume stream takes the run up from where it stands. `run` is the
    run the last iteration made (None before the first).
    """

    def __init__(self, make: Callable[[], Run], stream: Callable[[Run], RunStream]):
        self._make = make
        self._stream = stream
        self.run: Run | None = None

    def _open(self) -> RunStream:
        self.run = self._make()
        return self._stream(self.run)

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self._open().__aiter__()

    def __iter__(self) -> Iterator[RunEvent]:
        return iter(self._open())
