"""A station that blocks its thread, undeclared, cannot hang the notebook (issue 24 item 13).

Scenarios, with a node that loops on `time.sleep(0.05)` (not declared `blocking=True`) until the
test releases it: `run.run(timeout=1)` and `run.step(timeout=1)` return within a generous bound,
the run `failed` with `RunTimeout` naming the station (and saying to declare it blocking) at
its last checkpoint, its state the head's; when the stuck node returns later, nothing of it is
written; another run of the same lab steps normally afterwards, and `run.run()` goes on after
the timeout; `cancel()` from another thread (the widget's Cancel) returns control with the run
`cancelled`; `await run.arun(timeout=1)` on the caller's own loop leaves that loop free and
returns; Ctrl-C ends the run `interrupted`, and `run.retry()` goes on; a run stepping beside
the stuck one on the same loop ends `interrupted`, its caller returns, and it goes on after.
"""

from __future__ import annotations

import _thread
import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, LabGraph, RunTimeout, report_progress
from tests.integration.control_graphs import Laps

BLOCK = threading.Event()
"""Set: `Stuck` blocks its thread until `RELEASE` is set (module-level, so teardown frees the thread)."""
RELEASE = threading.Event()
IN_FLIGHT = threading.Event()
THREADS: list[threading.Thread] = []
"""The threads `Stuck` blocked."""

BOUND = 30.0
"""Seconds a call may take to come back from a blocked station (timeout 1 s + a grace; the machine is loaded)."""


@dataclass
class Before(BaseNode[Laps, None, int]):
    async def run(self, ctx: GraphRunContext[Laps, None]) -> Stuck:
        ctx.state.log.append("before")
        return Stuck()


@dataclass
class Stuck(BaseNode[Laps, None, int]):
    """Blocks its thread (no await) while BLOCK is set, as a synchronous client would."""

    async def run(self, ctx: GraphRunContext[Laps, None]) -> End[int]:
        ctx.state.log.append("stuck")
        if BLOCK.is_set():
            THREADS.append(threading.current_thread())
            IN_FLIGHT.set()
            while not RELEASE.is_set():
                time.sleep(0.05)
        return End(len(ctx.state.log))


def stuck_graph(lab: Lab) -> LabGraph:
    g = lab.graph("stuck", state_type=Laps, output_type=int)
    g.node(Before)
    g.node(Stuck)
    return g


@pytest.fixture(autouse=True)
def blocking() -> Iterator[None]:
    BLOCK.set()
    RELEASE.clear()
    IN_FLIGHT.clear()
    THREADS.clear()
    yield
    RELEASE.set()  # free the stuck threads (daemons) so they end with the test
    for t in THREADS:
        t.join(60)
    BLOCK.clear()


def _release_and_check_nothing_late_is_written(run: Any) -> None:
    """Let the abandoned station return: its result is discarded, nothing more is written."""
    kinds, head, log = [e.kind for e in run.events()], run.head, list(run.state.log)
    RELEASE.set()
    for t in THREADS:
        t.join(60)
        assert not t.is_alive()  # the abandoned loop stopped once the station returned
    assert [e.kind for e in run.events()] == kinds and run.head == head and run.state.log == log


def _assert_timed_out_at_its_head(run: Any) -> None:
    assert run.status == "failed" and run.lab.run(run.id).status == "failed"
    err = run.error or {}
    assert err["type"] == "lab.errors.RunTimeout" and err["node_id"] == "Stuck", err
    assert "station Stuck" in err["message"] and "blocking=True" in err["message"] and "Stuck.run" in err["message"]
    assert run.head == 1 and run.state.log == ["before"]  # the head's state: Stuck's change is dropped
    (failed,) = run.events("failed")
    entered = [e for e in run.events("entered") if e.node_id == "Stuck"]
    assert failed.attempt == entered[-1].attempt and failed.checkpoint_seq == 1


def test_run_with_a_timeout_returns_when_an_undeclared_station_blocks_its_thread() -> None:
    """Issue 24 item 13: a node looping on time.sleep under `run.run(timeout=2)` never returned."""
    lab = Lab(":memory:")
    g = stuck_graph(lab)
    run = g.start(Before(), state=Laps())
    assert run.step().outcome == "settled"  # Before first: the timeout covers only the stuck station
    started = time.monotonic()
    run.run(timeout=1)
    assert time.monotonic() - started < BOUND
    _assert_timed_out_at_its_head(run)
    # the lab goes on: another run steps at once, this one resumes from its head
    BLOCK.clear()
    other = g.start(Before(), state=Laps())
    assert other.step().outcome == "settled" and other.run().status == "done"
    _release_and_check_nothing_late_is_written(run)
    run.run()
    assert run.status == "done" and run.state.log == ["before", "stuck"] and run.output == 2
    BLOCK.set()
    RELEASE.clear()
    third = g.start(Before(), state=Laps())
    third.step()
    with pytest.raises(RunTimeout, match="blocking=True"):  # raising, as any timeout does when asked
        third.run(timeout=1, raise_on_failure=True)
    lab.close()


