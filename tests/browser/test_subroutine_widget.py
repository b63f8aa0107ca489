"""A subroutine run in a real JupyterLab and Chromium, on notebooks/subroutines.ipynb (issue 18).

Scenario: run the notebook's cells up to the refused ambiguous edge; the run widget shows the
failure (AmbiguousEdgeError, and that external effects are not undone), the graph labels edges
with their effects, and the state inspector shows the checkpoint as payload, params, node-local
state and feature state; scrubbing the timeline back to checkpoint 2 shows the feature's first
assignment there and in the diff panel, and checkpoint 0 shows every feature still null.
"""

from __future__ import annotations

import nbformat

from .conftest import REPO, SCREENSHOTS, Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, SHOWS

NOTEBOOK = "subroutines.ipynb"


def _refused_cell() -> int:
    cells = nbformat.read(REPO / "notebooks" / NOTEBOOK, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and 'sub.start("hi"' in c.source)


def test_widget_shows_node_local_and_feature_state_per_checkpoint(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    """Seed 000: "Node-local State ... retained across revisits" and "Feature state ... initially None in each
    graph invocation. Edge conditions observe it" — time travel shows both per checkpoint; "Zero or multiple
    compatible edges raise an exception; the candidate state does not become the next graph state. This
    commit rule does not undo files, agent requests, or other external effects" — the widget says so."""
    import re

    from playwright.sync_api import expect

    open_in_lab(page, jupyter_server, jupyter_server.notebook(NOTEBOOK))
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    page.locator(".jp-Notebook .jp-Cell").first.click()
    page.keyboard.press("Escape")
    for _ in range(_refused_cell() + 1):
        page.keyboard.press("Shift+Enter")

    w = page.locator(".gl-run")
    expect(w).to_be_visible(timeout=SHOWS)
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "failed", timeout=SHOWS)
    expect(w.locator(".gl-message")).to_contain_text("AmbiguousEdgeError")
    expect(w.locator(".gl-message")).to_contain_text("not undone")
    graph = w.locator("svg.gl-graph")
    expect(graph).to_contain_text("length := *")
    expect(graph).to_contain_text("length := 'long'")

    state = w.locator(".gl-state")
    sections = state.locator("h5.gl-section")
    expect(sections).to_have_text(
        [re.compile(r"^payload \(input of measure\)$"), "params", "node-local state", "feature state"]
    )
    expect(state).to_contain_text('"short"')
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    w.screenshot(path=str(SCREENSHOTS / "subroutine-widget.png"))

    selected = w.locator(".gl-selected")
    handle = w.locator(".gl-timeline .noUi-handle")
    handle.focus()
    handle.press("Home")
    expect(selected).to_have_attribute("data-seq", "0")
    expect(state).to_contain_text("null")
    expect(state).not_to_contain_text('"short"')
    handle.press("ArrowRight")
    handle.press("ArrowRight")
    expect(selected).to_have_attribute("data-seq", "2")
    expect(state).to_contain_text('"short"')
    expect(w.locator(".gl-diff-panel")).to_contain_text("features.length")
