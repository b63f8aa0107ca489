"""A real Jupyter kernel restarts while its delegated station's worker runs (issue 17 requirement 5):
the worker finishes, the next kernel's `Lab()` adopts its result, and the run continues.

Kernels are real (this interpreter's ipykernel, started by nbclient, as tests/notebooks does); the
first one shuts down while the agent is still at work; the worker lives in its own session.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from tests.notebooks.test_notebooks import KERNEL_NAME, execute, printed

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

DEFINE = """import os, sys
sys.path.insert(0, {repo!r})
os.environ["GRAPHLAB_TEST_RELEASE"] = {release!r}
from lab import Lab
from tests.agents.graphs import declare

lab = Lab()
lab.agents.register("slow-worker", target="tests.agents.agent_defs:slow_planner", runner="subprocess")
g = declare(lab, runtime="slow-worker")"""

START = """import threading, time
run = g.start(g.nodes["Outline"]())
threading.Thread(target=run.run, daemon=True).start()
while run.job is None or run.job.status != "RUNNING":
    time.sleep(0.02)
print(run.id, run.job.request_id)"""

RESUME = """job = lab.agents.job({request_id!r})
print(job.status, job.transitions()[-1], job.events()[-1].payload["by"])
run = lab.resume({run_id!r})
run.run()
print(run.status, run.output, len(lab.agents.jobs(run_id=run.id)))"""


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kernels")
    spec = root / KERNEL_NAME
    spec.mkdir()
    (spec / "kernel.json").write_text(
        json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": "Python 3", "language": "python"})  # fmt: skip
    )
    return root


def test_worker_outlives_a_kernel_restart_and_its_result_is_adopted(tmp_path: Path, kernel_dir: Path) -> None:
    release = tmp_path / "release"
    try:
        _restart_and_adopt(tmp_path, kernel_dir, release)
    finally:
        release.touch()  # a worker of a failed run finishes instead of waiting


def _restart_and_adopt(tmp_path: Path, kernel_dir: Path, release: Path) -> None:
    define = DEFINE.format(repo=str(REPO), release=str(release))
    first = new_notebook(cells=[new_code_cell(define), new_code_cell(START)])
    execute(first, tmp_path, kernel_dir)  # the kernel shuts down here, its agent still at work
    run_id, request_id = printed(first.cells[-1]).split()
    result = tmp_path / ".graphlab" / "lab.duckdb.jobs" / request_id / "result.json"
    assert not result.exists()
    release.touch()
    deadline = time.monotonic() + 60
    while not result.exists():
        assert time.monotonic() < deadline, "the worker did not finish after its kernel stopped"
        time.sleep(0.05)

    second = new_notebook(cells=[new_code_cell(define), new_code_cell(RESUME.format(request_id=request_id, run_id=run_id))])
    execute(second, tmp_path, kernel_dir)
    lines = [c for c in second.cells[-1].outputs if c.get("output_type") == "stream"]
    text = "".join(o["text"] for o in lines).strip().splitlines()
    assert text[0] == "SUCCEEDED SUCCEEDED worker"  # adopted from the worker's result on open
    assert text[1] == "done Slow: done 1"  # the run went on; nothing was submitted again
    nbformat.validate(second)


APPROVE_DEFINE = """import os, sys
sys.path.insert(0, {repo!r})
from lab import Lab
from tests.agents.agent_defs import asker
from tests.agents.graphs import declare_sending

lab = Lab()
lab.agents.register("asker", asker)
g = declare_sending(lab, "asker", rounds=2)"""

APPROVE_START = """run = g.start(g.nodes["Outline"]())
run.run()
run.approve("first desk is fine")
run.run()
print(run.id, run.status, run.wait.kind, run.wait.details["round"])"""

APPROVE_RESUME = """run = lab.resume({run_id!r})
print(run.status, run.wait.kind, run.wait.details["round"], run.wait.details["tool_approvals"][0]["tool"])
run.approve()
run.run()
print(run.status, run.output, len(lab.agents.jobs(run_id=run.id)))"""


def test_a_run_parked_on_a_tool_approval_survives_a_kernel_restart(tmp_path: Path, kernel_dir: Path) -> None:
    """Seed 001 "Consent re-entry": "Typed checkpoint shape alone does not authorize that re-entry: before
    the first node executes, its Gate/delegated station kind and retained owner id must match the Run's
    single current wait owner." A delegated station parked on its agent's second approval round in a
    real kernel that then shuts down: the next kernel resumes the run on that same wait, and its
    approval continues the agent's chain (round 1's verdict comes back from the answer log)."""
    define = APPROVE_DEFINE.format(repo=str(REPO))
    first = new_notebook(cells=[new_code_cell(define), new_code_cell(APPROVE_START)])
    execute(first, tmp_path, kernel_dir)  # the kernel shuts down with the run parked on round 2
    run_id, status, kind, round_no = printed(first.cells[-1]).split()
    assert (status, kind, round_no) == ("waiting", "consent", "2")

    second = new_notebook(cells=[new_code_cell(define), new_code_cell(APPROVE_RESUME.format(run_id=run_id))])
    execute(second, tmp_path, kernel_dir)
    lines = [c for c in second.cells[-1].outputs if c.get("output_type") == "stream"]
    text = "".join(o["text"] for o in lines).strip().splitlines()
    assert text[0] == "waiting consent 2 send"
    assert text[1] == "done sent to desk 1 | sent to desk 2 3"  # three rounds, three jobs; none ran twice
