"""A subprocess worker's recorded calls outlive the kernel that started it (issue 28 item 1, docs/replay.md).

A real Jupyter kernel starts a run whose delegated station runs in a worker subprocess and shuts down
while the agent still waits; the worker (its own session) finishes and leaves its result and its
calls file. Between the kernels a lab process adopts the calls and "crashes" before it records the
job's terminal (the store opened alone, its calls written, closed). The next kernel's `Lab()` adopts
the result (the calls again: none written twice), the run goes on and takes the calls in as
`recorded` events, and a fork in that kernel replays both in its own worker: 0 model calls.

Kernels are real (this interpreter's ipykernel, started by nbclient, as tests/notebooks does); the
worker imports its counted `FunctionModel` from tests/agents/agent_defs.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from lab.agents.worker_calls import adopt_calls
from lab.store import open_location
from tests.agents.test_kernel_restart import kernel_dir  # noqa: F401 - the module's kernelspec fixture
from tests.notebooks.test_notebooks import execute, printed

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

DEFINE = """import json, os, sys
sys.path.insert(0, {repo!r})
os.environ["GRAPHLAB_TEST_HOLD"] = {hold!r}
os.environ["GRAPHLAB_TEST_CALLS"] = {calls!r}
from lab import Lab
from tests.agents.graphs import declare

lab = Lab()
lab.agents.register("recorded-worker", target="tests.agents.agent_defs:counted_worker", runner="subprocess")
g = declare(lab, runtime="recorded-worker")"""

START = """import threading, time
run = g.start(g.nodes["Outline"]())
threading.Thread(target=run.run, daemon=True).start()
while run.job is None or run.job.status != "RUNNING":
    time.sleep(0.02)
print(run.id, run.job.request_id)"""

RESUME = """run = lab.resume({run_id!r})
run.run()
fork = run.fork(0)
fork.run()
print(json.dumps({{"run": [run.status, run.output, [(c.mode, c.call_index) for c in run.calls()]],
                  "events": [(e.payload["mode"], e.payload["job"]) for e in run.events("recorded")],
                  "fork": [fork.status, fork.output, [c.mode for c in fork.calls()]],
                  "saved": [e.payload["saved_tokens"] > 0 for e in fork.events("recorded")],
                  "jobs": len(lab.agents.jobs(run_id=run.id))}}))"""


def test_a_worker_that_outlived_its_kernel_is_recorded_once_and_replayed(tmp_path: Path, kernel_dir: Path) -> None:  # noqa: F811
    hold, calls = tmp_path / "hold", tmp_path / "model-calls.txt"
    try:
        _restart(tmp_path, kernel_dir, hold, calls)
    finally:
        hold.touch()  # a worker of a failed run finishes instead of waiting


def _restart(tmp_path: Path, kernels: Path, hold: Path, calls: Path) -> None:
    define = DEFINE.format(repo=str(REPO), hold=str(hold), calls=str(calls))
    first = new_notebook(cells=[new_code_cell(define), new_code_cell(START)])
    execute(first, tmp_path, kernels)  # the kernel shuts down here, its agent still waiting
    run_id, request_id = printed(first.cells[-1]).split()
    store_path = tmp_path / ".graphlab" / "lab.duckdb"
    folder = Path(str(store_path) + ".jobs") / request_id
    assert not (folder / "result.json").exists()
    hold.touch()
    deadline = time.monotonic() + 60
    while not (folder / "result.json").exists():
        assert time.monotonic() < deadline, "the worker did not finish after its kernel stopped"
        time.sleep(0.05)
    assert len(calls.read_text().splitlines()) == 2
    assert len((folder / "calls.ndjson").read_text().splitlines()) == 2

    store = open_location(store_path)  # an adoption that wrote the calls, then died before the terminal
    try:
        job = store.job(request_id)
        assert job is not None and job.status == "RUNNING"
        assert adopt_calls(store, job, str(store_path) + ".jobs") == 2
        assert [c.mode for c in store.calls(run_id)] == ["live", "live"]
        assert store.job(request_id).status == "RUNNING"  # type: ignore[union-attr]
    finally:
        store.close()

    second = new_notebook(cells=[new_code_cell(define), new_code_cell(RESUME.format(run_id=run_id))])
    execute(second, tmp_path, kernels)
    got = json.loads(printed(second.cells[-1]))
    assert got["run"] == ["done", "Durable agents: park, adopt", [["live", 1], ["live", 2]]]  # each call once
    assert got["events"] == [["live", True], ["live", True]]
    assert got["fork"] == ["done", "Durable agents: park, adopt", ["replayed", "replayed"]]
    assert got["saved"] == [True, True] and got["jobs"] == 1
    assert len(calls.read_text().splitlines()) == 2  # the fork's worker made no model call
