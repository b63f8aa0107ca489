"""Cancelling an agent job (CANCELLING, containment, CANCELLED, evidence, closure, cleanup) and the
runtime binding a run keeps (seed 001 "Checkpoint Ownership and Terminal Commit" and "Delegated Agent
Macro-Nodes", issue 30).

Workers are real subprocesses, killed for real; agents are pydantic-ai on FunctionModel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lab import Lab
from lab.agents import AgentRuntimeError
from lab.agents.files import alive

from .graphs import declare, declare_sending

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _until(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def _running(lab: Lab, runtime: str, name: str):
    g = declare(lab, runtime=runtime, name=name)
    run = g.start(g.nodes["Outline"]())
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    folder = Path(lab.agents.folder) / run.job.request_id
    _until(lambda: (folder / "worker.json").exists())
    return run, t, folder, json.loads((folder / "worker.json").read_text())


def test_cancelling_contains_then_cancelled_commits_then_evidence_closure_and_cleanup(lab, release):
    """Seed 001: "API cancellation follows Workers: a worker observing CANCELLING releases volatile
    execution resources for containment acknowledgement while retaining its checkpoint. After CANCELLED
    commits, the engine handles terminal evidence and channel closure before best-effort resource
    cleanup." The job is recorded CANCELLING while its worker still runs, CANCELLED only once the worker
    is gone; when the view hears CANCELLED the job folder is still there, and it is removed after; the
    run's waiting checkpoint is kept, and its station fails naming CANCELLED."""
    run, t, folder, worker = _running(lab, "slow-worker", "cancelled")
    rid = run.job.request_id
    seen: list[tuple[str, bool, bool]] = []

    def listener(request_id: str) -> None:
        status = lab.store.job(request_id).status
        if request_id == rid and status in ("CANCELLING", "CANCELLED") and (not seen or seen[-1][0] != status):
            seen.append((status, bool(alive(worker)), folder.exists()))

    lab.agents.on_change(listener)
    parked_at = run.wait.checkpoint_seq
    run.job.cancel("not needed")
    t.join(60)
    assert seen == [("CANCELLING", True, True), ("CANCELLED", False, True)]
    assert not folder.exists()  # cleaned up after the terminal was heard
    job = lab.agents.job(rid)
    assert job.transitions()[-3:] == ["RUNNING", "CANCELLING", "CANCELLED"]
    asked = [e for e in job.events() if e.to_status == "CANCELLING"][0]
    assert asked.payload["note"] == "not needed" and asked.payload["canceller"]["pid"] == os.getpid()
    assert lab.store.checkpoint(run.id, parked_at) is not None  # the checkpoint is retained
    assert run.status == "failed" and "ended CANCELLED" in run.error["message"]


def test_a_failure_recording_the_evidence_does_not_prevent_cleanup(lab, release, monkeypatch):
    """Seed 001: "failed evidence persistence does not prevent that cleanup." Recording what the worker
    left fails (a store error, say): CANCELLED stands, the run awaiting the job goes on, and the job
    folder is still removed."""
    run, t, folder, worker = _running(lab, "slow-worker", "evidence")

    def broken(rec):
        raise OSError("the disk is full")

    monkeypatch.setattr(lab.agents, "_cancel_evidence", broken)
    run.job.cancel()
    t.join(60)
    assert not t.is_alive() and run.status == "failed"
    assert run.job.status == "CANCELLED" and not alive(worker)
    assert not folder.exists()


