"""A long Run in a real JupyterLab: the widget updates live, the kernel still answers, Pause stops.

The notebook is written by the test (a slow loop of 2,000 stations, 50 ms each), so the run
is certain to be in flight while the test looks.
"""

from __future__ import annotations

import re

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from .conftest import Server
from .lab_page import open_in_lab
from .waits import KERNEL_UP, SHOWS

SLOW = """import asyncio
from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab

lab = Lab(":memory:")


@dataclass
class S:
    n: int = 0


g = lab.graph("slow", state_type=S, output_type=int)


@g.node
@dataclass
class Tick(BaseNode[S, None, int]):
    async def run(self, ctx: GraphRunContext[S, None]) -> "Tick | End[int]":
        await asyncio.sleep(0.05)
        ctx.state.n += 1
        return End(ctx.state.n) if ctx.state.n >= 2000 else Tick()


run = g.start(Tick(), state=S())
run"""


def _seq(page) -> int:  # type: ignore[no-untyped-def]
    return int(page.locator(".gl-run .gl-selected").get_attribute("data-seq"))


def test_long_run_updates_live_kernel_answers_pause_stops(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    folder = jupyter_server.root / "live"
    folder.mkdir()
    nb = new_notebook(cells=[new_code_cell(SLOW), new_code_cell('print("kernel answers", 6 * 7)')])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nbformat.write(nb, folder / "live.ipynb")
    open_in_lab(page, jupyter_server, "live/live.ipynb")
    expect(page.get_by_text(re.compile(r"\| Idle"))).to_be_visible(timeout=KERNEL_UP)
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.first.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    w = page.locator(".gl-run")
    expect(w.locator(".gl-run-all")).to_be_enabled(timeout=SHOWS)

    w.locator(".gl-run-all").click()
    expect(w.locator(".gl-status")).to_contain_text("run in progress")
    expect(w.locator(".gl-pause")).to_be_enabled()
    page.wait_for_function("() => +document.querySelector('.gl-run .gl-selected').dataset.seq >= 3")
    first = _seq(page)

    # the kernel is free while the run goes on: another cell executes and prints
    cells.nth(1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    expect(cells.nth(1).locator(".jp-OutputArea-output")).to_contain_text("kernel answers 42")
    page.wait_for_function(f"() => +document.querySelector('.gl-run .gl-selected').dataset.seq > {first + 3}")
    expect(w.locator(".gl-status")).to_contain_text("run in progress")  # still going: updated live

    w.locator(".gl-pause").click()
    expect(w.locator(".gl-status")).not_to_contain_text("in progress")
    expect(w.locator(".gl-run-status")).to_have_attribute("data-status", "running")  # paused, not done
    expect(w.locator(".gl-run-status")).to_have_attribute("data-label", "paused")
    expect(w.locator(".gl-run-status")).to_contain_text("❚❚ paused")
    stopped = _seq(page)
    assert first + 3 < stopped < 2000
    expect(w.locator(".gl-event-log tr.gl-ev").first).to_have_class(
        re.compile("gl-ev-settled")
    )  # at a boundary
    page.wait_for_timeout(500)
    assert _seq(page) == stopped  # nothing runs after Pause
    expect(w.locator(".gl-run-all")).to_be_enabled()
    expect(w.locator(".gl-pause")).to_be_disabled()
    assert page.dialogs == []
