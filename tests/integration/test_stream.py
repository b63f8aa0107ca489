"""The typed event stream (issue 13 requirement 5, seed 003 `stream`).

Scenarios: `async for` and `for` over `run.stream()` yield node started / finished, step
completed, retry and progress events in order and end with one final event (completed,
failed, or interrupted: waiting, paused); nothing runs until the stream is iterated; leaving
the loop pauses the run at the next boundary; a parallel step is one StepCompleted.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from lab import Lab, Retry
from lab.events import (
    Completed,
    Failed,
    Interrupted,
    NodeFinished,
    NodeProgress,
    NodeRetry,
    NodeStarted,
    RunEvent,
    StepCompleted,
    Waiting,
)
from tests.integration.control_graphs import (
    Asker,
    Laps,
    Ok,
    Prep,
    Script,
    Spin,
    Working,
    failing,
    flaky,
    spinner,
)


def shape(events: list[RunEvent]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for ev in events:
        if isinstance(ev, (NodeStarted, NodeRetry)):
            out.append((type(ev).__name__, ev.node_id))
        elif isinstance(ev, NodeFinished):
            out.append((type(ev).__name__, ev.node_id, ev.checkpoint))
        elif isinstance(ev, StepCompleted):
            out.append((type(ev).__name__, ev.checkpoint))
        elif isinstance(ev, Completed):
            out.append((type(ev).__name__, ev.output))
        else:
            out.append((type(ev).__name__,))
    return out


EXPECTED = [
    ("NodeStarted", "Prep"),
    ("NodeFinished", "Prep", 1),
    ("StepCompleted", 1),
    ("NodeStarted", "Flaky"),
    ("NodeRetry", "Flaky"),
    ("NodeStarted", "Flaky"),
    ("NodeFinished", "Flaky", 2),
    ("StepCompleted", 2),
    ("Completed", 1),
]


def test_async_for_yields_typed_events_in_order_and_nothing_runs_until_iterated() -> None:
    """Seed 003: a stream "emits a GraphEvent as each node starts and finishes and after every step,
    and ends with GraphEvent.Completed [...] a try of a node that failed and is followed by another
    as a GraphEvent.NodeRetry. Nothing runs until the flow is collected"."""
    lab = Lab(":memory:")
    run = flaky(lab, retry=Retry(max_attempts=2)).start(Prep(), state=Laps(), deps=Script([ValueError("once")]))
    stream = run.stream()

    async def collect() -> list[RunEvent]:
        assert run.status == "created" and not run.events("entered")  # made, not iterated: nothing ran
        return [ev async for ev in stream]

    events = asyncio.run(collect())
    assert shape(events) == EXPECTED
    retry = next(ev for ev in events if isinstance(ev, NodeRetry))
    assert (retry.try_number, retry.of, retry.error_type, retry.message) == (1, 2, "builtins.ValueError", "once")
    assert all(ev.run_id == run.id for ev in events) and run.status == "done"


def test_the_sync_twin_yields_the_same_events() -> None:
    lab = Lab(":memory:")
    run = flaky(lab, retry=Retry(max_attempts=2)).start(Prep(), state=Laps(), deps=Script([ValueError("once")]))
    assert shape(list(run.stream())) == EXPECTED


def test_progress_reported_by_a_node_arrives_while_it_runs() -> None:
    """Seed 003: "What a node passes to reportProgress while it runs arrives as a GraphEvent.NodeProgress"."""
    lab = Lab(":memory:")
    g = lab.graph("working", state_type=Laps, output_type=int)
    g.node(Working)
    run = g.start(Working(), state=Laps())
    events = list(run.stream())
    kinds = [type(ev).__name__ for ev in events]
    assert kinds == ["NodeStarted", "NodeProgress", "NodeProgress", "NodeFinished", "StepCompleted", "Completed"]
    first, second = (ev for ev in events if isinstance(ev, NodeProgress))
    assert (first.node_id, first.value, first.details) == ("Working", 0.5, {"stage": "half"})
    assert second.value == 1.0
    assert [e.payload["value"] for e in run.events("progress")] == [0.5, 1.0]


def test_leaving_the_loop_pauses_the_run_at_the_next_boundary() -> None:
    """Issue 13: "closing the iterator pauses the run at the next boundary"."""
    lab = Lab(":memory:")
    run = spinner(lab).start(Spin(), state=Laps(), step_limit=None)
    finished = 0
    for ev in run.stream():
        if isinstance(ev, NodeFinished):
            finished += 1
            if finished == 3:
                break
    assert run.status == "running" and run.head in (3, 4)  # the station in flight, if any, finished
    entered, settled = run.events("entered"), run.events("settled")
    assert len(entered) == len(settled) == run.head  # nothing is left in flight
    run.run(max_steps=1)
    assert run.state.count == run.head


def test_a_stream_ends_with_waiting_or_failed() -> None:
    lab = Lab(":memory:")
    g = lab.graph("asks", state_type=Laps, output_type=int)
    g.node(Asker)
    run = g.start(Asker(), state=Laps())
    events = list(run.stream())
    assert isinstance(events[-2], Waiting) and events[-2].wait_kind == "interrupt" and events[-2].details == "go on?"
    assert events[-1] == Interrupted(run.id, None, "waiting", "Asker")
    run.resume_with("yes")
    assert isinstance(list(run.stream())[-1], Completed)

    boom = failing(lab).start(Ok(), state=Laps())
    last = list(boom.stream())[-1]
    assert isinstance(last, Failed) and last.node_id == "Boom" and last.error_type == "builtins.ValueError"


def test_a_parallel_step_is_one_step_completed() -> None:
    native = GraphBuilder(state_type=Laps, input_type=list[int], output_type=list[int])

    @native.step
    async def work(ctx: StepContext[Laps, None, int]) -> int:
        return ctx.inputs * 2

    collect = native.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    native.add(native.edge_from(native.start_node).map().to(work), native.edge_from(work).to(collect), native.edge_from(collect).to(native.end_node))
    lab = Lab(":memory:")
    run = lab.adopt(native.build(), name="fan").start(inputs=[1, 2, 3], state=Laps())
    events = list(run.stream())
    steps = [ev for ev in events if isinstance(ev, StepCompleted)]
    assert [s.nodes for s in steps][1] == ("work", "work", "work")
    assert {ev.task for ev in events if isinstance(ev, NodeStarted) and ev.node_id == "work"} == {1, 2, 3}
    assert isinstance(events[-1], Completed) and sorted(events[-1].output) == [2, 4, 6]