def test_a_job_left_cancelling_is_finished_by_the_next_lab(tmp_path, release):
    """Seed 001: "Explicit cancellation still contains the owning runtime and may record LOST → CANCELLED
    only after containment returns." The process that recorded CANCELLING died before containing the
    worker (its kernel was killed): the next lab opened on the store finds the job CANCELLING with its
    canceller gone, kills and reaps the worker, and only then records CANCELLED."""
    path = tmp_path / "lab.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    kernel = subprocess.Popen(
        [sys.executable, "-m", "tests.agents.kernel_script", str(path)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        run_id, request_id = kernel.stdout.readline().split()
    finally:
        kernel.kill()
        kernel.communicate()
    folder = Path(str(path) + ".jobs") / request_id
    worker = json.loads((folder / "worker.json").read_text())
    assert alive(worker)
    canceller = (
        "import os, sys\n"
        "from lab import Lab\n"
        "from lab.agents.files import process_identity\n"
        "from lab.agents.lifecycle import allowed_from\n"
        "lab = Lab(sys.argv[1])\n"
        "lab.store.transition_job(sys.argv[2], 'CANCELLING', allowed_from=allowed_from('CANCELLING'),\n"
        "                         payload={'by': 'person', 'note': 'stop it', 'canceller': process_identity()})\n"
        "lab.store.close()\n"
        "os._exit(0)  # dies before containing the worker\n"
    )
    done = subprocess.run([sys.executable, "-c", canceller, str(path), request_id], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert alive(worker)  # nobody contained it yet
    with Lab(path) as lab:
        job = lab.agents.job(request_id)
        job.wait(60)
        assert job.status == "CANCELLED" and job.transitions()[-2:] == ["CANCELLING", "CANCELLED"]
        assert not alive(worker) and not folder.exists()
        declare(lab, runtime="slow-worker")
        lab.agents.register("slow-worker", target="tests.agents.agent_defs:slow_planner", runner="subprocess")
        run = lab.resume(run_id)
        run.run()
        assert run.status == "failed" and "ended CANCELLED" in run.error["message"]


def test_a_lost_jobs_retry_is_not_redirected_by_registering_the_name_again(lab, release):
    """Seed 001: "Optional delegated_rite@2 retains the configured exact runtime/profile in admitted Run
    intent and state. Its checkpoint must match that binding; current Settings cannot redirect resumed
    work." The binding is in the request and the waiting checkpoint's wait; after the worker died, the
    name re-registered with another agent makes `job.retry()` refuse (nothing submitted); registered as
    it was, the retry runs."""
    run, t, folder, worker = _running(lab, "slow-worker", "bound")
    bound = {"runner": "subprocess", "target": "tests.agents.agent_defs:slow_planner"}
    assert run.job.record.request["binding"] == bound and run.wait.details["binding"] == bound
    os.kill(worker["pid"], 9)
    t.join(60)
    lost = run.job
    assert lost.status == "LOST"
    lab.agents.register("slow-worker", target="tests.agents.agent_defs:planner", runner="subprocess")
    with pytest.raises(AgentRuntimeError, match="never redirected"):
        lost.retry()
    assert len(lab.agents.jobs(run_id=run.id)) == 1
    lab.agents.register("slow-worker", target="tests.agents.agent_defs:slow_planner", runner="subprocess")
    release.touch()
    lost.retry()
    run.run()
    assert run.status == "done" and run.output == "Slow: done"


def test_a_next_approval_round_and_a_station_retry_keep_the_runs_binding(lab):
    """Seed 001: "current Settings cannot redirect resumed work" and "no automatic fallback". A run whose
    agent asked for approval continues as a new job; with the name re-registered as another agent
    meanwhile, that job is refused at admission (FAILED, naming the binding) instead of running the other
    agent. Registered as it was, `run.retry()` runs the station again on the bound agent."""
    from .agent_defs import asker, planner

    lab.agents.register("asker", asker)
    g = declare_sending(lab, "asker", rounds=1)
    run = g.start(g.nodes["Outline"]())
    run.run()
    assert run.wait.kind == "consent"
    lab.agents.register("asker", planner)  # another agent under the same name
    run.approve()
    run.run()
    assert run.status == "failed" and "never redirected" in run.error["message"]
    refused = lab.agents.jobs(run_id=run.id)[-1]
    assert refused.status == "FAILED" and refused.transitions() == ["QUEUED", "FAILED"]
    lab.agents.register("asker", asker)
    run.retry()  # a step: the station delegates afresh
    assert run.status == "waiting" and run.wait.kind == "consent"  # the bound agent asks again, from its prompt
    run.approve()
    run.run()
    assert run.status == "done" and run.output == "sent to desk 1"
