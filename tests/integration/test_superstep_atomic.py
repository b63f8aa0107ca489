"""The super-step engines: a step is atomic, tries start afresh, a step means one thing (issue 24 items 6, 8-11).

Both super-step engines (the native parallel one for adopted graphs with forks and joins, and
the seed-002 model, `lab.graph(..., model="superstep")`) and the serial engine where item 10
concerns it. Each test's docstring names the issue item it holds the lab to.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import ReducerContext, reduce_list_append

from lab import CapabilityRequired, Lab, Retry, RunStateError, granted, interrupt
from lab.reducers import add, append, last
from tests.integration import superstep_worker

# -- item 6: a super-step commits in full or not at all --------------------------------------------


@dataclass
class Box:
    log: list[str] = field(default_factory=list)
    blob: Any = None


@dataclass
class Tally:
    """Counts the calls of each node across tries and steps (deps are never rolled back)."""

    counts: dict[str, int] = field(default_factory=dict)
    seen: list[list[str]] = field(default_factory=list)

    def enter(self, name: str) -> int:
        self.counts[name] = self.counts.get(name, 0) + 1
        return self.counts[name]


def model_with_a_bad_sibling(lab: Lab):
    g = lab.graph("atomic_model", state_type=Box, deps_type=Tally, model="superstep", reducers={"log": append, "blob": last})

    @g.step
    async def first(ctx: StepContext[Box, Tally, None]) -> dict[str, Any]:
        ctx.deps.enter("first")
        return {"log": ["first"]}

    @g.step
    async def good(ctx: StepContext[Box, Tally, None]) -> dict[str, Any]:
        ctx.deps.enter("good")
        return {"log": ["good"]}

    @g.step
    async def bad(ctx: StepContext[Box, Tally, None]) -> dict[str, Any]:
        if ctx.deps.enter("bad") == 1:
            return {"blob": object()}  # the codec refuses it: the state cannot be checkpointed
        return {"blob": "fine"}

    g.add(
        g.edge_from(g.start_node).to(first),
        g.edge_from(first).to(good, bad),
        g.edge_from(good).to(g.end_node),
        g.edge_from(bad).to(g.end_node),
    )
    return g


@pytest.mark.parametrize("where", [":memory:", "file"])
def test_a_model_step_whose_folded_state_cannot_be_stored_fails_as_a_whole(where: str, tmp_path) -> None:
    """Issue 24 item 6 (seed 002: "either a super-step committed in full or it did not happen"): a node
    returns a value the codec refuses while its sibling succeeds; the run fails at the last good
    checkpoint with a `failed` event naming the station and the value, the state is the head's, and
    run.retry() runs the step once."""
    lab = Lab(":memory:" if where == ":memory:" else os.fspath(tmp_path / "lab.duckdb"))
    tally = Tally()
    run = model_with_a_bad_sibling(lab).start(inputs=None, state=Box(), deps=tally)
    run.run()
    assert run.status == "failed"
    assert run.state.log == ["first"] and run.state.blob is None  # good's update was not kept
    # checkpoint 1 is the start's routing, 2 the step of `first`: the failed step wrote nothing
    assert run.head == 2 and lab.run(run.id).status == "failed" and lab.run(run.id).head_seq == 2
    failed = run.events("failed")
    assert len(failed) == 1 and failed[0].node_id == "bad" and failed[0].checkpoint_seq == 2
    message = failed[0].payload["message"]
    assert "station bad's update of field 'blob' cannot be checkpointed" in message and "object" in message
    assert failed[0].payload["type"] == "lab.errors.CheckpointValueError"
    assert set(run.next_stations) == {"good", "bad"}  # the whole step is still pending
    with pytest.raises(RunStateError, match="run.retry"):
        run.run()  # nothing applies the step a second time behind the person's back
    assert run.state.log == ["first"] and tally.counts == {"first": 1, "good": 1, "bad": 1}
    step = run.retry()
    assert set(step.tasks) == {"good", "bad"} and step.outcome == "done"
    assert run.status == "done" and run.state.log == ["first", "good"] and run.state.blob == "fine"
    assert tally.counts == {"first": 1, "good": 2, "bad": 2}
    if where == "file":
        again = Lab(os.fspath(tmp_path / "lab.duckdb"))
        model_with_a_bad_sibling(again)
        assert again.resume(run.id).state == Box(log=["first", "good"], blob="fine")
        again.close()


@dataclass
class Shelf:
    log: list[str] = field(default_factory=list)


def native_with_a_bad_sibling(calls: Tally):
    """start -> first -> (good | bad); bad's output feeds `use`, whose input must be an int."""
    g = GraphBuilder(state_type=Shelf, output_type=list[int])

    @g.step
    async def first(ctx: StepContext[Shelf, None, None]) -> int:
        ctx.state.log.append("first")
        return 1

    @g.step
    async def good(ctx: StepContext[Shelf, None, int]) -> int:
        calls.enter("good")
        ctx.state.log.append("good")
        return 10

    @g.step
    async def bad(ctx: StepContext[Shelf, None, int]) -> int:
        if calls.enter("bad") == 1:
            return object()  # type: ignore[return-value]  # use's input cannot be checkpointed as int
        return 20

    @g.step
    async def use(ctx: StepContext[Shelf, None, int]) -> int:
        return ctx.inputs + 1

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(first),
        g.edge_from(first).to(good, bad),
        g.edge_from(good).to(collect),
        g.edge_from(bad).to(use),
        g.edge_from(use).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g.build()


