"""notebooks/evaluate.ipynb in a real JupyterLab and Jupyter Notebook 7 (headless Chromium), offline:
Run All, then the evaluation's table and its plot, and the comparison's plot, show; every request
the page made went to the Jupyter server (none to a CDN or anywhere else): the matplotlib SVG is in
the output itself. Screenshots land in GRAPHLAB_SCREENSHOT_DIR (docs/img to refresh them)."""

from __future__ import annotations

import nbformat
import pytest

from tests.browser.conftest import SCREENSHOTS
from tests.browser.frontends import FRONTENDS, cell_index, open_notebook, output_of, run_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.mark.parametrize("frontend", FRONTENDS)
def test_evaluation_table_and_plots_render_offline(fresh_page, jupyter_server, frontend: str) -> None:  # noqa: F811
    """A page of its own (`fresh_page`): the requests watched are all the page ever made, JupyterLab's load included."""
    page = fresh_page
    from playwright.sync_api import expect

    copy = jupyter_server.notebook("evaluate.ipynb")  # its own folder and store
    nb = nbformat.read(jupyter_server.root / copy, as_version=4)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, jupyter_server.root / copy)  # this server's own kernel: this interpreter (.venv-evals)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))  # watched, not intercepted
    open_notebook(page, jupyter_server, copy, frontend)
    run_all(page)
    evaluation = output_of(page, cell_index("evaluate.ipynb", "first = lab.evaluate("))
    expect(evaluation.locator("table").first).to_be_visible()
    expect(evaluation.get_by_text("Averages")).to_be_visible()
    plot = evaluation.locator("svg").first
    expect(plot).to_be_visible()
    box = plot.bounding_box()
    assert box is not None and box["width"] > 200 and box["height"] > 100, box
    comparison = output_of(page, cell_index("evaluate.ipynb", "comparison = lab.compare_evaluations("))
    expect(comparison.get_by_text("2 of 20 cases worse")).to_be_visible()
    expect(comparison.locator("svg").first).to_be_visible()
    evaluation.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    evaluation.screenshot(path=str(SCREENSHOTS / f"evaluate-{frontend}.png"))
    elsewhere = [u for u in asked if not u.startswith((jupyter_server.url, "data:", "blob:"))]
    assert asked and not elsewhere, f"the page asked for more than the Jupyter server: {elsewhere[:5]}"
