"""Subprocess jobs forked from a lab's warm fork server (lab/agents/workers.py, forkserver.py).

The server imports the lab and pydantic-ai once; every job is still its own process (its own pid,
session, memory), so the worker guarantees hold: a job's process SIGKILLed makes the job LOST, a
cancel kills and reaps it, and a dead server is replaced by the next job. Processes are really
killed; agents are pydantic-ai on FunctionModel (tests/agents/agent_defs.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from lab.agents.files import alive

from .graphs import declare

pytestmark = pytest.mark.slow


def _until(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def _probe(lab, name: str = "probe"):
    """One run of a station delegated to the probe worker; its job, after the run ended."""
    lab.agents.register("probe", target="tests.agents.agent_defs:probe", runner="subprocess")
    g = declare(lab, runtime="probe", name=name)
    run = g.start(g.nodes["Outline"]())
    run.run()
    assert run.status == "done", run.error
    return run.job


def _handed_over(pid: int) -> bool:
    """Whether a job's line waits unread in server `pid`'s stdin (the lab handed the job over)."""
    import array
    import fcntl
    import termios

    fd = os.open(f"/proc/{pid}/fd/0", os.O_RDONLY | os.O_NONBLOCK)
    try:
        pending = array.array("i", [0])
        fcntl.ioctl(fd, termios.FIONREAD, pending)
        return pending[0] > 0
    finally:
        os.close(fd)


def _worker(job) -> dict:
    return job.record.worker or {}


def test_a_next_job_is_forked_from_the_same_warm_server_in_a_fresh_process(lab, monkeypatch):
    """The second job reuses the server (no re-import) but gets its own process: its own pid, the agent's
    module imported afresh (its module state starts empty), and the lab's environment as of that job."""
    first = _probe(lab, "first")
    monkeypatch.setenv("GRAPHLAB_TEST_MARK", "set after the server started")
    second = _probe(lab, "second")
    one, two = _worker(first), _worker(second)
    assert one["server"]["pid"] == two["server"]["pid"] and alive(one["server"])
    assert one["pid"] != two["pid"] and first.output["points"][0] == str(one["pid"])
    assert first.output["points"][1] == second.output["points"][1] == "1"  # nothing left over from the first job
    assert first.output["title"] == "" and second.output["title"] == "set after the server started"
    assert second.transitions() == ["QUEUED", "ADMITTED", "PREPARING", "RUNNING", "SUCCEEDED"]
    _until(lambda: not alive(two))  # the job's process ended and was reaped


def test_a_sigkilled_job_process_is_lost_and_the_next_job_runs_in_a_new_process(lab, release):
    """A job's process killed mid-job is detected: LOST, never resubmitted; the server forks the next."""
    g = declare(lab, runtime="slow-worker")
    run = g.start(g.nodes["Outline"]())
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    killed = _worker(run.job)
    os.kill(killed["pid"], signal.SIGKILL)
    t.join(60)
    assert not t.is_alive()
    assert run.job.status == "LOST" and "killed by signal 9" in run.job.error["message"]
    assert run.status == "waiting" and len(lab.agents.jobs(run_id=run.id)) == 1  # nothing submitted on its own
    after = _probe(lab)
    assert _worker(after)["server"]["pid"] == killed["server"]["pid"] and _worker(after)["pid"] != killed["pid"]


def test_a_dead_server_is_replaced_and_its_running_job_finishes(lab, release):
    """The server is SIGKILLed while a job runs: that job's process (its own session) finishes and its
    result is adopted; the next job starts a new server."""
    g = declare(lab, runtime="slow-worker")
    run = g.start(g.nodes["Outline"]())
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    server = _worker(run.job)["server"]
    os.kill(server["pid"], signal.SIGKILL)
    _until(lambda: not alive(server))
    release.touch()
    t.join(60)
    assert not t.is_alive() and run.status == "done" and run.job.status == "SUCCEEDED"
    after = _probe(lab)
    assert after.status == "SUCCEEDED" and _worker(after)["server"]["pid"] != server["pid"]


def test_cancel_of_a_job_on_the_warm_server_kills_and_reaps_only_that_job(lab, release):
    """CANCELLING -> CANCELLED: the job's process is killed and reaped before CANCELLED commits; the
    server lives on and forks the next job."""
    g = declare(lab, runtime="slow-worker")
    run = g.start(g.nodes["Outline"]())
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    worker = _worker(run.job)
    run.job.cancel("not needed")
    t.join(60)
    assert not t.is_alive()
    assert run.job.transitions()[-2:] == ["CANCELLING", "CANCELLED"] and run.status == "failed"
    with pytest.raises(ProcessLookupError):
        os.kill(worker["pid"], 0)  # gone and reaped
    assert alive(worker["server"])
    after = _probe(lab)
    assert _worker(after)["server"]["pid"] == worker["server"]["pid"]


def test_a_job_whose_server_died_before_forking_it_is_lost_and_the_next_gets_a_new_server(lab):
    """The server is stopped (SIGSTOP) so it cannot fork the next job, then SIGKILLed with that job
    handed to it: nobody ran the job, and nobody can tell, so it is LOST, never resubmitted on its own;
    the job after it starts a new server and runs."""
    first = _probe(lab, "first")
    server = _worker(first)["server"]
    os.kill(server["pid"], signal.SIGSTOP)
    try:
        lab.agents.register("probe", target="tests.agents.agent_defs:probe", runner="subprocess")
        g = declare(lab, runtime="probe", name="orphaned")
        run = g.start(g.nodes["Outline"]())
        t = threading.Thread(target=run.run)
        t.start()
        _until(lambda: _handed_over(server["pid"]))
        assert run.job.status == "ADMITTED"
    finally:
        os.kill(server["pid"], signal.SIGKILL)
    t.join(60)
    assert not t.is_alive()
    assert run.job.status == "LOST" and "exit code unknown" in run.job.error["message"]
    assert run.status == "waiting" and len(lab.agents.jobs(run_id=run.id)) == 1
    after = _probe(lab, "after")
    assert after.status == "SUCCEEDED" and _worker(after)["server"]["pid"] != server["pid"]


def test_cancel_of_a_job_its_server_has_not_forked_stops_that_server(lab):
    """Containment before CANCELLED: a job handed to a server that has not forked it (stopped here) is
    cancelled by stopping that server, so the job can never start after CANCELLED; the next job gets
    a new server."""
    first = _probe(lab, "first")
    server = _worker(first)["server"]
    os.kill(server["pid"], signal.SIGSTOP)
    try:
        lab.agents.register("probe", target="tests.agents.agent_defs:probe", runner="subprocess")
        g = declare(lab, runtime="probe", name="never-forked")
        run = g.start(g.nodes["Outline"]())
        t = threading.Thread(target=run.run)
        t.start()
        _until(lambda: _handed_over(server["pid"]))
        assert run.job.status == "ADMITTED"
        run.job.cancel("not needed")
        t.join(60)
        assert not t.is_alive()
        assert run.job.transitions()[-2:] == ["CANCELLING", "CANCELLED"] and run.status == "failed"
        assert not alive(server)
    finally:
        if alive(server):
            os.kill(server["pid"], signal.SIGKILL)
    after = _probe(lab, "after")
    assert after.status == "SUCCEEDED" and _worker(after)["server"]["pid"] != server["pid"]
