"""A job a delegated station starts in its own process holds its admission (ADMITTED, PREPARING,
RUNNING) until its first observations or its terminal (issue 27 item 4); the station's park names
the process that started it. These tests kill that process for real (SIGKILL) inside that window:
the job is never run again on its own (LOST), and another live process leaves it alone meanwhile.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lab import Lab
from lab.agents import AgentJobStateError

from .graphs import declare

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

KERNEL = """
import asyncio, sys, threading, time
from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from lab import Lab
from lab.agents import observations
from tests.agents.agent_defs import Plan
from tests.agents.graphs import declare

observations.EVERY = 3600.0  # the admission stays held for as long as the agent runs
started = sys.argv[2]

async def stuck(messages, info):
    with open(started, "a") as f:
        f.write("started\\n")
    await asyncio.sleep(3600)

lab = Lab(sys.argv[1])
lab.agents.register("stuck", Agent(FunctionModel(stuck), output_type=Plan, name="stuck"))
g = declare(lab, runtime="stuck")
run = g.start(g.nodes["Outline"]())
threading.Thread(target=run.run, daemon=True).start()
while not (run.job is not None and open(started).read()):
    time.sleep(0.02)
print(run.id, run.job.request_id, flush=True)
time.sleep(600)
"""


def test_a_job_started_here_and_killed_before_its_admission_was_recorded_is_lost_not_run_again(tmp_path: Path) -> None:
    path, started = tmp_path / "lab.duckdb", tmp_path / "started"
    started.write_text("")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    kernel = subprocess.Popen(
        [sys.executable, "-c", KERNEL, str(path), str(started)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = kernel.stdout.readline()
        assert line, kernel.stderr.read() if kernel.poll() is not None else "no output"
        run_id, request_id = line.split()
        # another process opens the store while the agent runs: the job is QUEUED (its admission held),
        # its park names a live process that started it, so this lab leaves it alone
        with Lab(path) as other:
            assert other.store.job(request_id).status == "QUEUED"
            (wait,) = [w for w in other.store.waits(run_id) if w.kind == "delegate"]
            assert wait.details["admitted_by"]["pid"] == kernel.pid
            assert other.store.job(request_id).status == "QUEUED"
        os.kill(kernel.pid, signal.SIGKILL)
    finally:
        kernel.kill()
        kernel.communicate()
    assert kernel.returncode == -signal.SIGKILL
    with Lab(path) as lab:  # the process that started it is gone: what the agent did is unknown
        job = lab.agents.job(request_id)
        assert job.status == "LOST" and job.transitions() == ["QUEUED", "LOST"]
        assert "ran it as a task stopped" in job.error["message"]
        declare(lab, runtime="stuck")
        run = lab.resume(run_id)
        assert run.job.request_id == request_id and run.job.status == "LOST"
        with pytest.raises(AgentJobStateError, match="LOST"):
            run.run()  # never submitted again on its own: a person chooses retry, cancel or provide
        assert lab.agents.job(request_id).status == "LOST"
    assert started.read_text() == "started\n"  # the agent ran once, in the killed process


ENDED_THEN_KILLED = """
import os, signal, sys
from lab import Lab
from lab.store import duckdb_files
from tests.agents.agent_defs import planner
from tests.agents.graphs import declare

duckdb_files.LINGER = 3600.0  # the file stays held: the job's every move is a journal line, none folded
lab = Lab(sys.argv[1])
lab.store.jobs()
lab.agents.register("planner", planner)
g = declare(lab)
folds = lab.store.folds
run = g.start(g.nodes["Outline"]())
run.run()
assert run.status == "done", run.error
assert lab.store.folds == folds, "a fold ran: the job's lines would not be the only record"
print(run.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # before any fold or close: the job's rows are only journal lines
"""


def test_a_job_journalled_to_its_end_and_killed_before_a_fold_is_whole_on_reopen(tmp_path: Path) -> None:
    """A delegated station whose job's every move was a journal line (its process held the file all along),
    SIGKILLed before anything folded them: the next open folds the lines, the job's last one is its row."""
    path = tmp_path / "lab.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", ENDED_THEN_KILLED, str(path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    run_id = done.stdout.split()[0]
    with Lab(path) as lab:
        (job,) = lab.agents.jobs(run_id=run_id)
        assert job.status == "SUCCEEDED" and job.transitions() == ["QUEUED", "ADMITTED", "PREPARING", "RUNNING", "SUCCEEDED"]
        events = lab.store.job_events(job.request_id)
        assert [e.seq for e in events] == list(range(len(events))) and any(e.kind == "message" for e in events)
        assert lab.store.job(job.request_id).ended_at is not None
        declare(lab)
        assert lab.resume(run_id).status == "done"