def test_step_with_a_timeout_returns_and_another_run_steps_normally_afterwards() -> None:
    lab = Lab(":memory:")
    g = stuck_graph(lab)
    run = g.start(Before(), state=Laps())
    assert run.step().outcome == "settled"
    started = time.monotonic()
    result = run.step(timeout=1)
    assert time.monotonic() - started < BOUND
    assert result.outcome == "failed" and result.node_id == "Stuck" and "RunTimeout" in (result.error or "")
    _assert_timed_out_at_its_head(run)
    BLOCK.clear()
    other = g.start(Before(), state=Laps())
    assert [other.step().outcome, other.step().outcome] == ["settled", "done"]
    _release_and_check_nothing_late_is_written(run)
    lab.close()


def test_cancel_from_another_thread_returns_control_from_a_blocked_station() -> None:
    """The widget's Cancel: `run.cancel()` from another thread while `run.run()` (no timeout) waits."""
    lab = Lab(":memory:")
    run = stuck_graph(lab).start(Before(), state=Laps())

    def cancel_when_in_flight() -> None:
        if IN_FLIGHT.wait(BOUND):
            run.cancel()

    canceller = threading.Thread(target=cancel_when_in_flight, daemon=True)
    canceller.start()
    started = time.monotonic()
    run.run()
    assert time.monotonic() - started < BOUND
    canceller.join(30)
    assert run.status == "cancelled" and lab.run(run.id).status == "cancelled"
    assert run.head == 1 and run.state.log == ["before"]
    (ev,) = run.events("cancelled")
    assert ev.node_id == "Stuck"
    _release_and_check_nothing_late_is_written(run)
    lab.close()  # the run was released: the lab closes


def test_the_async_form_on_the_callers_own_loop_leaves_that_loop_free_and_returns() -> None:
    lab = Lab(":memory:")
    g = stuck_graph(lab)
    run = g.start(Before(), state=Laps())
    assert run.step().outcome == "settled"  # Before first: the timeout covers only the stuck station
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    async def notebook() -> None:
        ticker = asyncio.create_task(tick())
        await run.arun(timeout=1)
        ticker.cancel()

    started = time.monotonic()
    asyncio.run(notebook())
    assert time.monotonic() - started < BOUND
    assert ticks > 5  # the caller's loop kept running while the station blocked the lab's
    _assert_timed_out_at_its_head(run)
    BLOCK.clear()

    async def again() -> Any:
        other = g.start(Before(), state=Laps())
        return (await other.astep()).outcome, (await other.arun()).status

    assert asyncio.run(again()) == ("settled", "done")
    lab.close()


def test_ctrl_c_returns_control_from_a_blocked_station_and_the_run_ends_interrupted() -> None:
    assert threading.current_thread() is threading.main_thread()
    lab = Lab(":memory:")
    run = stuck_graph(lab).start(Before(), state=Laps())

    def press() -> None:
        if IN_FLIGHT.wait(BOUND):
            _thread.interrupt_main()  # SIGINT's handler: what Ctrl-C (or Jupyter's Interrupt) does

    presser = threading.Thread(target=press, daemon=True)
    presser.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run.run()
    assert time.monotonic() - started < BOUND
    presser.join(30)
    assert run.status == "interrupted" and lab.run(run.id).status == "interrupted"
    (ev,) = run.events("interrupted")
    assert ev.node_id == "Stuck" and "blocked the lab's event loop" in ev.payload["reason"]
    _release_and_check_nothing_late_is_written(run)
    BLOCK.clear()
    run.retry()
    assert run.status == "done" and run.state.log == ["before", "stuck"]
    lab.close()


@dataclass
class Tick(BaseNode[Laps, None, int]):
    """Steps on and on, awaiting between steps (a well-behaved run beside the stuck one)."""

    async def run(self, ctx: GraphRunContext[Laps, None]) -> Tick | End[int]:
        await asyncio.sleep(0.01)
        ctx.state.count += 1
        return End(ctx.state.count) if ctx.state.count == ctx.state.until else Tick()


