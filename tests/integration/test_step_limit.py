"""Step limits (issue 13 requirement 1, seed 002 "Bounds and timeouts").

Scenarios: a graph that never reaches End stops at the default limit as `failed` with a
`StepLimitError` and its last checkpoint as the head; `run.run(step_limit=...)` and
`run.retry()` go on from there; a limit set per graph or per start is kept across a resume;
a parallel run counts one per super-step; a bad limit is refused by name.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import DEFAULT_STEP_LIMIT, ArgumentError, Lab, RevisionMismatchError, StepLimitError
from tests.integration import parallel_graphs as pg
from tests.integration.control_graphs import Laps, Spin, spinner


def test_a_graph_that_never_ends_stops_at_the_default_limit() -> None:
    """Seed 002: "step_limit (default 100) caps total super-steps, catching a graph that never
    reaches END." The run fails with a StepLimitError naming the limit and how to raise it, and
    the last checkpoint stays the head."""
    lab = Lab(":memory:")
    run = spinner(lab).start(Spin(), state=Laps())
    assert run.step_limit == DEFAULT_STEP_LIMIT == 100
    run.run()
    assert run.status == "failed"
    assert run.state.count == 100
    assert run.head == 100 and run.next_stations == ("Spin",)
    assert run.error is not None and run.error["type"] == "lab.errors.StepLimitError"
    assert "step_limit=100" in run.error["message"] and "run.run(step_limit=" in run.error["message"]
    assert lab.run(run.id).status == "failed" and lab.run(run.id).head_seq == 100
    failed = run.events("failed")
    assert len(failed) == 1 and failed[0].checkpoint_seq == 100 and failed[0].node_id == "Spin"


def test_run_with_a_higher_limit_or_retry_goes_on_from_the_head() -> None:
    """Issue 13: "the last checkpoint stays the head and run.run(step_limit=...) / retry can continue"."""
    lab = Lab(":memory:")
    run = spinner(lab).start(Spin(), state=Laps(), step_limit=3)
    run.run()
    assert (run.status, run.head, run.state.count) == ("failed", 3, 3)
    run.run(step_limit=5)
    assert (run.status, run.head, run.state.count) == ("failed", 8, 8)
    assert "step_limit=5" in run.error["message"]  # type: ignore[index]
    step = run.retry()
    assert step.outcome == "settled" and run.status == "running" and run.head == 9
    run.run(max_steps=2, step_limit=None)  # max_steps pauses quietly; no limit this call
    assert (run.status, run.head) == ("running", 11)
    kinds = [e.kind for e in run.events() if e.kind in ("failed", "resumed", "retry")]
    assert kinds == ["failed", "resumed", "failed", "retry"]


def test_limit_per_graph_and_per_start_is_kept_across_a_resume(db_path: str) -> None:
    """Issue 13: step_limit is "set per graph or per start(...)"; the run records it, so a resume
    in a fresh process (here a fresh Lab on the same file) keeps it."""
    lab = Lab(db_path)
    g = spinner(lab, step_limit=4)
    assert g.start(Spin(), state=Laps()).step_limit == 4
    run = g.start(Spin(), state=Laps(), step_limit=2)
    run.run()
    assert run.head == 2 and run.status == "failed"
    run_id = run.id
    lab.close()
    lab2 = Lab(db_path)
    spinner(lab2)  # the graph re-declared with the default limit: the run keeps its own
    again = lab2.resume(run_id)
    assert again.step_limit == 2
    again.run()
    assert (again.status, again.head) == ("failed", 4)
    lab2.close()


def test_no_limit_runs_a_long_graph_to_the_end() -> None:
    """`step_limit=None` is no limit: a graph that loops 150 times by design runs to End."""
    lab = Lab(":memory:")
    g = spinner(lab)
    run = g.start(Spin(), state=Laps(until=150), step_limit=None)
    run.run()
    assert run.status == "done" and run.output == 150
    exact = g.start(Spin(), state=Laps(until=100))  # End on the 100th step is within the default
    exact.run()
    assert exact.status == "done" and exact.output == 100


def test_a_parallel_run_counts_one_per_super_step() -> None:
    """Seed 002: the limit "caps total super-steps": a step of eight branches counts once."""
    lab = Lab(":memory:")
    lg = lab.adopt(pg.laps(), name="laps")
    run = lg.start(inputs=8, state=pg.Log())
    run.run(step_limit=3)
    # spread and two laps of work; the start's routing is checkpointed (1) but is not a step (issue 24 item 10)
    assert run.status == "failed" and run.head == 4
    assert run.error["type"] == "lab.errors.StepLimitError"  # type: ignore[index]
    assert len(run.next_stations) == 8  # the eight branches wait in the head's frontier
    run.run(step_limit=None)
    native_state = pg.Log()
    assert run.status == "done"
    assert run.output == asyncio.run(pg.laps().run(state=native_state, inputs=8))


def test_raise_on_failure_raises_the_step_limit_error() -> None:
    lab = Lab(":memory:")
    run = spinner(lab).start(Spin(), state=Laps(), step_limit=2)
    with pytest.raises(StepLimitError, match="step_limit=2") as info:
        run.run(raise_on_failure=True)
    assert info.value.limit == 2 and info.value.run_id == run.id
    assert run.status == "failed" and run.head == 2


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_a_bad_limit_is_refused_by_name(bad: object) -> None:
    lab = Lab(":memory:")
    g = spinner(lab)
    with pytest.raises(ArgumentError, match="step_limit="):
        g.start(Spin(), state=Laps(), step_limit=bad)  # type: ignore[arg-type]
    run = g.start(Spin(), state=Laps())
    with pytest.raises(ArgumentError, match="step_limit="):
        run.run(step_limit=bad)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="step_limit="):
        lab.graph("other", step_limit=bad)  # type: ignore[arg-type]
    assert run.status == "created" and run.head == 0


def test_a_changed_graph_is_refused_before_a_limited_run_goes_on() -> None:
    """Continuing after the limit checks the pinned revision first: a refusal changes nothing."""
    lab = Lab(":memory:")
    g = spinner(lab)
    run = g.start(Spin(), state=Laps(), step_limit=2)
    run.run()

    @g.node
    @dataclass
    class Extra(BaseNode[Laps, None, int]):
        async def run(self, ctx: GraphRunContext[Laps, None]) -> End[int]:
            return End(0)

    with pytest.raises(RevisionMismatchError):
        run.run(step_limit=5)
    assert run.status == "failed" and run.head == 2 and not run.events("resumed")
