"""Failures that surface (issue 13 requirement 4, seed 003 "Failures and retries").

Scenarios: by default a failed `run.run()` returns and shows the failed run; with
`raise_on_failure=True` (per call, or lab-wide) it raises `NodeExecutionError` carrying the
station, the attempt and the original exception, chained; the failure is recorded first, so
the run is the same either way; a call's own setting wins over the lab's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from lab import EdgeConditionError, Lab, NodeExecutionError, ReducerError
from tests.integration.control_graphs import Laps, Ok, failing


def test_default_shows_the_failed_run_without_raising() -> None:
    """Issue 13: "the default in a notebook stays 'show the failed run'"."""
    lab = Lab(":memory:")
    run = failing(lab).start(Ok(), state=Laps())
    assert run.run() is run
    assert run.status == "failed" and run.error["node_id"] == "Boom"  # type: ignore[index]


def test_raise_on_failure_raises_node_execution_error_with_node_attempt_and_cause() -> None:
    """Seed 003: "If a node fails, the other nodes of that step are cancelled and the failure is
    rethrown as NodeExecutionException." The lab's NodeExecutionError names the node and the
    attempt, and chains the original exception."""
    lab = Lab(":memory:")
    run = failing(lab).start(Ok(), state=Laps())
    with pytest.raises(NodeExecutionError, match="station Boom failed") as info:
        run.run(raise_on_failure=True)
    err = info.value
    assert err.node_id == "Boom" and err.run_id == run.id
    entered = [e for e in run.events("entered") if e.node_id == "Boom"]
    assert err.entered_seq == entered[-1].attempt == run.error["entered_seq"]  # type: ignore[index]
    assert err.attempt == run.error["attempt"] == 1  # the first try (issue 25 item 6)  # type: ignore[index]
    assert isinstance(err.__cause__, ValueError) and err.original is err.__cause__
    assert str(err.__cause__) == "the tool said no"
    # recorded before it was raised: the head and the state are the last good checkpoint's
    assert run.status == "failed" and lab.run(run.id).status == "failed"
    assert run.state.log == ["ok"] and run.head == 1


def test_a_lab_wide_setting_makes_every_call_raise_and_a_call_can_opt_out() -> None:
    """Issue 13: "run.run(raise_on_failure=True) and a lab-wide setting raise NodeExecutionError"."""
    lab = Lab(":memory:", raise_on_failure=True)
    g = failing(lab)
    run = g.start(Ok(), state=Laps())
    assert run.step().outcome == "settled"
    with pytest.raises(NodeExecutionError) as first:
        run.step()
    with pytest.raises(NodeExecutionError) as again:
        run.retry()
    assert again.value.attempt is not None and again.value.attempt > first.value.attempt  # type: ignore[operator]
    quiet = g.start(Ok(), state=Laps())
    quiet.run(raise_on_failure=False)
    assert quiet.status == "failed"
    lab.raise_on_failure = False
    loud = g.start(Ok(), state=Laps())
    with pytest.raises(NodeExecutionError):
        loud.run(raise_on_failure=True)


def test_the_async_forms_raise_too() -> None:
    lab = Lab(":memory:")
    run = failing(lab).start(Ok(), state=Laps())

    async def drive() -> None:
        await run.arun(raise_on_failure=True)

    with pytest.raises(NodeExecutionError) as info:
        asyncio.run(drive())
    assert isinstance(info.value.__cause__, ValueError)


def test_a_bad_setting_is_refused() -> None:
    from lab import ArgumentError

    with pytest.raises(ArgumentError, match="raise_on_failure"):
        Lab(":memory:", raise_on_failure="yes")  # type: ignore[arg-type]


def test_every_lab_of_one_file_shares_the_setting(db_path: str) -> None:
    """`Lab()` twice in a notebook is one lab (its graphs and runs are shared): so is the setting."""
    first = Lab(db_path)
    g = failing(first)
    second = Lab(db_path)
    second.raise_on_failure = True
    assert first.raise_on_failure is True
    with pytest.raises(NodeExecutionError):
        g.start(Ok(), state=Laps()).run()  # the run's lab is `first`
    assert Lab(db_path).raise_on_failure is True  # opening again without saying keeps it
    first.close()


def _fan(reducer: Any = None, matches: Any = None) -> Any:
    g = GraphBuilder(state_type=Laps, input_type=list[int], output_type=list[int])

    @g.step
    async def work(ctx: StepContext[Laps, None, int]) -> int:
        return ctx.inputs

    collect = g.join(reducer or reduce_list_append, initial_factory=list[int], node_id="collect")
    if matches is None:
        g.add(g.edge_from(g.start_node).map().to(work), g.edge_from(work).to(collect))
    else:
        g.add(
            g.edge_from(g.start_node).map().to(work),
            g.edge_from(work).to(g.decision(node_id="route").branch(g.match(int, matches=matches).to(collect))),
        )
    g.add(g.edge_from(collect).to(g.end_node))
    return g.build()


def test_a_raising_reducer_is_a_reducer_error_naming_the_join() -> None:
    """Seed 003: "A failure of the reducer or of the condition of an edge is rethrown as
    ReducerException or EdgeConditionException." The lab's errors name the join or the edge."""

    def picky(current: list[int], item: int) -> list[int]:
        if item == 2:
            raise ValueError("no twos")
        return [*current, item]

    lab = Lab(":memory:")
    run = lab.adopt(_fan(reducer=picky), name="picky").start(inputs=[1, 2, 3], state=Laps())
    with pytest.raises(ReducerError, match="join collect") as info:
        run.run(raise_on_failure=True)
    assert info.value.node_id == "collect" and isinstance(info.value.__cause__, ValueError)
    assert info.value.run_id == run.id
    assert run.status == "failed" and run.error["type"] == "lab.errors.ReducerError"  # type: ignore[index]
    assert run.error["node_id"] == "collect"  # type: ignore[index]


def test_a_raising_edge_condition_is_an_edge_condition_error_naming_the_decision() -> None:
    def shaky(value: int) -> bool:
        raise KeyError("lookup failed")

    lab = Lab(":memory:")
    run = lab.adopt(_fan(matches=shaky), name="shaky").start(inputs=[1], state=Laps())
    run.run()
    assert run.status == "failed" and run.error["type"] == "lab.errors.EdgeConditionError"  # type: ignore[index]
    assert "decision route" in run.error["message"]  # type: ignore[index]
    with pytest.raises(EdgeConditionError) as info:  # a NodeExecutionError that names the edge
        run.retry(raise_on_failure=True)
    assert isinstance(info.value.__cause__, KeyError)
    assert (info.value.run_id, info.value.node_id) == (run.id, "work")  # the task whose result it routed
