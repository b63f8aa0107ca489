"""Driving a notebook in either frontend the lab supports: JupyterLab and Jupyter Notebook 7.

Both are the same Lumino application underneath (cells are `.jp-Cell`, outputs
`.jp-OutputArea-output`, menus are Lumino menus), so a test written against these helpers runs
in both: only the URL of a notebook and the wait for its kernel differ.
"""

from __future__ import annotations

import re

import nbformat

from .conftest import REPO, Server
from .waits import KERNEL_UP, RUN_ALL

FRONTENDS = ("jupyterlab", "notebook7")


def open_notebook(page, server: Server, path: str, frontend: str) -> None:  # type: ignore[no-untyped-def]
    """Open `path` (relative to the server's root) in `frontend` and wait for its cells."""
    from playwright.sync_api import expect

    if frontend == "jupyterlab":
        url = server.lab_url(path)
    else:
        url = f"{server.url}/notebooks/{path}?token={server.token}"
    page.goto(url)
    expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=KERNEL_UP)
    if frontend == "jupyterlab":
        # The toolbar says idle before the kernel exists; the status bar's "| Idle" means it is up.
        expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    else:
        expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached(
            timeout=KERNEL_UP
        )


def run_all(page) -> None:  # type: ignore[no-untyped-def]
    """Run > Run All Cells, from the menu bar, as a person would; wait until every code cell ran."""
    from playwright.sync_api import expect

    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt")
    expect(prompts.first).to_have_text(re.compile(r"\[[\d*]+\]"), timeout=KERNEL_UP)
    # Run All queues every cell at once ("[*]"); a failing cell un-queues the rest, so the run is
    # over when no cell is queued any more, whether or not every cell ran.
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
        ".every(p => !p.textContent.includes('*'))",
        timeout=RUN_ALL,
    )
    texts = prompts.all_inner_texts()
    unrun = [i for i, t in enumerate(texts) if not re.search(r"\[\d+\]", t)]
    assert not unrun, f"Run All stopped before code cells {unrun}; what the notebook shows:\n{outputs_text(page)}"


def cell_index(notebook: str, startswith: str, *, exact: bool = False) -> int:
    """The index of the code cell of notebooks/<notebook> whose source starts with (or is) the text."""
    cells = nbformat.read(REPO / "notebooks" / notebook, as_version=4).cells
    found = [
        i
        for i, c in enumerate(cells)
        if c.cell_type == "code" and (c.source.strip() == startswith if exact else c.source.startswith(startswith))
    ]
    assert len(found) == 1, (notebook, startswith, found)
    return found[0]


def output_of(page, index: int):  # type: ignore[no-untyped-def]
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-OutputArea-output")


def outputs_text(page) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
