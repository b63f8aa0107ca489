"""Two notebooks open at once in one JupyterLab, one store (issue 14), driven by Chromium.

Both notebooks say `Lab()` in the same folder, so both kernels use `.graphlab/lab.duckdb`. Each
starts a run and shows its widget; the test clicks Step in one tab, then in the other, then in the
first again: every click moves that run (no `StoreLockedError`), and each notebook lists the
other's run. The run view of one notebook follows the other notebook's run when it shows it.
"""

from __future__ import annotations

import re

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from .conftest import Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, SHOWS

DECLARE = """from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab

lab = Lab()


@dataclass
class S:
    n: int = 0


g = lab.graph("{name}", state_type=S, output_type=int)


@g.node
@dataclass
class Tick(BaseNode[S, None, int]):
    async def run(self, ctx: GraphRunContext[S, None]) -> "Tick | End[int]":
        ctx.state.n += 1
        return End(ctx.state.n) if ctx.state.n >= 50 else Tick()


run = g.start(Tick(), state=S())
run"""

LIST = 'print("runs:", sorted(r.graph_key for r in lab.runs()))'

FOLLOW = """lab.graph("{other}", state_type=S, output_type=int).node(Tick)  # the same source: the same revision
other = lab.resume(next(r.run_id for r in lab.runs() if r.graph_key == "{other}"))
other"""


def _notebook(folder, name: str, other: str) -> None:  # type: ignore[no-untyped-def]
    nb = new_notebook(
        cells=[
            new_code_cell(DECLARE.replace("{name}", name)),
            new_code_cell(LIST),
            new_code_cell(FOLLOW.replace("{other}", other)),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, folder / f"{name}.ipynb")


def test_two_notebooks_in_one_jupyterlab_step_a_run_each(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    folder = jupyter_server.root / "two"
    folder.mkdir()
    _notebook(folder, "left", "right")
    _notebook(folder, "right", "left")
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")  # the notebook in the active tab

    def run_cell(i: int) -> None:
        panel.locator(".jp-Cell").nth(i).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Control+Enter")

    def seq(widget) -> int:  # type: ignore[no-untyped-def]
        return int(widget.locator(".gl-selected").get_attribute("data-seq"))

    def step(widget, to: int) -> None:  # type: ignore[no-untyped-def]
        widget.locator(".gl-step").click()
        expect(widget.locator(".gl-selected")).to_have_attribute("data-seq", str(to))

    # the first notebook: its kernel starts a run, Step moves it
    open_in_lab(page, jupyter_server, "two/left.ipynb")
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    run_cell(0)
    left = panel.locator(".gl-run").first
    expect(left.locator(".gl-step")).to_be_enabled(timeout=SHOWS)
    step(left, 1)

    # the second notebook opens beside it from the file browser, in the same JupyterLab, while the
    # first kernel lives
    item = page.locator(".jp-DirListing-item", has_text="right.ipynb")
    if not item.is_visible():
        page.locator(".jp-SideBar .lm-TabBar-tab[data-id='filebrowser']").click()
    item.dblclick()
    expect(page.locator(".lm-TabBar-tab", has_text="left.ipynb")).to_be_visible(timeout=SHOWS)
    expect(page.locator(".lm-TabBar-tab.lm-mod-current", has_text="right.ipynb")).to_be_visible(timeout=SHOWS)
    expect(panel.locator(".jp-Cell").first).to_be_visible(timeout=KERNEL_UP)
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)  # its kernel is up
    run_cell(0)
    right = panel.locator(".gl-run").first
    expect(right.locator(".gl-step")).to_be_enabled(timeout=KERNEL_UP)
    step(right, 1)
    step(right, 2)
    run_cell(1)
    expect(panel.locator(".jp-Cell").nth(1).locator(".jp-OutputArea-output")).to_contain_text(
        "runs: ['left', 'right']"
    )
    # the left run, shown here: it follows the left notebook's steps; Step says where it is advanced
    run_cell(2)
    follower = panel.locator(".gl-run").nth(1)
    expect(follower.locator(".gl-selected")).to_have_attribute("data-seq", "1", timeout=30_000)
    expect(follower.locator(".gl-step")).to_be_disabled()
    expect(follower.locator(".gl-step")).to_have_attribute("title", re.compile(r"process \d+ on host .* advances this run"))

    # back to the first tab: Step still works there, and the second notebook's view follows it
    page.locator(".lm-TabBar-tab", has_text="left.ipynb").click()
    left = panel.locator(".gl-run").first
    step(left, 2)
    step(left, 3)
    run_cell(1)
    expect(panel.locator(".jp-Cell").nth(1).locator(".jp-OutputArea-output")).to_contain_text(
        "runs: ['left', 'right']"
    )
    page.locator(".lm-TabBar-tab", has_text="right.ipynb").click()
    follower = panel.locator(".gl-run").nth(1)
    expect(follower.locator(".gl-selected")).to_have_attribute("data-seq", "3", timeout=10_000)
    right = panel.locator(".gl-run").first
    step(right, 3)
    assert page.dialogs == []
    assert seq(right) == 3
