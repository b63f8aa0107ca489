"""A stopped super-step names the branch that was in flight (issue 26 done-when 4, parallel kind).

A timeout (or a cancel) stops a step whose siblings already returned while one branch still
runs. The run's `failed` event carries one attempt: it must be that of the branch still running,
not the step's first task (which had finished: before, a timeout in item 2's branch of the
matrix's parallel graph named item 1's attempt).
"""

from __future__ import annotations

import os

from lab import Lab
from lab.engine.tasks import Task
from tests.matrix.cases import Slow, case_named
from tests.matrix.k_parallel import STATION_ITEM


def test_a_timed_out_super_step_names_the_branch_still_running(tmp_path):
    """Issue 26 done-when 4: the RunTimeout's failed event is the slow branch's attempt."""
    case = case_named("parallel")
    release = tmp_path / "release"
    with Lab(os.fspath(tmp_path / "lab.duckdb")) as lab:
        run = case.start(case.build(lab, "slow", slow=Slow(release=os.fspath(release))))
        run.run(timeout=0.5)
        assert run.status == "failed" and run.error["type"].endswith("RunTimeout"), run.error
        slow = next(t for t in run.checkpoint(run.head).next if isinstance(t, Task) and t.inputs == STATION_ITEM)
        entered = {e.payload.get("task"): e.attempt for e in run.events("entered") if e.node_id == "work"}
        (failed,) = run.events("failed")
        assert failed.attempt == entered[slow.task_id], (failed, entered, slow)
        release.write_text("go")
        run.run()
        assert (run.status, run.output) == ("done", case.expected("slow"))
