"""A failed Ray start leaves no processes behind (lab/batch/ray_start.py).

Ray 2.60 does not stop the head processes of a `ray.init` that failed (the half-made node is never
handed to `ray.shutdown`), so each retry on a busy machine added four Python processes. These tests
use real processes whose command lines carry a Ray session folder, as Ray's own do.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from lab.batch.ray_start import children, startup_missed, stop_sessions

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

FAILED = "/tmp/ray/session_2026-12-06_03-38-25_651674_17577"
OTHER = "/tmp/ray/session_2026-12-06_04-00-00_000001_99999"


def _sleeper(session: str, *, orphan: bool = False) -> subprocess.Popen[bytes]:
    """A process whose command line names `session`; with `orphan`, a shell that starts a second
    one in the background (as a raylet starts its agents) and prints its pid."""
    code = "import sys, time; time.sleep(120)"
    if orphan:
        script = f'{sys.executable} -c "{code}" --session-dir={session} & echo $!; wait'
        return subprocess.Popen(["sh", "-c", script, f"--logs-dir={session}/logs"], stdout=subprocess.PIPE)
    return subprocess.Popen([sys.executable, "-c", code, f"--log_dir={session}/logs"])


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _gone(pid: int, deadline: float = 30.0) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_the_processes_of_a_failed_start_are_stopped_and_no_other_session(tmp_path):
    before = children()
    head = _sleeper(FAILED)
    agent_parent = _sleeper(FAILED, orphan=True)
    assert agent_parent.stdout is not None
    agent = int(agent_parent.stdout.readline())
    other = _sleeper(OTHER)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        started = children() - before
        assert {head.pid, agent_parent.pid, other.pid, bystander.pid} <= started
        killed = stop_sessions({head.pid, agent_parent.pid, bystander.pid})
        assert {head.pid, agent_parent.pid, agent} <= set(killed)
        assert other.pid not in killed and bystander.pid not in killed
        for pid in (head.pid, agent_parent.pid, agent):
            assert _gone(pid), f"process {pid} of the failed session is still running"
        assert _alive(other.pid), "a process of another Ray session was stopped"
        assert _alive(bystander.pid), "a child that is not Ray's was stopped"
    finally:
        for p in (head, agent_parent, other, bystander):
            p.kill()
            p.wait()
        agent_parent.stdout.close()


def test_only_a_missed_startup_wait_is_tried_again():
    assert startup_missed(RuntimeError("The current node timed out during startup. This could happen ..."))
    assert not startup_missed(ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379"))
    assert not startup_missed(ValueError("num_cpus must be an int"))
