"""Timeouts (issue 13 requirement 2, seed 002 "Bounds and timeouts").

Scenarios: a whole-run `timeout=` cancels the step in flight and fails the run with
`RunTimeout` at its last checkpoint, and `run.run()` resumes from there; the run's own timeout
(`g.start(timeout=...)`) is kept across a resume; a parallel step is cancelled whole; a node that
blocks its thread, declared `blocking=True`, is stopped by the timeout and by Cancel while
another run keeps stepping (in a subprocess, which then exits although the node still blocks).
The per-station timeout is in test_retry.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from lab import ArgumentError, Lab, RunTimeout
from tests.integration.control_graphs import Laps, Prep, Script, flaky


def test_a_whole_run_timeout_cancels_the_step_in_flight_and_the_run_resumes_from_its_head() -> None:
    """Seed 002: "A whole-run timeout on invoke cancels the in-flight step and raises RunTimeout;
    because the previous step is already checkpointed, a checkpointed run resumes from there."""
    lab = Lab(":memory:")
    g = flaky(lab)
    script = Script(["sleep", None])
    run = g.start(Prep(), state=Laps(), deps=script)
    run.run(timeout=0.3)
    assert run.status == "failed" and run.error["type"] == "lab.errors.RunTimeout"  # type: ignore[index]
    assert run.error["node_id"] == "Flaky" and "timeout of 0.3 s" in run.error["message"]  # type: ignore[index]
    assert run.head == 1 and run.state.log == ["prep"]  # Prep's checkpoint; Flaky's change is dropped
    (failed,) = run.events("failed")
    entered = [e for e in run.events("entered") if e.node_id == "Flaky"]
    assert failed.attempt == entered[-1].attempt and failed.checkpoint_seq == 1
    run.run()  # resumes from checkpoint 1: Flaky runs again, this time without sleeping
    assert run.status == "done" and run.state.log == ["prep", "try 2"]
    assert [e.kind for e in run.events() if e.kind in ("failed", "resumed")] == ["failed", "resumed"]


def test_raise_on_failure_raises_run_timeout() -> None:
    lab = Lab(":memory:")
    run = flaky(lab).start(Prep(), state=Laps(), deps=Script(["sleep"]))
    with pytest.raises(RunTimeout) as info:
        run.run(timeout=0.2, raise_on_failure=True)
    assert info.value.timeout == 0.2 and run.status == "failed"


def test_the_runs_own_timeout_is_kept_across_a_resume(db_path: str) -> None:
    lab = Lab(db_path)
    run = flaky(lab).start(Prep(), state=Laps(), deps=Script(["sleep", "sleep"]), timeout=0.2)
    assert run.timeout == 0.2
    run.run()
    assert run.error["type"] == "lab.errors.RunTimeout"  # type: ignore[index]
    run_id = run.id
    lab.close()
    lab2 = Lab(db_path)
    flaky(lab2)
    again = lab2.resume(run_id, deps=Script(["sleep"]))
    assert again.timeout == 0.2
    again.run()
    assert again.status == "failed" and again.error["type"] == "lab.errors.RunTimeout"  # type: ignore[index]
    again.run(timeout=30)  # a longer one for this call
    assert again.status == "done"
    lab2.close()


def test_a_parallel_step_is_cancelled_whole() -> None:
    """The in-flight super-step is cancelled: no branch's result is kept, the head is the last step."""
    g = GraphBuilder(state_type=Laps, input_type=list[int], output_type=list[int])

    @g.step
    async def work(ctx: StepContext[Laps, None, int]) -> int:
        ctx.state.count += 1
        if ctx.inputs == 3:
            await asyncio.sleep(60)
        return ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(work), g.edge_from(work).to(collect), g.edge_from(collect).to(g.end_node))
    lab = Lab(":memory:")
    run = lab.adopt(g.build(), name="fan").start(inputs=[1, 2, 3], state=Laps())
    run.run(timeout=0.3)  # the start's routing is checkpointed (1, not a step); the three work tasks time out
    assert run.status == "failed" and run.error["type"] == "lab.errors.RunTimeout"  # type: ignore[index]
    assert run.head == 1 and run.state.count == 0 and len(run.next_stations) == 3


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "1", True])
def test_a_bad_timeout_is_refused_by_name(bad: Any) -> None:
    lab = Lab(":memory:")
    g = flaky(lab)
    with pytest.raises(ArgumentError, match="timeout="):
        g.start(Prep(), state=Laps(), deps=Script([]), timeout=bad)
    run = g.start(Prep(), state=Laps(), deps=Script([]))
    with pytest.raises(ArgumentError, match="timeout="):
        run.run(timeout=bad)
    assert run.status == "created"


