"""Delegated jobs in worker subprocesses: a SIGKILLed worker makes the job LOST and nothing is repeated
until a person chooses; a kernel killed while its worker runs gets the result adopted on reopen.

Docstrings quote seed 001 "Delegated Agent Macro-Nodes" and "Live and Durable Stasis". Processes are
really killed (SIGKILL); agents are pydantic-ai on FunctionModel (tests/agents/agent_defs.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lab import Lab
from lab.agents import AgentJobStateError, AgentResultError
from lab.agents.files import JobFiles

from .graphs import declare

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _until(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def _worker_pid(lab, job) -> int:
    folder = Path(lab.agents.folder) / job.request_id
    _until(lambda: (folder / "worker.json").exists())
    return int(json.loads((folder / "worker.json").read_text())["pid"])


def _start_lost(lab) -> tuple:
    """A run whose worker is SIGKILLed while the agent works: its job ends LOST."""
    g = declare(lab, runtime="slow-worker")
    run = g.start(g.nodes["Outline"]())
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    os.kill(_worker_pid(lab, run.job), signal.SIGKILL)
    t.join(30)
    assert not t.is_alive()
    return run, run.job


def test_sigkilled_worker_is_lost_and_never_repeated_until_a_person_retries(lab, release):
    """ "LOST records indeterminate external truth and never authorizes automatic repetition." The run
    waits; run.run() refuses; the person's retry is a new request id, and the run goes on."""
    run, lost = _start_lost(lab)
    assert lost.status == "LOST" and "killed by signal 9" in lost.error["message"]
    assert run.status == "waiting" and run.wait.kind == "delegate"
    with pytest.raises(AgentJobStateError, match="is LOST.*never submitted again on its own"):
        run.run()
    assert len(lab.agents.jobs(run_id=run.id)) == 1  # nothing was submitted again
    release.touch()
    again = run.job.retry()
    assert again.request_id == f"{lost.request_id}.r2" and again.record.retry_of == lost.request_id
    run.run()
    assert run.status == "done" and run.output == "Slow: done"
    assert [j.status for j in lab.agents.jobs(run_id=run.id)] == ["LOST", "SUCCEEDED"]
    assert lab.sql("select count(*) from job_events where kind = 'retried'").fetchall() == [(1,)]


def test_a_person_provides_the_result_of_a_lost_job(lab, release):
    """The person may supply the result by hand instead: the job stays LOST (its truth is unknown), the
    station routes the provided result, validated against its result type."""
    run, lost = _start_lost(lab)
    with pytest.raises(AgentJobStateError, match="not LOST"):
        lab.agents.submit("other", "planner", {"prompt": "x"}).wait().provide({"title": "t", "points": []})
    with pytest.raises(AgentResultError, match="does not fit its result type Plan"):
        lost.provide({"title": "no points"})  # checked before anything is recorded
    assert run.wait.resolution is None and "provided" not in [e.kind for e in lost.events()]
    lost.provide({"title": "By hand", "points": ["typed", "in"]}, note="I wrote it")
    run.run()
    assert run.status == "done" and run.output == "By hand: typed, in"
    assert lost.status == "LOST" and [e.kind for e in lost.events()][-1] == "provided"
    assert run.waits()[0].resolution["by"] == "person"


def test_cancel_of_a_lost_job_contains_then_records_lost_to_cancelled(lab, release):
    """ "Explicit cancellation still contains the owning runtime and may record LOST → CANCELLED only
    after containment returns, as required by Workers." """
    run, lost = _start_lost(lab)
    lost.cancel()
    assert lost.transitions()[-3:] == ["LOST", "CANCELLING", "CANCELLED"]
    run.run()
    assert run.status == "failed" and "ended CANCELLED" in run.error["message"]

    # a running worker is killed (contained) before CANCELLED is recorded
    g = declare(lab, runtime="slow-worker", name="second")
    run2 = g.start(g.nodes["Outline"]())
    t = threading.Thread(target=run2.run)
    t.start()
    _until(lambda: run2.job is not None and run2.job.status == "RUNNING")
    pid = _worker_pid(lab, run2.job)
    run2.job.cancel()
    t.join(30)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the worker is gone (reaped)
    assert run2.job.status == "CANCELLED" and run2.status == "failed"


def test_kernel_killed_while_its_worker_runs_result_adopted_on_reopen(tmp_path, release):
    """ "Durable Stasis exits the worker after mandatory checkpoint and re-enters by a new queue claim."
    and "Re-entry reads terminal attempt truth and dispatches afresh; it never resumes a Connector, grant,
    provider SDK object, or process handle." The kernel dies, the worker finishes, the reopened lab adopts
    its result from the job folder, and the run continues."""
    path = tmp_path / "lab.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    kernel = subprocess.Popen(
        [sys.executable, "-m", "tests.agents.kernel_script", str(path)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = kernel.stdout.readline()
        assert line, kernel.stderr.read()
        run_id, request_id = line.split()
    finally:
        kernel.kill()
        kernel.communicate()
    result = Path(str(path) + ".jobs") / request_id / "result.json"
    assert not result.exists()
    release.touch()  # the worker outlived its kernel: it finishes now
    _until(lambda: result.exists())
    with Lab(path) as lab:
        job = lab.agents.job(request_id)
        assert job.status == "SUCCEEDED" and job.output == {"title": "Slow", "points": ["done"]}  # adopted on open
        assert job.events()[-1].payload == {"by": "worker"}
        before = len(job.events())
        lab.agents._ingest(request_id, JobFiles(result.parent), 0)  # as a second process following it would
        assert len(job.events()) == before  # every progress line is recorded once
        declare(lab, runtime="slow-worker")
        lab.agents.register("slow-worker", target="tests.agents.agent_defs:slow_planner", runner="subprocess")
        run = lab.resume(run_id)
        run.run()
        assert run.status == "done" and run.output == "Slow: done"
        assert len(lab.agents.jobs(run_id=run_id)) == 1  # adopted, not submitted again


def test_kernel_killed_and_its_worker_too_the_job_is_lost_on_reopen(tmp_path, release):
    """ "Unknown external effect remains contained rather than being repeated." A worker that died with
    its kernel leaves no result: the reopened lab records LOST and waits for a person."""
    path = tmp_path / "lab.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    kernel = subprocess.Popen(
        [sys.executable, "-m", "tests.agents.kernel_script", str(path)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        run_id, request_id = kernel.stdout.readline().split()
        worker = json.loads((Path(str(path) + ".jobs") / request_id / "worker.json").read_text())
        os.kill(worker["pid"], signal.SIGKILL)
    finally:
        kernel.kill()
        kernel.communicate()
    with Lab(path) as lab:
        job = lab.agents.job(request_id)
        assert job.status == "LOST" and "gone and left no result" in job.error["message"]
        declare(lab, runtime="slow-worker")
        lab.agents.register("slow-worker", target="tests.agents.agent_defs:slow_planner", runner="subprocess")
        run = lab.resume(run_id)
        with pytest.raises(AgentJobStateError, match="LOST"):
            run.run()
        assert run.status == "waiting" and len(lab.agents.jobs()) == 1
