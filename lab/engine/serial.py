"""The serial engine: one station at a time on pydantic-graph's native iterator (seed 001).

The engine never calls a node itself. It opens `Graph.iter`, injects the pending station at
the iterator's initial boundary with a `GraphTaskRequest`, and advances with `GraphRun.next`.
Around every native step it tells its `EngineHooks` (the run) that a station is entered
(`enter`: its context and attempt, one call) and settled or failed; the hooks own checkpoints and events, so this module knows nothing of the
store or of any view. Returned successors are checked against the pinned manifest before they
can run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from pydantic_graph import EndMarker, Graph, GraphTaskRequest

from ..errors import NodeTimeout, UndeclaredTransitionError, UnsupportedTopologyError
from ..gates import StationContext, WaitSignal, station_context
from ..manifest import END, Manifest
from .tasks import as_pending, node_id_of, request_input, routing_only

__all__ = ("EngineHooks", "Stop", "drive", "node_id_of", "wait_signal", "within")

T = TypeVar("T")

StopReason = Literal["done", "failed", "paused", "aborted", "waiting", "retry"]


@dataclass(frozen=True, slots=True)
class Stop:
    """Why `drive` returned, and how many steps it took on the way (stations that work, not pure routing)."""

    reason: StopReason
    settled: int
    delay: float = 0.0
    """`retry`: seconds to wait before the pending station is tried again (its policy's backoff)."""


class EngineHooks(Protocol):
    """What the engine reports; the run turns these into events and checkpoints."""

    def enter(self, node_id: str, first: bool) -> tuple[StationContext, int] | Literal["waiting", "failed"]:
        """About to run `node_id`: its context and its attempt number (its `entered` event, written).

        `first`: the drive's first station (a resumed wait or a parked run may hold it). "waiting": park
        before it (a breakpoint, a wait that holds). "failed": the previous station's settlement, which
        rode with this write, was refused by the store; that station is recorded failed at the head
        before it and the engine stops. One call a station with `settled` (issue 27 item 1).
        """
        ...

    def settled(self, *, attempt: int, node_id: str, successors: Sequence[Any], end: EndMarker[Any] | None) -> bool:
        """The station returned; `successors` are the next nodes, or `end` holds End data.

        True: a breakpoint after it (never at End): the engine stops there with `park_after`.
        """
        ...

    def failed(self, *, attempt: int, node_id: str, error: BaseException) -> None:
        """The station raised, or returned something the manifest does not permit."""
        ...

    def retrying(self, *, attempt: int, node_id: str, error: Exception) -> float | None:
        """The station raised `error`: seconds to wait before trying it again (its retry policy), or None."""
        ...

    def aborted(self, *, attempt: int, node_id: str, reason: str = "cancelled in flight") -> None:
        """The station was cancelled (or hit by Ctrl-C) in flight."""
        ...

    def parked(self, *, attempt: int, node_id: str, signal: WaitSignal) -> None:
        """The station asked to wait (gate, `interrupt()`, capability); its partial work is dropped."""
        ...

    def flush_settled(self) -> bool:
        """Write a settlement held back to ride with the next `entered` (the engine stops or awaits).

        False: the store refused it; the station is recorded failed at the head before it.
        """
        ...

    def park_after(self, node_id: str) -> None:
        """`node_id` settled and `settled` asked to stop after it: park the run here (a breakpoint after it)."""
        ...


async def drive(
    native: Graph[Any, Any, Any, Any],
    manifest: Manifest,
    *,
    state: Any,
    deps: Any,
    pending: Sequence[Any],
    hooks: EngineHooks,
    max_steps: int | None,
    should_pause: Callable[[], bool],
    timeouts: Mapping[str, float] | None = None,
    between: Callable[[], Awaitable[None]] | None = None,
) -> Stop:
    """Run stations from `pending` until End, a failure, `max_steps`, or `should_pause()`.

    `timeouts` gives some stations a time limit per try: past it the try fails with `NodeTimeout`.
    `between` is awaited at every boundary before the next station (a stream waits there for its reader).
    """
    if len(pending) != 1:
        raise UnsupportedTopologyError(
            f"the serial engine runs one station at a time; this checkpoint has {len(pending)} pending"
        )
    settled = step = 0
    node = pending[0]
    node_id = node_id_of(node)
    routing = {nid for nid in native.nodes if routing_only(native, nid)}  # pure routing: not a step
    edges = frozenset(manifest.edges)  # the permitted (source, target) pairs, looked up at every station
    set_context, reset_context = station_context.set, station_context.reset
    enter = hooks.enter
    try:
        async with native.iter(state=state, deps=deps, infer_name=False) as graph_run:
            # Read the initial boundary before calling next(): next() on a fresh run consumes it.
            fork_stack = graph_run.next_task[0].fork_stack
            request: list[GraphTaskRequest] | None = [GraphTaskRequest(node_id, request_input(node), fork_stack)]
            advance = graph_run.next
            while True:
                # the usual boundary (no bound reached, no reader to await, no pause asked) costs one test
                if (max_steps is not None and settled >= max_steps) or (settled and (between is not None or should_pause())):
                    if stop := await _boundary(hooks, settled, step, max_steps, between, should_pause):
                        return stop
                entry = enter(node_id, request is not None)
                if type(entry) is str:  # parked before it, or the settlement its write carried was refused
                    return Stop("waiting", settled) if entry == "waiting" else Stop("failed", settled - step)
                context, attempt = entry
                token = set_context(context)  # the node's task copies it when it starts
                seconds = timeouts.get(node_id) if timeouts else None
                try:
                    result = await (advance(request) if seconds is None else within(advance(request), seconds, node_id))
                except BaseException as exc:
                    return _stop_for(hooks, attempt, node_id, _not_a_node(exc, node_id, manifest), settled)
                finally:
                    reset_context(token)
                request = None
                try:
                    nxt_id, park = _settle(manifest, edges, hooks, attempt, node_id, result)
                except Exception as exc:
                    hooks.failed(attempt=attempt, node_id=node_id, error=exc)
                    return Stop("failed", settled)
                step = 0 if node_id in routing else 1  # start, decisions, end: pure routing, not a step
                if nxt_id is None:
                    return Stop("done", settled + step)
                settled += step
                if park:
                    hooks.park_after(node_id)
                    return Stop("waiting", settled)
                node_id = nxt_id
    except _Leave as leave:  # a timed-out station: leaving the iterator cancels it (see _Leave)
        return leave.stop
    finally:
        hooks.flush_settled()  # whatever stopped the engine: no settlement is left held back


async def _boundary(
    hooks: EngineHooks,
    settled: int,
    step: int,
    max_steps: int | None,
    between: Callable[[], Awaitable[None]] | None,
    should_pause: Callable[[], bool],
) -> Stop | None:
    """Between two stations: a stop (step bound, pause, a held settlement refused), or None to go on.

    A stop writes the settlement held back for the next `entered` first; so does awaiting `between`.
    """
    if max_steps is not None and settled >= max_steps or settled and between is None and should_pause():
        return Stop("paused", settled) if hooks.flush_settled() else Stop("failed", settled - step)
    if settled and between is not None:
        if not hooks.flush_settled():
            return Stop("failed", settled - step)
        await between()
        if should_pause():
            return Stop("paused", settled)
    return None


class _Leave(Exception):
    """Leaves `native.iter` by raising: its task group then cancels a node still running in it.

    A node runs in pydantic-graph's own task group, not in the task awaiting `GraphRun.next`; a
    normal exit from the iterator waits for that node to finish, an exception cancels it.
    """

    def __init__(self, stop: Stop):
        super().__init__(stop.reason)
        self.stop = stop


async def within(awaitable: Awaitable[T], seconds: float, node_id: str) -> T:
    """`await awaitable`, failed with `NodeTimeout` after `seconds` (the node's own TimeoutError passes)."""
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise NodeTimeout(
                f"station {node_id} ran longer than its timeout of {seconds:g} s and was cancelled; "
                "raise the timeout (@g.node(timeout=...)), or give it a Retry policy",
                node_id=node_id,
                timeout=seconds,
            ) from None
        raise


def _stop_for(hooks: EngineHooks, attempt: int, node_id: str, exc: BaseException, settled: int) -> Stop:
    """The stop for a station that raised `exc` (recorded by `_raised`); raises what must reach the caller."""
    stop = _raised(hooks, attempt, node_id, exc, settled)
    if stop is None:
        raise exc
    if isinstance(exc, NodeTimeout):
        raise _Leave(stop) from None
    return stop


def _raised(hooks: EngineHooks, attempt: int, node_id: str, exc: BaseException, settled: int) -> Stop | None:
    """Record a station that raised: why `drive` stops, or None when `exc` must reach the caller.

    Cancellation and Ctrl-C abort the station (`interrupted`); `SystemExit` and other
    `BaseException`s fail it, and propagate: the lab records them but never swallows them.
    """
    if isinstance(exc, asyncio.CancelledError):
        hooks.aborted(attempt=attempt, node_id=node_id)
        return None
    if isinstance(exc, KeyboardInterrupt):
        hooks.aborted(attempt=attempt, node_id=node_id, reason="KeyboardInterrupt in flight")
        return None
    signal = wait_signal(exc) if isinstance(exc, Exception) else None
    if signal is not None:
        hooks.parked(attempt=attempt, node_id=node_id, signal=signal)
        return Stop("waiting", settled)
    if isinstance(exc, Exception):
        delay = hooks.retrying(attempt=attempt, node_id=node_id, error=exc)
        if delay is not None:  # tried again from the same boundary: nothing was settled or written for it
            return Stop("retry", settled, delay)
    hooks.failed(attempt=attempt, node_id=node_id, error=exc)
    return Stop("failed", settled) if isinstance(exc, Exception) else None


def _not_a_node(exc: BaseException, node_id: str, manifest: Manifest) -> BaseException:
    """pydantic-graph's `assert_never` on a node's return value, as an error that says what to return."""
    if not isinstance(exc, AssertionError) or not str(exc).startswith("Expected code to be unreachable"):
        return exc
    tb, returned, found = exc.__traceback__, None, False
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_handle_node" and "next_node" in tb.tb_frame.f_locals:
            returned, found = tb.tb_frame.f_locals["next_node"], True
        tb = tb.tb_next
    if not found:
        return exc
    allowed = ", ".join("End(...)" if s == END else f"{s}(...)" for s in manifest.successors(node_id)) or "nothing"
    error = UndeclaredTransitionError(
        f"station {node_id} returned {returned!r} ({type(returned).__qualname__}), which is neither a node nor End; "
        f"its run() must return one of what its return hint declares: {allowed}"
    )
    error.__cause__ = exc
    return error


def _settle(
    manifest: Manifest, edges: frozenset[tuple[str, str]], hooks: EngineHooks, attempt: int, node_id: str, result: Any
) -> tuple[str | None, bool]:
    """Check the station's result against the manifest's `edges` and report it: the next id (None at End),
    and whether to park after it (`EngineHooks.settled`)."""
    if isinstance(result, EndMarker):
        if (node_id, END) not in edges:
            _check_edge(manifest, node_id, END)
        hooks.settled(attempt=attempt, node_id=node_id, successors=(), end=result)
        return None, False
    tasks = result if type(result) is list else list(result)
    if len(tasks) != 1:
        raise UnsupportedTopologyError(
            f"station {node_id} produced {len(tasks)} next tasks; the serial engine runs one station at a time"
        )
    nxt = tasks[0]
    if (node_id, nxt.node_id) not in edges:  # not a declared edge: the error (or the native end node's task)
        _check_edge(manifest, node_id, nxt.node_id)
    park = hooks.settled(attempt=attempt, node_id=node_id, successors=(as_pending(nxt.node_id, nxt.inputs),), end=None)
    return nxt.node_id, park


def _check_edge(manifest: Manifest, source: str, target: str) -> None:
    if source == END:  # the native end node's task: it only hands over the End value
        return
    if not manifest.permits(source, target):
        allowed = ", ".join("End" if s == END else s for s in manifest.successors(source)) or "nothing"
        what = "End" if target == END else target
        raise UndeclaredTransitionError(
            f"station {source} returned {what}, which its return hint does not declare "
            f"(permitted: {allowed}); add it to {source}.run's return annotation"
        )


def wait_signal(exc: BaseException) -> WaitSignal | None:
    """The wait a station asked for, also through an exception group of one kind of signal.

    A group that mixes a signal with a real failure fails closed (seed 001): it is a failure.
    """
    if isinstance(exc, WaitSignal):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        stack: list[BaseException] = [exc]
        while stack:
            e = stack.pop()
            if isinstance(e, BaseExceptionGroup):
                stack.extend(e.exceptions)
            else:
                leaves.append(e)
        if leaves and all(isinstance(e, WaitSignal) for e in leaves) and len({type(e) for e in leaves}) == 1:
            leaves[0].group = tuple(leaves)  # type: ignore[attr-defined]  # a capability park counts each one it names
            return leaves[0]  # type: ignore[return-value]
    return None