WORKER = Path(__file__).with_name("blocking_worker.py")


@pytest.mark.slow
def test_a_blocking_node_is_stopped_by_timeout_and_by_cancel_while_another_run_keeps_stepping(tmp_path: Path) -> None:
    """Issue 13: "A node that blocks the thread (time.sleep loop) cannot be cancelled by asyncio:
    run such nodes so that the timeout and cancel() still return control to the caller within a
    second and other runs in the kernel keep stepping". The worker's node loops on time.sleep for
    good; the bound on returning is generous (the machine is loaded), the measured times are
    printed in the report."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(WORKER), os.fspath(tmp_path / "lab.duckdb")],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    timed, cancelled = report["timeout"], report["cancel"]
    assert timed["returned"] and "raised" not in timed
    assert (timed["status"], timed["error"], timed["head"], timed["state_n"]) == ("failed", "lab.errors.RunTimeout", 0, 0)
    assert timed["ticks_meanwhile"] > 0  # the other run settled steps while the stuck one was in flight
    assert timed["seconds"] < 10
    assert cancelled["returned"] and "raised" not in cancelled and cancelled["status"] == "cancelled"
    assert cancelled["ticks_meanwhile"] == 5 and cancelled["seconds_after_cancel"] < 10
    assert report["stuck_threads"] == 2  # the stuck nodes still block their own threads; the process exits anyway


def test_blocking_stations_run_on_their_own_thread_declared_stepwise_or_adopted_by_name() -> None:
    """`@g.node(blocking=True)`, `@g.step(blocking=True)` and `lab.adopt(..., blocking=[...])` run
    the station on a thread of its own; the graph's types still resolve through the wrapper."""
    import threading
    import time

    lab = Lab(":memory:")
    g = lab.graph("stepwise", state_type=Laps, input_type=int, output_type=int)

    @g.step(blocking=True)
    async def slow(ctx: StepContext[Laps, None, int]) -> int:
        time.sleep(0.01)
        ctx.state.log.append(threading.current_thread().name)
        return ctx.inputs + 1

    g.add(g.edge_from(g.start_node).to(slow), g.edge_from(slow).to(g.end_node))
    run = g.start(inputs=1)
    run.run()
    assert run.status == "done" and run.output == 2 and run.state.log[0].startswith("graphlab-blocking-")

    native = GraphBuilder(state_type=Laps, input_type=list[int], output_type=list[int])

    @native.step
    async def work(ctx: StepContext[Laps, None, int]) -> int:
        time.sleep(0.01)
        ctx.state.log.append(threading.current_thread().name)
        return ctx.inputs

    collect = native.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    native.add(native.edge_from(native.start_node).map().to(work), native.edge_from(work).to(collect), native.edge_from(collect).to(native.end_node))
    lg = lab.adopt(native.build(), name="fan", blocking=["work"])
    run = lg.start(inputs=[1, 2, 3], state=Laps())
    run.run()
    assert run.status == "done" and sorted(run.output) == [1, 2, 3]
    assert len(run.state.log) == 3 and all(n.startswith("graphlab-blocking-") for n in run.state.log)
    lg.set_policy("work", blocking=False)  # back on the loop
    run = lg.start(inputs=[1], state=Laps())
    run.run()
    assert run.state.log == ["graphlab-loop"]
