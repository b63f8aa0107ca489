"""A delegated station's agent job in the run view, in a real JupyterLab driven by Chromium.

The notebook (written by the test) runs its agent in a worker subprocess. Scenario: Run parks
at the delegated station and the view shows the job RUNNING; the test SIGKILLs the worker; the
view shows the job LOST with Retry job / Cancel job / Provide result, and Run disabled (nothing is
submitted again on its own); the agent is released and Retry job is clicked: a new job runs, the
run reaches End, and the view shows the agent's messages (its tool call) and the tokens used.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from .conftest import REPO, SCREENSHOTS, Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, SHOWS

CELL = """import os, sys
sys.path.insert(0, {repo!r})
os.environ["GRAPHLAB_TEST_RELEASE"] = {release!r}
from lab import Lab
from tests.agents.graphs import declare

lab = Lab()
lab.agents.register("slow-worker", target="tests.agents.agent_defs:slow_planner", runner="subprocess")
g = declare(lab, runtime="slow-worker")
run = g.start(g.nodes["Outline"]())
run"""


def _worker_pid(folder: Path) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = list((folder / ".graphlab" / "lab.duckdb.jobs").glob("*/worker.json"))
        if found:
            return int(json.loads(found[0].read_text())["pid"])
        time.sleep(0.05)
    raise AssertionError("the worker never started")


def test_lost_agent_job_retry_from_the_run_view(page, jupyter_server: Server, request) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    folder = jupyter_server.root / "agent"
    folder.mkdir()
    release = folder / "release"
    request.addfinalizer(release.touch)  # a worker of a failed run finishes instead of waiting
    nb = new_notebook(cells=[new_code_cell(CELL.format(repo=str(REPO), release=str(release)))])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, folder / "agent.ipynb")
    open_in_lab(page, jupyter_server, "agent/agent.ipynb")
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    w = page.locator(".gl-run")
    expect(w.locator(".gl-run-all")).to_be_enabled(timeout=SHOWS)

    # Run: parked at the delegated station while the worker's agent runs
    w.locator(".gl-run-all").click()
    job = w.locator(".gl-agent-view")
    status = job.locator(".gl-job-status")
    expect(status).to_have_attribute("data-status", "RUNNING", timeout=SHOWS)
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "waiting")
    expect(w.locator('svg.gl-graph g[data-station="Outline"]')).to_contain_text("agent")

    # the worker is killed: LOST, the three choices, and Run refused (never re-submitted on its own)
    os.kill(_worker_pid(folder), signal.SIGKILL)
    expect(status).to_have_attribute("data-status", "LOST", timeout=30_000)
    lost = job.locator(".gl-job-lost")
    expect(lost).to_be_visible()
    expect(lost.locator(".gl-job-cancel")).to_be_visible()
    expect(lost.locator(".gl-job-provide")).to_be_visible()
    expect(w.locator(".gl-run-all")).to_be_disabled()
    expect(w.locator(".gl-run-all")).to_have_attribute("title", re.compile("agent job is LOST"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    w.screenshot(path=str(SCREENSHOTS / "agent-job-lost.png"))

    # Retry job: a new request runs to its end, the run reaches End, the messages and tokens show
    release.touch()
    lost.locator(".gl-job-retry").click()
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "done", timeout=SHOWS)
    expect(status).to_have_attribute("data-status", "SUCCEEDED")
    expect(job.locator(".gl-agent-head code")).to_contain_text(".r2")
    expect(job.locator(".gl-agent-call")).to_contain_text("final_result")
    expect(job.locator(".gl-job-tokens")).to_contain_text("tokens")
    expect(lost).to_be_hidden()
    assert page.dialogs == [], f"a script ran from escaped content: {page.dialogs}"