def test_a_parallel_step_whose_result_cannot_be_stored_fails_as_a_whole() -> None:
    """Issue 24 item 6 on the native parallel engine: a branch returns what the next task's input type
    refuses while its sibling mutates the state; nothing of the step is kept, the failure names
    the branch, and run.retry() runs the step once."""
    lab = Lab(":memory:")
    calls = Tally()
    run = lab.adopt(native_with_a_bad_sibling(calls), name="atomic_native").start(state=Shelf())
    run.run()
    assert run.status == "failed" and run.head == 2  # the start's routing, then `first`
    assert run.state.log == ["first"]  # good's in-place change was rolled back with the step
    failed = run.events("failed")
    assert len(failed) == 1 and failed[0].node_id == "bad"
    assert "station bad's output (the input of use) cannot be checkpointed" in failed[0].payload["message"]
    with pytest.raises(RunStateError, match="run.retry"):
        run.run()
    assert run.state.log == ["first"]
    run.retry()  # the step of good and bad, once
    assert calls.counts == {"good": 2, "bad": 2} and run.state.log == ["first", "good"]
    run.run()
    assert run.status == "done" and sorted(run.output) == [10, 21]


def test_a_parallel_step_whose_end_data_cannot_be_stored_names_the_branch_that_ended() -> None:
    """Issue 24 item 6: End data the output type refuses fails the step as a whole, naming the branch."""
    g = GraphBuilder(state_type=Shelf, output_type=int)

    @g.step
    async def slow(ctx: StepContext[Shelf, None, None]) -> int:
        ctx.state.log.append("slow")
        await asyncio.sleep(0.05)
        return 1

    @g.step
    async def quick(ctx: StepContext[Shelf, None, None]) -> int:
        ctx.state.log.append("quick")
        return "not an int"  # type: ignore[return-value]

    g.add(g.edge_from(g.start_node).to(slow, quick), g.edge_from(slow).to(g.end_node), g.edge_from(quick).to(g.end_node))
    lab = Lab(":memory:")
    run = lab.adopt(g.build(), name="bad_end").start(state=Shelf())
    run.run()
    assert run.status == "failed" and run.output is None and run.state.log == []
    failed = run.events("failed")
    assert len(failed) == 1 and failed[0].node_id == "quick"
    assert "station quick's End data cannot be checkpointed" in failed[0].payload["message"]
    assert not run.events("done") and lab.run(run.id).status == "failed"


