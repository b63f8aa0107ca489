"""Seed 002 "Bounds": a run's total step limit across calls, beside the per-call one (issue 30)."""

from __future__ import annotations

import pytest

from lab import Lab
from lab.errors import StepLimitError
from tests.conftest import Counter, Inc, declare_counter


def test_step_limit_caps_each_call_and_total_step_limit_caps_the_run(db_path):
    """Seed 002: "step_limit (default 100) caps total super-steps, catching a graph that never
    reaches END." The lab's `step_limit` caps one call (a second call goes on); `total_step_limit`
    caps the run's steps across calls, a restart and a resume: reaching it fails the run with a
    StepLimitError naming the total, at its last checkpoint, and later calls take no more steps."""
    lab = Lab(db_path)
    g = declare_counter(lab)
    per_call = g.start(Inc(by=2), state=Counter())  # 6 steps to End
    per_call.run(step_limit=4)
    assert (per_call.status, per_call.steps_taken()) == ("failed", 4)
    assert per_call.run(step_limit=4).status == "done"  # per call: the next call goes on

    run = g.start(Inc(by=2), state=Counter(), total_step_limit=5)
    run.run(max_steps=2)
    run.step()
    assert (run.status, run.steps_taken()) == ("running", 3)
    with pytest.raises(StepLimitError, match=r"total step limit: 5 steps .*total_step_limit=5, across every call") as caught:
        run.run(raise_on_failure=True)
    assert caught.value.limit == 5
    assert (run.status, run.steps_taken(), run.head, run.state.count) == ("failed", 5, 5, 6)
    with pytest.raises(StepLimitError, match="total step limit"):
        run.run(step_limit=50, raise_on_failure=True)  # a higher per-call limit does not lift the total
    assert run.head == 5
    lab.close()

    again = Lab(db_path)  # a restart: the total and the count come from the store
    declare_counter(again)
    resumed = again.resume(run.id)
    assert resumed.limits.total_step_limit == 5 and resumed.steps_taken() == 5
    with pytest.raises(StepLimitError, match="total step limit"):
        resumed.step(raise_on_failure=True)
    assert resumed.head == 5
    resumed.rewind(3)  # a rewound branch has fewer steps behind it: the run goes on within its total
    assert resumed.steps_taken() == 3
    resumed.run(max_steps=1)
    assert (resumed.status, resumed.steps_taken()) == ("running", 4)
    again.close()
