"""A parallel graph built cell by cell and stepped in a real JupyterLab and Chromium, on
notebooks/parallel.ipynb: a map of 5 and a broadcast of 3.

Scenarios, in one notebook session:
- `%lab graph`, shown before any step is declared, redraws in place as the cells add the step,
  the join and the map edge (a map fork appears), then the broadcast and its join
- the run widget: Step runs a super-step; the start's routing is checkpointed but is not a step,
  so the first lights the broadcast's three branches at once (the five squares settled); the
  next shows the `summary` join `2 of 3` (its own style) while `count_evens` is lit
- scrubbing the timeline back goes step by step: the three branches, then the start's
  checkpoint, where all five `square` tasks are one lit station marked `▶ ×5`, the `each` edge
  reads `each ×5`, the timeline says `square ×5`
Screenshots (parallel-map.png, parallel-join.png) go to SCREENSHOTS (conftest).
"""

from __future__ import annotations

import re

import nbformat

from .conftest import REPO, SCREENSHOTS, Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, SHOWS

NOTEBOOK = "parallel.ipynb"


def _code(text: str) -> int:
    cells = nbformat.read(REPO / "notebooks" / NOTEBOOK, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.strip().startswith(text))


def test_fan_out_drawn_cell_by_cell_and_lit_step_by_step(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    open_in_lab(page, jupyter_server, jupyter_server.notebook(NOTEBOOK))
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    cells = page.locator(".jp-Notebook .jp-Cell")
    view_at = _code("%lab graph")
    map_at = _code('g.add(\n    g.edge_from(g.start_node).label("numbers")')
    fan_at = _code("g.add(\n    g.edge_from(collect)")
    start_at = _code("run = g.start(")

    cells.first.click()
    page.keyboard.press("Escape")  # command mode: Shift+Enter runs a cell and moves on
    for _ in range(view_at + 1):
        page.keyboard.press("Shift+Enter")
    view = cells.nth(view_at).locator(".jp-OutputArea-output")
    expect(view.locator("svg.gl-graph")).to_be_visible(timeout=SHOWS)
    expect(view.locator("svg.gl-graph g.gl-step")).to_have_count(0)

    for _ in range(map_at - view_at):
        page.keyboard.press("Shift+Enter")
    # the same output, redrawn: the map fork, the step and its join
    expect(view.locator('svg.gl-graph g.gl-map[data-station="map"]')).to_be_visible(timeout=SHOWS)
    expect(view.locator('svg.gl-graph g.gl-step[data-station="square"]')).to_be_visible()
    expect(view.locator('svg.gl-graph g.gl-join[data-station="reduce_list_append"]')).to_be_visible()
    expect(view).to_have_count(1)

    for _ in range(fan_at - map_at):
        page.keyboard.press("Shift+Enter")
    expect(view.locator('svg.gl-graph g.gl-broadcast[data-station="broadcast"]')).to_be_visible(
        timeout=SHOWS
    )
    expect(view.locator("svg.gl-graph g.gl-join")).to_have_count(2)
    expect(view.locator("svg.gl-graph g.gl-step")).to_have_count(5)
    expect(view.locator('svg.gl-graph g[data-edge="__start__→map"]')).to_contain_text("numbers")

    for _ in range(start_at - fan_at):
        page.keyboard.press("Shift+Enter")
    w = page.locator(".gl-run")
    expect(w).to_be_visible(timeout=SHOWS)
    lit = w.locator("svg.gl-graph g.gl-current")
    selected = w.locator(".gl-selected")
    expect(selected).to_have_attribute("data-seq", "0")

    # step 1: the start's routing (checkpoint 1, not a step) spreads five numbers over `square`; the five
    # squares settle, the join fires, the broadcast lights three branches (issue 24 item 10)
    w.locator("button.gl-step").click()
    expect(selected).to_have_attribute("data-seq", "2")
    expect(lit).to_have_count(3)
    assert sorted(lit.nth(i).get_attribute("data-station") for i in range(3)) == ["biggest", "evens", "total"]
    expect(w.locator('svg.gl-graph g.gl-visited[data-station="square"]')).to_contain_text("×5")

    # step 2: two branches reached the summary join; count_evens still runs
    w.locator("button.gl-step").click()
    expect(selected).to_have_attribute("data-seq", "3")
    join = w.locator('svg.gl-graph g[data-station="reduce_dict_update"]')
    expect(join).to_contain_text("2 of 3")
    expect(join).to_have_class(re.compile(r"\bgl-joining\b"))
    expect(lit).to_have_attribute("data-station", "count_evens")
    expect(selected).to_contain_text("reduce_dict_update 2 of 3")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    w.screenshot(path=str(SCREENSHOTS / "parallel-join.png"))

    # the timeline scrubs back step by step, to the map spread over `square`: one lit station, five tasks
    handle = w.locator(".gl-timeline .noUi-handle")
    handle.focus()
    handle.press("ArrowLeft")
    expect(selected).to_have_attribute("data-seq", "2")
    expect(lit).to_have_count(3)
    expect(join).not_to_contain_text("of 3")
    handle.press("ArrowLeft")
    expect(selected).to_have_attribute("data-seq", "1")
    expect(lit).to_have_count(1)
    expect(lit).to_have_attribute("data-station", "square")
    expect(lit).to_contain_text("▶ ×5")
    expect(w.locator('svg.gl-graph g.gl-trav[data-edge="map→square"]')).to_contain_text("each ×5")
    expect(selected).to_contain_text("next square ×5")
    w.screenshot(path=str(SCREENSHOTS / "parallel-map.png"))
    assert page.dialogs == []
