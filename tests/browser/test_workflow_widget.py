"""A workflow run in a real JupyterLab and Chromium, on notebooks/workflow.ipynb (issue 19).

Scenario, in one notebook session: the run parks at the triage checkpoint; the consent panel
offers the checkpoint's choices as buttons (Approve / Deny hidden); the graph labels exits with
their `when` and draws the default exits dashed; the state inspector shows the variable bag.
Clicking "Deep review" records the choice and runs the workflow to End; the manifest warning
shows in the event log.
"""

from __future__ import annotations

import re

import nbformat

from .conftest import REPO, SCREENSHOTS, Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, SHOWS

NOTEBOOK = "workflow.ipynb"


def _start_cell() -> int:
    cells = nbformat.read(REPO / "notebooks" / NOTEBOOK, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and "wf.start(" in c.source)


def test_checkpoint_choices_are_buttons(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    """Your choice at a checkpoint carries a declared setVariable effect (seed 004): the consent
    panel offers the checkpoint's choices as buttons."""
    from playwright.sync_api import expect

    open_in_lab(page, jupyter_server, jupyter_server.notebook(NOTEBOOK))
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")
    for _ in range(_start_cell() + 1):
        page.keyboard.press("Shift+Enter")

    w = page.locator(".gl-run")
    expect(w).to_be_visible(timeout=SHOWS)
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "waiting")
    consent = w.locator(".gl-consent")
    expect(consent).to_be_visible()
    expect(consent).to_contain_text("How thorough should the review be?")
    expect(consent.locator(".gl-approve")).to_be_hidden()
    expect(consent.locator(".gl-note")).to_be_hidden()
    choices = consent.locator(".gl-choice")
    expect(choices).to_have_text(["Deep review", "Quick look", "Skip the review"])
    expect(w.locator(".gl-step")).to_have_attribute("title", re.compile("triage waits for a choice"))
    expect(w.locator("svg.gl-graph g.gl-parked")).to_have_attribute("data-station", "triage")

    graph = w.locator("svg.gl-graph")
    expect(graph).to_contain_text("urgent: has_critical_bugs && bug_count > 0")
    expect(graph).to_contain_text("done (default)")
    assert graph.locator('path[stroke-dasharray="5,2"]').count() >= 3  # the three default exits
    state = w.locator(".gl-state")
    expect(state).to_contain_text("review_mode")
    expect(state).to_contain_text("review PR 12")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    w.screenshot(path=str(SCREENSHOTS / "workflow-checkpoint.png"))

    choices.first.click()
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "done", timeout=SHOWS)
    expect(consent).to_be_hidden()
    expect(state).to_contain_text('"deep"')
    expect(w.locator(".gl-event-log")).to_contain_text("⚠ step lint reported output key(s) ['style']")
    expect(w.locator(".gl-event-log")).to_contain_text('"answer": "deep"')
