"""Run All in a real JupyterLab: each notebook reads right when every cell runs at once (issue 15 item 6).

A live widget shows the present, so where a notebook's text talks about one moment its cell shows
a snapshot (a checkpoint table); the live run widget comes where the text talks about the run as
it is. Under Run All:
- quickstart: the start cell shows checkpoint 0 (created, next Inc), not the finished run; the
  widget at the end shows the run done, with the branch picker the rewind made
- time_travel: the cell that runs on from the edit shows the checkpoint it stopped at (done);
  the refused step prints its explanation; no traceback anywhere
(consent.ipynb under Run All, in JupyterLab and Notebook 7: tests/browser/test_run_widget.py.)
"""

from __future__ import annotations

import re

from .conftest import SCREENSHOTS, Server
from .frontends import cell_index, open_notebook, output_of, outputs_text, run_all


def test_quickstart_under_run_all(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    nb = "quickstart.ipynb"
    open_notebook(page, jupyter_server, jupyter_server.notebook(nb), "jupyterlab")
    run_all(page)
    start = output_of(page, cell_index(nb, "run = g.start("))
    expect(start).to_contain_text(re.compile(r"run-\S+@0"))
    expect(start).to_contain_text("○ created")
    expect(start).to_contain_text("Inc")
    expect(start).not_to_contain_text("done")
    widget = output_of(page, cell_index(nb, "run", exact=True)).locator(".gl-run")
    expect(widget.locator(".gl-run-status")).to_have_attribute("data-status", "done")
    picker = widget.locator(".gl-branches select")
    expect(picker).to_be_visible()
    expect(picker.locator("option")).to_have_count(2)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    start.screenshot(path=str(SCREENSHOTS / "run-all-quickstart-start.png"))
    widget.screenshot(path=str(SCREENSHOTS / "run-all-quickstart-widget.png"))
    assert "Traceback" not in outputs_text(page)
    assert page.dialogs == []


def test_time_travel_under_run_all(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    nb = "time_travel.ipynb"
    open_notebook(page, jupyter_server, jupyter_server.notebook(nb), "jupyterlab")
    run_all(page)
    edited = output_of(page, cell_index(nb, "%lab run\nrun.checkpoint(run.head)"))
    expect(edited).to_contain_text("✔ done")
    expect(edited).to_contain_text('"total": 12')  # 10 by the edit, then +2
    refused = output_of(page, cell_index(nb, "run.rewind(2)\ntry:"))
    expect(refused).to_contain_text("fork it onto the new revision")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    edited.screenshot(path=str(SCREENSHOTS / "run-all-time-travel-edited.png"))
    assert "Traceback" not in outputs_text(page)
