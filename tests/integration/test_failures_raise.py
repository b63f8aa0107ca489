"""Failures that surface (issue 13 requirement 4, seed 003 "Failures and retries").

Scenarios: by default a failed `run.run()` returns and shows the failed run; with
`raise_on_failure=True` (per call, or lab-wide) it raises `NodeExecutionError` carrying the
station, the attempt and the original exception, chained; the failure is recorded first, so
the run is the same either way; a call's own setting wins over the lab's.
"""

from __future__ import annotations

import asyncio

import pytest

from lab import Lab, NodeExecutionError
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
    assert err.attempt == entered[-1].attempt == run.error["attempt"]  # type: ignore[index]
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
