"""The matrix's "SIGKILL and resume" column (issue 26 done-when 4): every kind survives a kill.

For every kind in `cases.KINDS`, a worker process (kill_worker.py, on a real DuckDB file) starts
the kind's ``slow`` run; once its slow station has started (the ``entered`` file exists) the test
SIGKILLs the worker, opens the same file itself, builds the same variant with the station
released, ``lab.resume(run_id)`` and runs it to ``case.expected("slow")``. Then the history
must show that the station in flight was marked interrupted and ran again (entered and settled
after the kill), and that nothing the killed process had settled was lost or changed: every
checkpoint it wrote is still there as it was, and every event it wrote is still there in order.

A delegated agent station is not in flight when it is killed: it handed its work to an agent job
and parked on a ``delegate`` wait. Its job, run by the killed process, is LOST and never
submitted again on its own (seed 001, docs/agents.md): the test makes the person's choice,
``run.job.retry()``, and the station runs again with the new job's result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lab import Lab
from lab.records import EventRecord

from .cases import KINDS, Slow, case_named

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kill_worker.py")

DEADLINE = 60.0
"""Seconds a worker gets to start its run and reach the slow station (sized for load 5)."""


def _until(what: Callable[[], bool], deadline: float) -> bool:
    end = time.monotonic() + deadline
    while not what():
        if time.monotonic() > end:
            return what()
        time.sleep(0.02)
    return True


def _kill_in_slow_station(kind: str, tmp: Path, *, timeout_first: float | None = None) -> tuple[str, str]:
    """Run the worker until its slow station starts, SIGKILL it; the run id and the database path.

    `timeout_first`: the worker first runs the run with that timeout (see kill_worker.py).
    """
    db, entered = tmp / "lab.duckdb", tmp / "entered"
    err_path = tmp / "worker.stderr"
    extra = [] if timeout_first is None else [str(timeout_first)]
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, WORKER, os.fspath(db), kind, os.fspath(entered), *extra],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        try:
            if timeout_first is not None:
                timed_out = tmp / "entered.timed-out"
                _until(lambda: timed_out.exists() or proc.poll() is not None, DEADLINE)
                assert timed_out.exists(), (
                    f"{kind}: the worker's first call never timed out: {err_path.read_text()}"
                )
            _until(lambda: entered.exists() or proc.poll() is not None, DEADLINE)
            if not entered.exists():
                state = "exited" if proc.poll() is not None else f"still running after {DEADLINE:.0f} s"
                pytest.fail(
                    f"{kind}: the worker never reached its slow station ({state}); its stderr:\n"
                    + err_path.read_text()[-4000:]
                )
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=DEADLINE)
            run_id = proc.stdout.readline().strip() if proc.stdout is not None else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=DEADLINE)
            if proc.stdout is not None:
                proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL, f"{kind}: the worker ended {proc.returncode} before the kill"
    assert run_id.startswith("run-"), f"{kind}: the worker printed {run_id!r}, not a run id"
    return run_id, os.fspath(db)


_SETTLES = ("settled", "failed", "interrupted", "cancelled", "waiting", "dropped", "retry")


def _open_attempts(events: list[EventRecord]) -> dict[int, str]:
    """Attempts entered and never settled (by any settlement), by attempt: node id."""
    open_: dict[int, str] = {}
    for e in events:
        if e.attempt is None:
            continue
        if e.kind == "entered":
            open_[e.attempt] = e.node_id or "?"
        elif e.kind in _SETTLES:
            open_.pop(e.attempt, None)
    return open_


def _delegate_wait(left: Any) -> Any:
    """The run's open wait when it parks on a delegated agent job (a `delegate` wait), else None."""
    if left.status != "waiting":
        return None
    waits = [w for w in left.waits() if w.resolved_at is None and w.kind == "delegate"]
    return waits[-1] if waits else None


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_in_the_slow_station_then_resume_in_another_process(kind: str, tmp_path: Path) -> None:
    """Issue 26 done-when 4, "SIGKILL and resume": the killed station runs again, nothing settled is lost."""
    case = case_named(kind)
    run_id, db = _kill_in_slow_station(kind, tmp_path)
    release = tmp_path / "release"
    release.write_text("go")
    with Lab(db) as lab:
        left = lab.read(run_id)  # what the killed process left, read before anything runs
        killed_history = list(left.history(all_branches=True))
        killed_events = left.events()
        killed_head = left.history()[-1]
        left_open = _open_attempts(killed_events)
        assert not left_open, (
            f"{kind}: attempts in flight at the kill are not marked interrupted (a super-step has several): "
            f"{left_open}"
        )
        delegated = _delegate_wait(left)
        if delegated is not None:  # the station handed its work to an agent job and parked durably
            in_flight = {delegated.node_id}
        else:
            assert left.status == "interrupted", (
                f"{kind}: a run whose process died mid-station reads {left.status!r}"
            )
            in_flight = {e.node_id for e in killed_events if e.kind == "interrupted"}
            assert in_flight, (
                f"{kind}: no station was marked interrupted; events: {[e.kind for e in killed_events]}"
            )

        graph = case.build(lab, "slow", slow=Slow(release=os.fspath(release)))
        run = lab.resume(run_id)
        if delegated is not None:
            # its job ran in the killed process: LOST, never submitted again on its own (docs/agents.md);
            # a new request is the person's act
            assert run.job is not None and run.job.status == "LOST", (kind, run.job)
            run.job.retry()
        run.run()
        assert run.status == "done", (kind, run.status, run.error)
        assert run.output == case.expected("slow")

        # nothing the killed process settled was lost or changed
        now = {cp.seq: cp for cp in run.history(all_branches=True)}
        for cp in killed_history:
            assert now.get(cp.seq) == cp, (
                f"{kind}: checkpoint {cp.seq} changed or went missing after the resume"
            )
        assert killed_head.seq in {cp.seq for cp in run.history()}, "the run went on from where it was killed"
        events = run.events()
        assert events[: len(killed_events)] == killed_events, (
            f"{kind}: events written before the kill changed"
        )

        # the interrupted station ran again: entered and settled after the kill
        after = events[len(killed_events) :]
        for node_id in in_flight:
            entered = [e for e in after if e.kind == "entered" and e.node_id == node_id]
            settled_attempts = {e.attempt for e in after if e.kind == "settled" and e.node_id == node_id}
            assert entered, f"{kind}: the interrupted station {node_id!r} did not run again"
            assert any(e.attempt in settled_attempts for e in entered), (
                f"{kind}: the interrupted station {node_id!r} ran again but did not settle"
            )
        assert graph is not None


def test_a_kill_after_a_timed_out_super_step_marks_only_what_was_in_flight(tmp_path: Path) -> None:
    """Issue 26 done-when 4 (SIGKILL and resume, parallel): a timeout cancels a super-step of three
    branches, the run goes on and is killed in the same step: the lab that opens the store marks the
    three attempts then in flight interrupted, none of the cancelled call's (before, only the last
    attempt of the step was marked: the slow branch's showed as never settled)."""
    run_id, db = _kill_in_slow_station("parallel", tmp_path, timeout_first=0.5)
    with Lab(db) as lab:
        left = lab.read(run_id)
        assert left.status == "interrupted"
        events = left.events()
        stop = max(e.seq for e in events if e.kind == "failed")  # the RunTimeout
        again = [e for e in events if e.kind == "entered" and e.seq > stop]
        marks = [e for e in events if e.kind == "interrupted"]
        assert sorted(e.attempt for e in marks) == sorted(e.attempt for e in again)
        assert [e.payload.get("task") for e in again] == [e.payload.get("task") for e in marks]
        assert {e.node_id for e in marks} == {"work"} and len(marks) == 3
        assert all(e.checkpoint_seq == left.head for e in marks)
