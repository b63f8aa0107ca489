"""The run widget in a real JupyterLab and Chromium, on notebooks/consent.ipynb.

Scenarios, in one notebook session:
- the partial graph (a station names an undeclared one) draws the missing node
- the run widget shows the inline SVG graph with the entry station lit
- clicking Step moves the lit station and adds a checkpoint to the timeline
- the state's markup (`<img src=x onerror=alert(1)>`) shows as text; no alert runs
- scrubbing the timeline back shows the older checkpoint's state and lights its station
- at the gate: the consent panel shows the prompt, Step is disabled with a tooltip saying why;
  Approve with a note resumes the run to End, and the note is in the event log and in the store
- Fork here on the first checkpoint shows the child run's widget below, at its entry
Screenshots go to SCREENSHOTS (conftest: GRAPHLAB_SCREENSHOT_DIR=docs/img refreshes the README's).
"""

from __future__ import annotations

import re

import nbformat

from .conftest import REPO, SCREENSHOTS, Server

NOTEBOOK = "consent.ipynb"
IMG = SCREENSHOTS
NOTE = "Looks right <b>ship</b> it"


def _cell_index(predicate) -> int:  # type: ignore[no-untyped-def]
    cells = nbformat.read(REPO / "notebooks" / NOTEBOOK, as_version=4).cells
    return next(i for i, c in enumerate(cells) if predicate(c))


def _open(page, server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page.goto(server.lab_url(server.notebook(NOTEBOOK)))  # its own directory, so its own store
    # The toolbar says idle before the kernel exists; the status bar's "| Idle" means it is up.
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=90_000)


def _run_cells_through(page, last: int) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")  # command mode: Shift+Enter runs and moves on
    for _ in range(last + 1):
        page.keyboard.press("Shift+Enter")
    expect(page.locator(".jp-InputPrompt", has_text="[1]:").first).to_be_visible(timeout=60_000)


def test_run_widget_step_scrub_and_approve(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    _open(page, jupyter_server)
    start = _cell_index(lambda c: c.cell_type == "code" and "g.start(" in c.source)
    _run_cells_through(page, start)

    # the partial graph, displayed before ConfirmSend was declared
    missing = page.locator("svg.gl-graph g.gl-missing").first
    expect(missing).to_have_attribute("data-station", "ConfirmSend")
    expect(missing).to_contain_text("missing")

    w = page.locator(".gl-run")
    expect(w).to_be_visible(timeout=60_000)
    lit = w.locator("svg.gl-graph g.gl-current")
    selected = w.locator(".gl-selected")
    expect(lit).to_have_attribute("data-station", "Write")
    expect(selected).to_have_attribute("data-seq", "0")
    expect(w.locator(".gl-retry")).to_be_hidden()
    expect(w.locator(".gl-pause")).to_be_disabled()
    expect(w.locator(".gl-pause")).to_have_attribute("title", re.compile("nothing is running"))

    # Step: the lit station moves on and the timeline gains a checkpoint
    w.locator(".gl-step").click()
    expect(lit).to_have_attribute("data-station", "ConfirmSend")
    expect(selected).to_have_attribute("data-seq", "1")
    expect(selected).to_contain_text("2 of 2")
    expect(w.locator('svg.gl-graph g.gl-visited[data-station="Write"]')).to_contain_text("×1")
    state = w.locator(".gl-state")
    expect(state).to_contain_text("<img src=x onerror=alert(1)>")  # shown as text
    assert state.locator("img").count() == 0 and page.locator('img[src="x"]').count() == 0
    IMG.mkdir(parents=True, exist_ok=True)
    w.screenshot(path=str(IMG / "run-widget.png"))

    # scrub back: the older state, and its station lit
    handle = w.locator(".gl-timeline .noUi-handle")
    handle.focus()
    handle.press("ArrowLeft")
    expect(selected).to_have_attribute("data-seq", "0")
    expect(state.locator("h4")).to_contain_text("State at checkpoint 0")
    expect(state).not_to_contain_text("onerror")  # the draft was empty then
    expect(lit).to_have_attribute("data-station", "Write")
    expect(w.locator(".gl-rewind")).to_be_enabled()

    # Step again: the run parks at the gate
    w.locator(".gl-step").click()
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "waiting")
    consent = w.locator(".gl-consent")
    expect(consent).to_be_visible()
    expect(consent.locator(".gl-prompt")).to_have_text("Send this draft to the customer?")
    expect(consent.locator(".gl-details")).to_contain_text("customer@example.com")
    expect(w.locator("svg.gl-graph g.gl-parked")).to_have_attribute("data-station", "ConfirmSend")
    expect(w.locator("svg.gl-graph g.gl-parked")).to_contain_text("‖ waiting")
    expect(w.locator(".gl-step")).to_be_disabled()
    expect(w.locator(".gl-step")).to_have_attribute(
        "title", re.compile("ConfirmSend waits for a verdict: Approve or Deny")
    )
    consent.locator(".gl-note textarea").fill(NOTE)
    w.screenshot(path=str(IMG / "consent.png"))

    # Approve with a note: the run resumes to End; the note is in the event log
    consent.locator(".gl-approve").click()
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "done")
    expect(lit).to_have_attribute("data-station", "__end__")
    expect(consent).to_be_hidden()
    expect(w.locator(".gl-event-log")).to_contain_text(f"approved · note: {NOTE}")
    expect(w.locator(".gl-step")).to_have_attribute("title", re.compile("the run is done"))
    w.screenshot(path=str(IMG / "run-done.png"))

    # Fork here from the first checkpoint: the child run's widget appears below, at its entry
    handle.focus()
    handle.press("Home")
    expect(selected).to_have_attribute("data-seq", "0")
    w.locator(".gl-fork").click()
    child = w.locator(".gl-run")  # nested in the forks area
    expect(child).to_have_count(1)
    expect(child.locator("svg.gl-graph g.gl-current")).to_have_attribute("data-station", "Write")
    expect(w.locator(".gl-message").first).to_contain_text("Forked checkpoint 0 into run-")

    # ... and in the store: run the SQL cell (not the unattended cell after it)
    sql = page.locator(".jp-CodeCell", has_text="kind = 'verdict'")
    sql.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(sql.locator(".jp-OutputArea-output")).to_contain_text("ship", timeout=30_000)
    expect(sql.locator(".jp-OutputArea-output")).to_contain_text("true")
    assert page.dialogs == [], f"a script ran from escaped content: {page.dialogs}"
