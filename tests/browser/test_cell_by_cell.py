"""Cell by cell in a real JupyterLab and Chromium, on notebooks/quickstart.ipynb.

Scenarios, in one notebook session:
- `%lab graph`, shown after `Inc` and before `Check` is declared, draws `Check` as missing
- running the `Check` cell redraws that same output in place (no new output): `Check` is a
  declared node now and nothing is missing
- `%lab step 2` after a Python `g.start(...)` steps that run and shows a table of the steps
- renaming `Inc` in its cell and running it again (JupyterLab sends the cell id) removes the
  old node and says so in the cell's output
The screenshot for the README is cell-by-cell.png in SCREENSHOTS (conftest: set
GRAPHLAB_SCREENSHOT_DIR=docs/img to refresh the README's copy).
"""

from __future__ import annotations

import re

import nbformat

from .conftest import REPO, SCREENSHOTS, Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, SHOWS

NOTEBOOK = "quickstart.ipynb"
IMG = SCREENSHOTS


def _index(predicate) -> int:  # type: ignore[no-untyped-def]
    cells = nbformat.read(REPO / "notebooks" / NOTEBOOK, as_version=4).cells
    return next(i for i, c in enumerate(cells) if predicate(c))


def _code(text: str) -> int:
    return _index(lambda c: c.cell_type == "code" and c.source.strip().startswith(text))


def _screenshot(page, first, last) -> None:  # type: ignore[no-untyped-def]
    """The cells from `first` to `last` (the notebook scrolls inside its panel, not the page)."""
    first.evaluate("el => el.scrollIntoView({block: 'start'})")
    top, bottom = first.bounding_box(), last.bounding_box()
    assert top is not None and bottom is not None
    IMG.mkdir(parents=True, exist_ok=True)
    height = bottom["y"] + bottom["height"] - top["y"]
    page.screenshot(
        path=str(IMG / "cell-by-cell.png"),
        clip={"x": top["x"], "y": top["y"], "width": top["width"], "height": height},
    )


def test_graph_grows_cell_by_cell(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    open_in_lab(page, jupyter_server, f"notebooks/{NOTEBOOK}")
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    cells = page.locator(".jp-Notebook .jp-Cell")
    view_at, check_at, step_at = (
        _code("%lab graph"),
        _code("@g.node\n@dataclass\nclass Check"),
        _code("%lab step 2"),
    )
    inc_at = _code("@g.node\n@dataclass\nclass Inc")

    cells.first.click()
    page.keyboard.press("Escape")  # command mode: Shift+Enter runs a cell and moves on
    for _ in range(view_at + 1):
        page.keyboard.press("Shift+Enter")
    view = cells.nth(view_at).locator(".jp-OutputArea-output")
    expect(view.locator('svg.gl-graph g.gl-missing[data-station="Check"]')).to_be_visible(timeout=SHOWS)
    expect(view).to_have_count(1)

    for _ in range(check_at - view_at):
        page.keyboard.press("Shift+Enter")
    # the same output, redrawn in place: Check is declared now, nothing is missing
    expect(view.locator('svg.gl-graph g.gl-node[data-station="Check"]')).to_be_visible(timeout=SHOWS)
    expect(view.locator("svg.gl-graph g.gl-missing")).to_have_count(0)
    expect(view).to_have_count(1)
    _screenshot(page, cells.nth(inc_at), cells.nth(check_at))

    for _ in range(step_at - check_at):
        page.keyboard.press("Shift+Enter")
    steps = cells.nth(step_at).locator(".jp-OutputArea-output")
    expect(steps).to_contain_text("2 step(s) of run-", timeout=SHOWS)
    expect(steps.locator("table")).to_contain_text("settled")

    # rename Inc in its cell and run it again: the old node goes, with a note in the output
    inc = cells.nth(inc_at)
    inc.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Home")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")  # the `class Inc(...)` line
    page.keyboard.press("Home")
    for _ in range(len("class Inc")):
        page.keyboard.press("ArrowRight")
    page.keyboard.type("rement")
    page.keyboard.press("Control+Enter")
    note = inc.locator(".jp-OutputArea-output")
    expect(note).to_contain_text("this cell used to declare Inc and now declares Increment", timeout=30_000)
    expect(note).to_contain_text("Check still return(s) Inc")
    # the live view follows: Increment is declared, and Check's hint now names a missing Inc
    expect(view.locator('svg.gl-graph g.gl-node[data-station="Increment"]')).to_be_visible()
    expect(view.locator('svg.gl-graph g.gl-missing[data-station="Inc"]')).to_be_visible()
    assert page.dialogs == []
