"""A retry policy's backoff that is unusable, raises, or is interrupted (issue 24 item 14).

Scenarios: `Retry(backoff=nan / inf / negative)` (and such a `factor` or `max_backoff`) is refused
where it is declared; a backoff function that raises, or returns no usable number of seconds, is
recorded as the station's failure (the run `failed`, the error naming the function), serial and
parallel, and the lab keeps working; Ctrl-C during a backoff wait ends the run `interrupted` with
its event, as a Ctrl-C in the station does, and `run.retry()` goes on.
"""

from __future__ import annotations

import _thread
import math
import threading
import time
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from lab import ArgumentError, Lab, NodeExecutionError, Retry
from lab.errors import RetryPolicyError
from tests.integration.control_graphs import Laps, Prep, Script, flaky


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -0.5])
def test_a_backoff_that_is_no_number_of_seconds_is_refused_where_it_is_declared(bad: float) -> None:
    """Issue 24 item 14: `Retry(backoff=float("nan"))` (inf, negative) was accepted."""
    with pytest.raises(ArgumentError, match=r"Retry\(backoff=.*finite number >= 0"):
        Retry(backoff=bad)
    with pytest.raises(ArgumentError, match=r"Retry\(factor="):
        Retry(factor=bad)
    with pytest.raises(ArgumentError, match=r"Retry\(max_backoff="):
        Retry(max_backoff=bad)


def test_many_tries_with_a_large_factor_wait_the_cap() -> None:
    """`backoff * factor**n` overflows a float after enough tries: the cap applies instead of an error."""
    policy = Retry(max_attempts=5000, backoff=1.0, factor=10.0, max_backoff=2.5)
    assert policy.delay(4000) == 2.5
    assert Retry(max_attempts=5000, backoff=0.0, factor=10.0).delay(4000) == 0.0


def _raising_backoff(failed_tries: int) -> float:
    raise ZeroDivisionError("the backoff's own bug")


def _nan_backoff(failed_tries: int) -> float:
    return math.nan


@pytest.mark.parametrize(("backoff", "why"), [(_raising_backoff, "ZeroDivisionError"), (_nan_backoff, "returned nan")])
def test_a_backoff_function_that_fails_fails_the_station_by_name_and_the_lab_goes_on(backoff: Any, why: str) -> None:
    """Issue 24 item 14: a backoff function that raised escaped `run.run()` raw and left the run
    `running` with no error recorded."""
    lab = Lab(":memory:")
    g = flaky(lab, retry=Retry(max_attempts=3, backoff=backoff))
    run = g.start(Prep(), state=Laps(), deps=Script([ValueError("flaky tool")]))
    run.run()  # returns: the failure is recorded, not raised
    assert run.status == "failed" and run.head == 1 and run.state.log == ["prep"]
    err = run.error or {}
    assert err["type"] == "lab.errors.RetryPolicyError" and err["node_id"] == "Flaky"
    assert backoff.__name__ in err["message"] and why in err["message"] and "flaky tool" in err["message"]
    assert lab.run(run.id).status == "failed"
    (failed,) = run.events("failed")
    assert failed.node_id == "Flaky" and not run.events("retry")
    # raising, it is a NodeExecutionError naming the station; the lab keeps stepping other runs
    again = g.start(Prep(), state=Laps(), deps=Script([ValueError("flaky tool")]))
    with pytest.raises(RetryPolicyError) as info:
        again.run(raise_on_failure=True)
    assert isinstance(info.value, NodeExecutionError) and info.value.node_id == "Flaky" and info.value.run_id == again.id
    g.set_policy("Flaky", retry=Retry(max_attempts=2))
    fine = g.start(Prep(), state=Laps(), deps=Script([ValueError("flaky tool")]))
    assert fine.run().status == "done"
    run.retry()  # the person's retry goes on under the policy now in force
    assert run.status == "done"
    lab.close()


def test_a_parallel_branch_whose_backoff_function_raises_fails_its_step_by_name() -> None:
    g = GraphBuilder(state_type=Laps, input_type=list[int], output_type=list[int])

    @g.step
    async def work(ctx: StepContext[Laps, None, int]) -> int:
        if ctx.inputs == 2:
            raise ValueError("branch 2 broke")
        return ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(work), g.edge_from(work).to(collect), g.edge_from(collect).to(g.end_node))
    lab = Lab(":memory:")
    lg = lab.adopt(g.build(), name="fan", retry={"work": Retry(max_attempts=3, backoff=_raising_backoff)})
    run = lg.start(inputs=[1, 2, 3], state=Laps())
    run.run()
    assert run.status == "failed"
    err = run.error or {}
    assert err["type"] == "lab.errors.RetryPolicyError" and err["node_id"] == "work"
    assert "_raising_backoff" in err["message"] and "branch 2 broke" in err["message"]
    assert lab.run(run.id).status == "failed"
    lab.close()


def _ctrl_c_when(predicate: Any) -> threading.Thread:
    """Press Ctrl-C (SIGINT to the main thread, as the terminal or Jupyter's Interrupt does) once `predicate()`.

    Only then: a press after the deadline would land in whatever this worker runs next (a later test
    then sees a KeyboardInterrupt it never caused); without the press the test fails on its own."""

    def press() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if predicate():
                _thread.interrupt_main()
                return
            time.sleep(0.01)

    t = threading.Thread(target=press, daemon=True)
    t.start()
    return t


def test_ctrl_c_during_a_backoff_wait_ends_the_run_interrupted_with_its_event() -> None:
    """Issue 24 item 14: Ctrl-C during a backoff wait left the run `running` with no `interrupted` event."""
    assert threading.current_thread() is threading.main_thread()
    lab = Lab(":memory:")
    g = flaky(lab, retry=Retry(max_attempts=2, backoff=60.0))
    run = g.start(Prep(), state=Laps(), deps=Script([ValueError("flaky tool")]))
    presser = _ctrl_c_when(lambda: bool(run.events("retry")))
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run.run()
    presser.join(30)
    assert time.monotonic() - started < 30  # not the 60 s backoff
    assert run.status == "interrupted" and lab.run(run.id).status == "interrupted"
    kinds = [e.kind for e in run.events()]
    assert kinds[-3:] == ["entered", "retry", "interrupted"], kinds
    (ev,) = run.events("interrupted")
    assert ev.node_id == "Flaky" and ev.checkpoint_seq == 1 and "retry" in ev.payload["reason"]
    assert run.head == 1 and run.state.log == ["prep"]
    run.retry()  # like a Ctrl-C in the station: the station runs again (its script now succeeds)
    assert run.status == "done" and run.output == 1
    lab.close()
