"""Seed 003's stream: a node's finish as it finishes, and fork / resume as one call each."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext

from lab import Lab
from lab.events import Completed, NodeFinished, NodeStarted, RunEvent, StepCompleted

DEADLINE = 60.0
"""Seconds the slow task waits for the reader to have seen its sibling's finish (a loaded machine)."""


@dataclass
class Gate:
    """Shared by both tasks (deps are not copied): the slow one waits until the reader saw the fast one."""

    seen_fast: asyncio.Event = field(default_factory=asyncio.Event)
    order: list[str] = field(default_factory=list)


@dataclass
class Box:
    n: int = 0


def _adopted(lab: Lab):
    native = GraphBuilder(state_type=Box, deps_type=Gate, output_type=list[str])

    @native.step
    async def fast(ctx: StepContext[Box, Gate, None]) -> str:
        ctx.deps.order.append("fast returned")
        return "fast"

    @native.step
    async def slow(ctx: StepContext[Box, Gate, None]) -> str:
        await asyncio.wait_for(ctx.deps.seen_fast.wait(), DEADLINE)  # times out if the finish waits for the step
        ctx.deps.order.append("slow returned")
        return "slow"

    from pydantic_graph.join import reduce_list_append

    both = native.join(reduce_list_append, initial_factory=list[str], node_id="both")
    native.add(
        native.edge_from(native.start_node).to(fast, slow),
        native.edge_from(fast).to(both),
        native.edge_from(slow).to(both),
        native.edge_from(both).to(native.end_node),
    )
    return lab.adopt(native.build(), name="race")


def _model(lab: Lab):
    g = lab.graph("race-model", state_type=Box, deps_type=Gate, model="superstep", reducers={})

    @g.step
    async def fast(ctx: StepContext[Box, Gate, None]) -> dict[str, Any]:
        ctx.deps.order.append("fast returned")
        return {}

    @g.step
    async def slow(ctx: StepContext[Box, Gate, None]) -> dict[str, Any]:
        await asyncio.wait_for(ctx.deps.seen_fast.wait(), DEADLINE)
        ctx.deps.order.append("slow returned")
        return {}

    g.add(g.edge_from(g.start_node).to(fast, slow), g.edge_from(fast).to(g.end_node), g.edge_from(slow).to(g.end_node))
    return g


@pytest.mark.parametrize("declare", [_adopted, _model], ids=["native-parallel", "superstep-model"])
def test_a_parallel_nodes_finish_arrives_as_it_finishes_not_with_its_step(declare) -> None:
    """Seed 003: stream "returns a cold Flow that emits a GraphEvent as each node starts and finishes and
    after every step". Two nodes run in one step; the slow one waits until the reader has seen the fast
    one's NodeFinished, which therefore has to arrive while its step is still running, before the step's
    checkpoint (StepCompleted names it then). Each node finishes once in the stream."""
    lab = Lab(":memory:")
    g = declare(lab)

    async def collect() -> tuple[list[RunEvent], Gate]:
        gate = Gate()
        run = g.start(inputs=None, state=Box(), deps=gate)
        events: list[RunEvent] = []
        async for ev in run.stream():
            events.append(ev)
            if isinstance(ev, NodeFinished) and ev.node_id == "fast":
                gate.order.append("reader saw fast")
                gate.seen_fast.set()
        return events, gate

    events, gate = asyncio.run(collect())
    assert gate.order == ["fast returned", "reader saw fast", "slow returned"]
    assert isinstance(events[-1], Completed)
    finished = [ev for ev in events if isinstance(ev, NodeFinished) and ev.node_id in ("fast", "slow")]
    assert [ev.node_id for ev in finished] == ["fast", "slow"]  # once each
    fast_at = events.index(finished[0])
    step = next(i for i, ev in enumerate(events) if isinstance(ev, StepCompleted) and "fast" in ev.nodes)
    assert fast_at < step and finished[0].checkpoint is None and finished[0].ms is not None
    started = {ev.node_id: ev.attempt for ev in events if isinstance(ev, NodeStarted)}
    assert finished[0].attempt == started["fast"]  # correlates with its NodeStarted
    lab.close()


# -- forkStream and resumeStream ------------------------------------------------------------------

from tests.conftest import Counter, Inc, declare_counter  # noqa: E402


def test_fork_stream_is_fork_and_stream_in_one_cold_call(tmp_path) -> None:
    """Seed 003 forkStream: "Like fork, but returns a cold Flow of GraphEvents. See stream", and stream's
    "Nothing runs until the flow is collected, and each collection is a new run". Making the flow forks
    nothing; collecting it forks the checkpoint and streams the fork to its end; collecting it again
    forks again. The parent stays as it was."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        run = declare_counter(lab).start(Inc(by=2), state=Counter()).run()
        assert run.status == "done" and run.output == 6
        history = [(c.seq, c.status) for c in run.history()]
        flow = run.fork_stream(1, state=Counter(count=4))
        assert flow.run is None and len(lab.runs()) == 1  # cold: nothing forked yet
        events = list(flow)
        child = flow.run
        assert child is not None and child.id != run.id and len(lab.runs()) == 2
        assert {ev.run_id for ev in events} == {child.id} and isinstance(events[-1], Completed)
        assert events[-1].output == 6 and lab.run(child.id).parent_run_id == run.id
        assert [type(ev).__name__ for ev in events[:2]] == ["NodeStarted", "NodeFinished"]

        async def again() -> list[RunEvent]:
            return [ev async for ev in lab.fork_stream(run.id, 0)]

        second = asyncio.run(again())
        assert len(lab.runs()) == 3 and isinstance(second[-1], Completed) and second[-1].output == 6
        assert second[-1].run_id not in (run.id, child.id)
        assert run.status == "done" and [(c.seq, c.status) for c in run.history()] == history  # left as it is


def test_resume_stream_is_resume_and_stream_in_one_cold_call(tmp_path) -> None:
    """Seed 003 resumeStream: "Like resume, but returns a cold Flow of GraphEvents. See stream". A run
    stopped in one lab is taken up in another only when the flow is collected (no `resumed` event, no
    claim before), and the flow streams it from its last checkpoint to its end."""
    path = tmp_path / "lab.duckdb"
    with Lab(":memory:") as ref:
        expected = declare_counter(ref).start(Inc(by=1), state=Counter()).run().output
    with Lab(path) as lab:
        run = declare_counter(lab).start(Inc(by=1), state=Counter())
        run.run(max_steps=2)
        run_id, head = run.id, run.head
    with Lab(path) as lab:
        declare_counter(lab)
        flow = lab.resume_stream(run_id)
        assert flow.run is None and "resumed" not in [e.kind for e in lab.events(run_id)]  # cold
        events = list(flow)
        assert [e.kind for e in lab.events(run_id)].count("resumed") == 1
        assert isinstance(events[-1], Completed) and events[-1].output == expected and flow.run.id == run_id
        first = next(ev for ev in events if isinstance(ev, NodeStarted))
        assert first.run_id == run_id and lab.run(run_id).status == "done" and head == 2