def test_a_run_stepping_beside_the_stuck_one_ends_interrupted_and_its_caller_returns() -> None:
    """The loop both runs were driven on is given up: the other run's caller is not left waiting on it."""
    lab = Lab(":memory:")
    g = stuck_graph(lab)
    ticking = lab.graph("ticking", state_type=Laps, output_type=int, step_limit=None)
    ticking.node(Tick)
    beside = ticking.start(Tick(), state=Laps(until=10**9))
    out: dict[str, Any] = {}

    def drive_beside() -> None:
        try:
            out["returned"] = beside.run()
        except BaseException as exc:  # reported, never swallowed silently
            out["raised"] = exc

    t = threading.Thread(target=drive_beside, daemon=True)
    t.start()
    deadline = time.monotonic() + BOUND
    while not beside.events("settled") and time.monotonic() < deadline:
        time.sleep(0.01)
    run = g.start(Before(), state=Laps())
    assert run.step().outcome == "settled"  # Before first: the timeout covers only the stuck station
    run.run(timeout=1)
    _assert_timed_out_at_its_head(run)
    t.join(BOUND)
    assert not t.is_alive() and out.get("returned") is beside, out
    assert beside.status == "interrupted" and lab.run(beside.id).status == "interrupted"
    (ev,) = beside.events("interrupted")
    assert "blocked the lab's event loop" in ev.payload["reason"] and "Stuck.run" in ev.payload["reason"]
    head = beside.head or 0
    assert beside.retry().outcome == "settled"  # goes on from its head, on the fresh loop
    beside.run(max_steps=3)
    assert beside.status == "running" and beside.head == head + 4
    _release_and_check_nothing_late_is_written(run)
    lab.close()


def test_the_run_views_cancel_returns_it_from_a_blocked_station() -> None:
    """The run view's Run button drives on the lab's loop; its Cancel settles the run and ends the action."""
    from lab.widgets import RunWidget

    lab = Lab(":memory:")
    run = stuck_graph(lab).start(Before(), state=Laps())
    w = RunWidget(run)
    w.run_btn.click()
    assert IN_FLIGHT.wait(BOUND)
    w.cancel_btn.click()
    assert w.wait(BOUND)  # the action ended: the view is free again
    assert not w.busy and run.status == "cancelled" and lab.run(run.id).status == "cancelled"
    _release_and_check_nothing_late_is_written(run)
    w.close()
    lab.close()


def test_a_stream_read_in_a_cell_ends_with_the_timeout_of_a_blocked_station() -> None:
    """`for ev in run.stream(timeout=1)` drives on the lab's loop: it ends with the run's `Failed` event."""
    from lab.events import Failed

    lab = Lab(":memory:")
    run = stuck_graph(lab).start(Before(), state=Laps())
    assert run.step().outcome == "settled"  # Before first: the timeout covers only the stuck station
    started = time.monotonic()
    events = list(run.stream(timeout=1))
    assert time.monotonic() - started < BOUND
    last = events[-1]
    assert isinstance(last, Failed) and last.node_id == "Stuck" and "RunTimeout" in last.error_type, last
    _assert_timed_out_at_its_head(run)
    _release_and_check_nothing_late_is_written(run)
    lab.close()


LATE = threading.Event()
"""Set once the abandoned `Reporter` tried to report its progress."""


@dataclass
class Reporter(BaseNode[Laps, None, int]):
    """Blocks its thread (first visit), then reports progress; a later visit waits until that happened."""

    async def run(self, ctx: GraphRunContext[Laps, None]) -> End[int]:
        if BLOCK.is_set():
            THREADS.append(threading.current_thread())
            while not RELEASE.is_set():
                time.sleep(0.05)
            try:
                report_progress("late")
            finally:
                LATE.set()
            return End(-1)
        report_progress("live")
        RELEASE.set()  # the abandoned visit returns while this drive is in flight
        while not LATE.is_set():
            await asyncio.sleep(0.01)
        return End(1)


def test_an_abandoned_station_reports_nothing_into_the_drive_that_came_after_it() -> None:
    """Its `report_progress()` after it returns is refused, also while the run is driven again elsewhere."""
    LATE.clear()
    lab = Lab(":memory:")
    g = lab.graph("reporter", state_type=Laps, output_type=int)
    g.node(Reporter)
    run = g.start(Reporter(), state=Laps())
    run.run(timeout=1)
    assert run.status == "failed" and (run.error or {}).get("type") == "lab.errors.RunTimeout"
    BLOCK.clear()
    run.run()
    assert run.status == "done" and run.output == 1 and LATE.is_set()
    assert [e.payload["value"] for e in run.events("progress")] == ["live"]
    lab.close()


def test_the_async_forms_keep_contexts_streams_and_subgraphs_on_the_callers_loop_as_before() -> None:
    """The hand-off to the lab's loop changes nothing a caller sees: an `async for` over a parent's
    stream has its subgraph child's events nested (the child runs where its parent's station runs)."""
    from lab.events import Completed, NodeStarted, SubgraphEvent
    from tests.integration.control_graphs import CHILD, Prepare, child_graph, parent_graph

    BLOCK.clear()
    lab = Lab(":memory:")
    CHILD["graph"] = child_graph(lab)
    parent = parent_graph(lab).start(Prepare(), state=Laps())

    async def read(stream: Any) -> list[Any]:
        return [ev async for ev in stream]

    first = asyncio.run(read(parent.stream()))
    assert [ev.event.node_id for ev in first if isinstance(ev, SubgraphEvent) and isinstance(ev.event, NodeStarted)] == [
        "Intro",
        "AskName",
    ]
    parent.resume_with("Bo")
    second = asyncio.run(read(parent.stream()))
    assert isinstance(second[-1], Completed) and second[-1].output == "hello Bo"
    lab.close()
