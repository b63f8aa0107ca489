"""The run widget and the consent click, on notebooks/consent.ipynb under Run All, in a real
JupyterLab and in Jupyter Notebook 7 (the same server serves both), driven by Chromium.

Scenarios, in one notebook session per frontend:
- Run All: the partial graph draws the missing node; the run parks visibly at the gate: the
  widget says waiting, the consent panel shows the prompt and details, Step is disabled with a
  tooltip saying why; the verdict SQL cell says the run waits for a click (issue 15 item 6)
- the state's markup (`<img src=x onerror=alert(1)>`) shows as text; no alert runs
- scrubbing the timeline back shows the older checkpoint's state and lights its station
- Rewind here at checkpoint 0, then Step: the lit station moves, the timeline gains a checkpoint,
  and the branch picker offers the old branch, which still ends at the parked gate (item 7)
- Step again: parked at the gate on the new branch; Approve with a note resumes the run to End;
  the note is in the event log, and the SQL cell, run again, shows it from the store
- Fork here on the first checkpoint shows the child run's widget below, at its entry
Screenshots go to SCREENSHOTS (conftest: GRAPHLAB_SCREENSHOT_DIR=docs/img refreshes the README's
run-widget.png and consent.png, which are JupyterLab's).
"""

from __future__ import annotations

import re

import pytest

from .conftest import SCREENSHOTS, Server
from .frontends import FRONTENDS, cell_index, open_notebook, output_of, run_all
from .waits import SHOWS

NOTEBOOK = "consent.ipynb"
NOTE = "Looks right <b>ship</b> it"


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_run_widget_and_consent_click(page, jupyter_server: Server, frontend: str) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    open_notebook(page, jupyter_server, jupyter_server.notebook(NOTEBOOK), frontend)
    run_all(page)
    suffix = "" if frontend == "jupyterlab" else "-notebook7"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    # the partial graph, displayed before ConfirmSend was declared
    missing = page.locator("svg.gl-graph g.gl-missing").first
    expect(missing).to_have_attribute("data-station", "ConfirmSend")
    expect(missing).to_contain_text("missing")

    # parked visibly at the gate, and the text's click explained by the SQL cell
    w = page.locator(".gl-run")
    status = w.locator(".gl-run-status")
    expect(status).to_have_attribute("data-status", "waiting", timeout=SHOWS)
    consent = w.locator(".gl-consent")
    expect(consent).to_be_visible()
    expect(consent.locator(".gl-prompt")).to_have_text("Send this draft to the customer?")
    expect(consent.locator(".gl-details")).to_contain_text("customer@example.com")
    lit = w.locator("svg.gl-graph g.gl-current")
    parked = w.locator("svg.gl-graph g.gl-parked")
    expect(parked).to_have_attribute("data-station", "ConfirmSend")
    expect(parked).to_contain_text("‖ waiting")
    expect(w.locator(".gl-step")).to_be_disabled()
    expect(w.locator(".gl-step")).to_have_attribute(
        "title", re.compile("ConfirmSend waits for a verdict: Approve or Deny")
    )
    sql_at = cell_index(NOTEBOOK, "print(f\"the run is {run.status}\"")
    expect(output_of(page, sql_at).first).to_contain_text(
        "the run is waiting: click Approve or Deny above, then run this cell again"
    )
    state = w.locator(".gl-state")
    expect(state).to_contain_text("<img src=x onerror=alert(1)>")  # shown as text
    assert state.locator("img").count() == 0 and page.locator('img[src="x"]').count() == 0
    expect(w.locator(".gl-retry")).to_be_hidden()
    expect(w.locator(".gl-pause")).to_be_disabled()
    expect(w.locator(".gl-pause")).to_have_attribute("title", re.compile("nothing is running"))

    # scrub back to the start: the older state, and its station lit
    selected = w.locator(".gl-selected")
    expect(selected).to_have_attribute("data-seq", "2")
    handle = w.locator(".gl-timeline .noUi-handle")
    handle.focus()
    handle.press("Home")
    expect(selected).to_have_attribute("data-seq", "0")
    expect(state.locator("h4")).to_contain_text("State at checkpoint 0")
    expect(state).not_to_contain_text("onerror")  # the draft was empty then
    expect(lit).to_have_attribute("data-station", "Write")

    # Rewind here, then Step: the lit station moves on, on a new branch the picker offers
    w.locator(".gl-rewind").click()
    expect(status).to_have_attribute("data-label", "created")
    expect(consent).to_be_hidden()
    w.locator(".gl-step").click()
    expect(lit).to_have_attribute("data-station", "ConfirmSend")
    expect(selected).to_have_attribute("data-seq", "3")
    expect(selected).to_contain_text("2 of 2")
    expect(status).to_have_attribute("data-label", "paused")
    expect(w.locator('svg.gl-graph g.gl-visited[data-station="Write"]')).to_contain_text("×1")
    w.screenshot(path=str(SCREENSHOTS / f"run-widget{suffix}.png"))
    picker = w.locator(".gl-branches select")
    expect(picker).to_be_visible()
    expect(picker.locator("option")).to_have_text(["0…2", "from 0: 3 · head"])
    picker.select_option(label="0…2")  # the old branch: still parked at the gate
    expect(selected).to_have_attribute("data-seq", "2")
    expect(state.locator("h4")).to_contain_text("State at checkpoint 2 · waiting")
    picker.select_option(label="from 0: 3 · head")
    expect(selected).to_have_attribute("data-seq", "3")

    # Step again: parked at the gate; Approve with a note resumes the run to End
    w.locator(".gl-step").click()
    expect(status).to_have_attribute("data-status", "waiting")
    expect(consent).to_be_visible()
    consent.locator(".gl-note textarea").fill(NOTE)
    w.screenshot(path=str(SCREENSHOTS / f"consent{suffix}.png"))
    consent.locator(".gl-approve").click()
    expect(status).to_have_attribute("data-status", "done")
    expect(lit).to_have_attribute("data-station", "__end__")
    expect(consent).to_be_hidden()
    expect(w.locator(".gl-event-log")).to_contain_text(f"approved · note: {NOTE}")
    expect(w.locator(".gl-step")).to_have_attribute("title", re.compile("the run is done"))

    # ... and in the store: the SQL cell, run again, shows the verdict and its note
    sql = page.locator(".jp-Notebook .jp-Cell").nth(sql_at)
    sql.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(output_of(page, sql_at).first).to_contain_text("the run is done", timeout=30_000)
    expect(output_of(page, sql_at).last).to_contain_text("ship")
    expect(output_of(page, sql_at).last).to_contain_text("true")

    # Fork here from the first checkpoint: the child run's widget appears below, at its entry
    handle.focus()
    handle.press("Home")
    expect(selected).to_have_attribute("data-seq", "0")
    w.locator(".gl-fork").click()
    child = w.locator(".gl-run")  # nested in the forks area
    expect(child).to_have_count(1)
    expect(child.locator("svg.gl-graph g.gl-current")).to_have_attribute("data-station", "Write")
    expect(w.locator(".gl-message").first).to_contain_text("Forked checkpoint 0 into run-")
    assert page.dialogs == [], f"a script ran from escaped content: {page.dialogs}"