def test_a_failed_parallel_step_leaves_the_heads_join_value_as_it_was() -> None:
    """Issue 24 item 6: a join's value in the head's frontier is not changed by a step that failed,
    so run.retry() reduces each branch once (the output is native's, not a branch counted twice)."""
    state = {"boom": True}

    def picky(current: list[int], inputs: int) -> list[int]:
        if inputs == 30 and state["boom"]:
            state["boom"] = False
            raise ValueError("not yet")
        return [*current, inputs]

    g = GraphBuilder(state_type=Shelf, output_type=list[int])

    @g.step
    async def spread(ctx: StepContext[Shelf, None, None]) -> list[int]:
        return [1, 2, 3]

    @g.step
    async def scale(ctx: StepContext[Shelf, None, int]) -> int:
        return ctx.inputs * 10

    @g.step
    async def later(ctx: StepContext[Shelf, None, int]) -> int:
        return ctx.inputs

    collect = g.join(picky, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(spread),
        g.edge_from(spread).map().to(scale),
        g.edge_from(scale).to(g.decision().branch(g.match(int, matches=lambda v: v == 10).to(collect)).branch(g.match(int).to(later))),
        g.edge_from(later).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    lab = Lab(":memory:")
    run = lab.adopt(g.build(), name="picky").start(state=Shelf())
    run.run()
    assert run.status == "failed" and "not yet" in run.error["message"]  # type: ignore[index]
    join = next(p for p in run.frontier if type(p).__name__ == "JoinAcc")
    assert join.value == [10] and join.arrived == 1  # as the head holds it
    run.retry()
    assert run.status == "done" and run.output == [10, 20, 30]


# -- item 8: every try of a retried node starts from the step's starting state ---------------------


@pytest.mark.parametrize("isolate", ["fanout", "always", "never"])
def test_a_model_nodes_tries_do_not_see_what_a_failed_try_changed(isolate: str) -> None:
    """Issue 24 item 8 (seed 003: tries run "on the same state", as the serial engine does): a failed
    try's in-place mutation is not seen by the next try, nor kept."""
    lab = Lab(":memory:")
    g = lab.graph(f"tries_{isolate}", state_type=Box, deps_type=Tally, model="superstep", reducers={"log": append}, isolate_state=isolate)

    @g.step(retry=Retry(max_attempts=3))
    async def flaky(ctx: StepContext[Box, Tally, None]) -> dict[str, Any]:
        n = ctx.deps.enter("flaky")
        ctx.deps.seen.append(list(ctx.state.log))
        if n < 3:
            ctx.state.log.append(f"try{n}")  # what seed 002 says not to do, then the try fails
            raise ConnectionError(f"try {n}")
        return {"log": ["ok"]}

    g.add(g.edge_from(g.start_node).to(flaky), g.edge_from(flaky).to(g.end_node))
    tally = Tally()
    run = g.start(inputs=None, state=Box(), deps=tally)
    run.run()
    assert run.status == "done", run.error
    assert tally.seen == [[], [], []]
    assert run.state.log == ["ok"] and len(run.events("retry")) == 2


# -- item 9: no pseudo-task in flight, no checkpoint that no step produced -------------------------


def test_a_model_run_paused_between_steps_is_not_read_as_interrupted(tmp_path) -> None:
    """Issue 24 item 9: a super-step-model run stepped once in a process that then exits normally is
    read by a fresh Lab as running (paused, resumable), not interrupted; resuming runs each node once."""
    db = os.fspath(tmp_path / "lab.duckdb")
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "superstep_worker.py")
    done = subprocess.run([sys.executable, worker, db], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().splitlines()[-1]
    lab = Lab(db)
    superstep_worker.declare(lab)
    record = lab.run(run_id)
    assert record.status == "running" and record.head_seq == 2, record  # the start's routing, then a
    assert not [e for e in lab.store.events(run_id) if e.kind == "interrupted"]
    entered = [e for e in lab.store.events(run_id) if e.kind == "entered"]
    settled = {e.attempt for e in lab.store.events(run_id) if e.kind == "settled"}
    assert [e.node_id for e in entered] == ["__start__", "a"] and all(e.attempt in settled for e in entered)
    run = lab.resume(run_id)
    run.run()
    assert run.status == "done" and run.state.log == ["a", "b"]
    lab.close()


def test_an_interrupting_model_node_writes_only_its_waiting_checkpoint() -> None:
    """Issue 24 item 9: a node that calls interrupt() parks the run with one waiting checkpoint; no
    `running` checkpoint is written that no step produced. The answer then finishes the run."""
    lab = Lab(":memory:")
    g = lab.graph("ask_model", state_type=Box, model="superstep", reducers={"log": append})

    @g.step
    async def ask(ctx: StepContext[Box, None, None]) -> dict[str, Any]:
        return {"log": [f"answer {interrupt('name?')}"]}

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    run = g.start(inputs=None, state=Box())
    run.run()
    assert run.status == "waiting"
    # the start's routing (a checkpoint with its settled event), then the wait: nothing in between
    assert [(cp.seq, cp.status) for cp in run.history()] == [(0, "created"), (1, "running"), (2, "waiting")]
    assert run.checkpoint(2).next_stations == ("ask",) and run.checkpoint(2).state == run.checkpoint(1).state
    run.resume_with("Ada")
    run.run()
    assert run.status == "done" and run.state.log == ["answer Ada"]
    settled = {e.checkpoint_seq for e in run.events("settled")}
    running = [cp.seq for cp in run.history() if cp.status == "running"]
    assert all(seq in settled for seq in running)  # every running checkpoint is a step's


def test_a_parallel_step_whose_branches_all_wait_writes_only_its_waiting_checkpoint() -> None:
    """Issue 24 item 9 on the native parallel engine: when every task of a step parks, the step settled
    nothing, so it writes no `running` checkpoint of its own: only the waiting one."""
    g = GraphBuilder(state_type=Shelf, output_type=list[str])

    @g.step
    async def left(ctx: StepContext[Shelf, None, None]) -> str:
        return "left " + interrupt("left?")

    @g.step
    async def right(ctx: StepContext[Shelf, None, None]) -> str:
        return "right " + interrupt("right?")

    both = g.join(reduce_list_append, initial_factory=list[str], node_id="both")
    g.add(g.edge_from(g.start_node).to(left, right), g.edge_from(left, right).to(both), g.edge_from(both).to(g.end_node))
    lab = Lab(":memory:")
    run = lab.adopt(g.build(), name="two_asks").start(state=Shelf())
    run.run()
    assert run.status == "waiting"
    assert [(cp.seq, cp.status) for cp in run.history()] == [(0, "created"), (1, "running"), (2, "waiting")]
    settled = {e.checkpoint_seq for e in run.events("settled")}
    assert all(cp.seq in settled for cp in run.history() if cp.status == "running")
    for wait in run.head_waits:
        run.resume_with(wait.node_id.upper(), owner=wait.owner)
    run.run()
    assert run.status == "done" and run.output == ["left LEFT", "right RIGHT"]


# -- item 10: a step is one super-step of stations that do work ------------------------------------


@dataclass
class Count:
    n: int = 0


def test_a_model_graph_runs_its_node_step_limit_times() -> None:
    """Issue 24 item 10: under step_limit=7 a looping super-step-model node runs 7 times, as under
    LangGraph's recursion_limit=7 (seed 002 counts super-steps of the frontier; the start is not one)."""
    lab = Lab(":memory:")
    g = lab.graph("model_loop", state_type=Count, model="superstep", reducers={"n": add})

    @g.step
    async def bump(ctx: StepContext[Count, None, None]) -> dict[str, Any]:
        return {"n": 1}

    g.add(
        g.edge_from(g.start_node).to(bump),
        g.edge_from(bump).to(
            g.decision().branch(g.match(Count, matches=lambda s: s.n >= 1000).to(g.end_node)).branch(g.match(Count).to(bump))
        ),
    )
    run = g.start(inputs=None, state=Count(), step_limit=7)
    run.run()
    assert run.status == "failed" and run.error["type"] == "lab.errors.StepLimitError"  # type: ignore[index]
    assert run.state.n == 7 and run.head == 8  # the start's routing is checkpointed, not counted
    stepped = g.start(inputs=None, state=Count())
    assert stepped.step().node_id == "bump" and stepped.state.n == 1  # step() runs a node, not the start


def serial_loop() -> Any:
    g = GraphBuilder(state_type=Count, output_type=int)

    @g.step
    async def inc(ctx: StepContext[Count, None, None]) -> int:
        ctx.state.n += 1
        return ctx.state.n

    g.add(
        g.edge_from(g.start_node).to(inc),
        g.edge_from(inc).to(
            g.decision()
            .branch(g.match(int, matches=lambda v: v >= 1000).to(g.end_node))
            .branch(g.match(int).transform(lambda ctx: None).to(inc))
        ),
    )
    return g.build()


def test_an_adopted_serial_graph_counts_stations_not_decisions() -> None:
    """Issue 24 item 10: on the serial engine a step is a station visit; the start and decisions are
    routing. 100 steps are 100 increments (not 50), and step() runs one increment each."""
    lab = Lab(":memory:")
    lg = lab.adopt(serial_loop(), name="serial_loop")
    run = lg.start(state=Count())
    run.run()  # the default limit, 100
    assert run.status == "failed" and run.error["type"] == "lab.errors.StepLimitError"  # type: ignore[index]
    assert run.state.n == 100
    stepped = lg.start(state=Count())
    for expected in (1, 2, 3):
        result = stepped.step()
        assert result.node_id == "inc" and stepped.state.n == expected
    stepped.run(max_steps=4)
    assert stepped.state.n == 7


def test_a_parallel_graph_counts_super_steps_of_work() -> None:
    """Issue 24 item 10 on the native parallel engine: the start's routing is not a step, so
    step_limit=1 runs the first station, and step() runs a super-step of work."""
    g = GraphBuilder(state_type=Shelf, output_type=list[int])

    @g.step
    async def spread(ctx: StepContext[Shelf, None, None]) -> list[int]:
        ctx.state.log.append("spread")
        return [1, 2, 3]

    @g.step
    async def square(ctx: StepContext[Shelf, None, int]) -> int:
        return ctx.inputs * ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(spread),
        g.edge_from(spread).map().to(square),
        g.edge_from(square).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    lab = Lab(":memory:")
    lg = lab.adopt(g.build(), name="spread")
    run = lg.start(state=Shelf(), step_limit=1)
    run.run()
    assert run.status == "failed" and run.state.log == ["spread"] and run.next_stations == ("square",) * 3
    first = lg.start(state=Shelf()).step()
    assert first.node_id == "spread"
    assert [e.node_id for e in lab.store.events(run.id) if e.kind == "entered"] == ["__start__", "spread"]


def test_a_model_step_that_waits_for_a_provided_capability_is_one_step() -> None:
    """Issue 24 item 10: a step that parked applied nothing, so it is not a step (as a serial park):
    step() on a node whose capability a provider grants runs that node, as on the serial engine."""
    lab = Lab(":memory:")
    lab.provide("gpu", lambda wait: "gpu-0")
    g = lab.graph("needs_gpu", state_type=Box, model="superstep", reducers={"log": append})

    @g.step
    async def probe(ctx: StepContext[Box, None, None]) -> dict[str, Any]:
        device = granted("gpu")
        if device is None:
            raise CapabilityRequired("gpu")
        return {"log": [f"ran on {device}"]}

    g.add(g.edge_from(g.start_node).to(probe), g.edge_from(probe).to(g.end_node))
    run = g.start(inputs=None, state=Box())
    result = run.step()
    assert result.node_id == "probe" and run.status == "done" and run.state.log == ["ran on gpu-0"]


# -- item 11: step() and run() give pydantic-graph's result for a reducer that reads state ---------


@dataclass
class Total:
    value: int = 0


def counting_join() -> Any:
    """Our own version of pydantic-graph's test_reducer_with_state_access: a join reducer that adds
    each item to the state and returns how many it reduced (its counter lives in its closure)."""
    reduced = 0

    def count_into_state(ctx: ReducerContext[Total, None], current: int, inputs: int) -> int:
        nonlocal reduced
        ctx.state.value += inputs
        reduced += 1
        return reduced

    g = GraphBuilder(state_type=Total, output_type=int)

    @g.step
    async def items(ctx: StepContext[Total, None, None]) -> list[int]:
        return [1, 2, 3]

    @g.step
    async def tenfold(ctx: StepContext[Total, None, int]) -> int:
        return ctx.inputs * 10

    counted = g.join(count_into_state, initial=0)
    g.add(
        g.edge_from(g.start_node).to(items),
        g.edge_from(items).map().to(tenfold),
        g.edge_from(tenfold).to(counted),
        g.edge_from(counted).to(g.end_node),
    )
    return g.build()


def reading_join() -> Any:
    """A join reducer that reads the state its branches wrote: its result depends on when it runs."""
    g = GraphBuilder(state_type=Total, output_type=int)

    def running_sum(ctx: ReducerContext[Total, None], current: int, inputs: int) -> int:
        ctx.state.value += inputs
        return current + ctx.state.value

    @g.step
    async def items(ctx: StepContext[Total, None, None]) -> list[int]:
        return [1, 2, 3]

    @g.step
    async def mark(ctx: StepContext[Total, None, int]) -> int:
        ctx.state.value += 100 * ctx.inputs  # no await: every branch is done before any result is reduced
        return ctx.inputs * 10

    summed = g.join(running_sum, initial=0)
    g.add(
        g.edge_from(g.start_node).to(items),
        g.edge_from(items).map().to(mark),
        g.edge_from(mark).to(summed),
        g.edge_from(summed).to(g.end_node),
    )
    return g.build()


def _three_ways(build: Any, lab: Lab, name: str) -> list[tuple[Any, Total]]:
    native_state = Total()
    native = asyncio.run(build().run(state=native_state))
    ran = lab.adopt(build(), name=f"{name}_run").start(state=Total())
    ran.run()
    stepped = lab.adopt(build(), name=f"{name}_step").start(state=Total())
    while stepped.status not in ("done", "failed"):
        stepped.step()
    return [(native, native_state), (ran.output, ran.state), (stepped.output, stepped.state)]


@pytest.mark.parametrize("build", [counting_join, reading_join], ids=["counting", "reading"])
def test_a_join_reducer_that_reads_state_gives_the_native_result_stepped_or_run(build: Any) -> None:
    """Issue 24 item 11: a join reducer with state access gives pydantic-graph's own result whether the
    run is stepped or run (each way builds its own graph: the counter lives in the reducer's closure)."""
    lab = Lab(":memory:")
    results = _three_ways(build, lab, build.__name__)
    assert results[0] == results[1] == results[2]
    if build is counting_join:
        assert results[0] == (3, Total(60))  # as pydantic-graph's test asserts
    else:
        assert results[0] == (1900, Total(660))
