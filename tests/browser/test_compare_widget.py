"""The compare widget (`lab.compare(a, b)` as a cell's value) in a real JupyterLab, driven by Chromium.

Scenario, in one tiny notebook written into the server's root (its own DuckDB file): a counter run
and a fork of it from checkpoint 2 with an edited state (holding markup), compared. The widget
shows one drawing with both paths (side A's stations solid, B's dashed, the shared prefix grey,
one `◆` where they diverged), the first differing station on each side with its inputs (the same
station and checkpoints the library reports, printed by the notebook), the table of state
differences at aligned positions, and the position picker opening one position's full difference.
The markup in the state shows as text and runs nothing. Screenshot: compare-widget.png.
"""

from __future__ import annotations

import re

import nbformat

from .conftest import SCREENSHOTS, Server
from .frontends import open_notebook, output_of, run_all

HOSTILE = "<img src=x onerror=alert(1)>"

CELLS = [
    """
from dataclasses import dataclass, field
from pydantic_graph import BaseNode, End, GraphRunContext
from lab import Lab

lab = Lab("compare.duckdb")

@dataclass
class State:
    count: int = 0
    notes: list[str] = field(default_factory=list)

g = lab.graph("counter", state_type=State, output_type=int)

@g.node
@dataclass
class Inc(BaseNode[State, None, int]):
    by: int = 1
    async def run(self, ctx: GraphRunContext[State, None]) -> "Check":
        ctx.state.count += self.by
        ctx.state.notes.append(f"+{self.by}")
        return Check()

@g.node
@dataclass
class Check(BaseNode[State, None, int]):
    async def run(self, ctx: GraphRunContext[State, None]) -> Inc | End[int]:
        return End(ctx.state.count) if ctx.state.count >= 6 else Inc(by=2)
""",
    f"""
run = g.start(Inc(), state=State())
run.run()
fork = run.fork(2, state=State(count=10, notes=[{HOSTILE!r}]))
fork.run()
cmp = lab.compare(run, fork)
print("SHARED", cmp.shared, "A", cmp.first_a["station"], cmp.first_a["seq"], "B", cmp.first_b["station"], cmp.first_b["seq"])
""",
    "cmp",
]


def _notebook(server: Server) -> str:
    folder = server.root / "compare-widget"
    folder.mkdir(exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src.strip()) for src in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / "compare.ipynb")
    return "compare-widget/compare.ipynb"


def test_compare_widget_shows_both_paths_and_the_differences(page, jupyter_server: Server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    open_notebook(page, jupyter_server, _notebook(jupyter_server), "jupyterlab")
    run_all(page)
    printed = output_of(page, 1).first
    expect(printed).to_contain_text("SHARED")
    m = re.search(r"SHARED (\d+) A (\w+) (\d+) B (\w+) (\d+)", printed.inner_text())
    assert m is not None, printed.inner_text()
    shared, a_station, a_seq, b_station, b_seq = m.groups()

    w = page.locator(".gl-compare")
    expect(w).to_be_visible()
    expect(w.locator(".gl-status")).to_contain_text(re.compile(r"compare A: run-\S+ vs B: run-\S+"))

    # one drawing, both paths: A solid, B dashed, the shared prefix grey, one ◆ where they parted
    drawing = w.locator(".gl-drawing svg.gl-graph")
    expect(drawing).to_have_count(1)
    expect(drawing.locator("g.node.gl-side-a").first).to_be_visible()
    expect(drawing.locator("g.node.gl-side-b").first).to_be_visible()
    expect(drawing.locator("g.node.gl-visited").first).to_be_visible()
    diverged = drawing.locator("g.node.gl-diverged")
    expect(diverged).to_have_count(1)
    expect(diverged).to_contain_text("◆")
    end = drawing.locator('g.node[data-station="__end__"]')
    expect(end).to_have_class(re.compile(r"\bgl-side-a\b.*\bgl-side-b\b"))  # both finished after parting
    expect(end).to_contain_text("A 1 B 1")
    expect(drawing.locator('g.edge.gl-side-b[data-edge="Check→__end__"]')).to_have_count(1)
    expect(w.locator(".gl-legend")).to_contain_text("B (dashed)")

    # the first differing station, each side, with its inputs: what the library reports
    summary = w.locator(".gl-comparison")
    expect(summary).to_contain_text(f"{shared} aligned checkpoints shared; they diverge at position {shared}")
    side = w.locator(".gl-comparison .gl-side")
    expect(side).to_contain_text("First differing station")
    expect(side).to_contain_text(
        re.compile(rf"A: station {a_station} \(run run-\S+, checkpoint \d+ → {a_seq}\)")
    )
    expect(side).to_contain_text(
        re.compile(rf"B: station {b_station} \(run run-\S+, checkpoint \d+ → {b_seq}\)")
    )
    expect(side).to_contain_text(HOSTILE)  # the state B started from, shown as text

    # the state-difference table at aligned positions
    table = w.locator(".gl-comparison table").first
    expect(table.locator("tr").first).to_contain_text("state differences (A → B)")
    changed = table.locator("tr", has_text="count changed")
    expect(changed.first).to_be_visible()
    expect(table).to_contain_text(HOSTILE)

    # the picker opens one position's full difference
    picker = w.locator(".gl-positions select")
    expect(picker).to_be_visible()
    options = picker.locator("option").all_inner_texts()
    differs = [o for o in options if o.endswith("differs")]
    assert differs, options
    picker.select_option(label=differs[-1])
    detail = w.locator(".gl-diff").last
    expect(detail).to_contain_text(f"position {differs[-1].split(':')[0]}:")
    expect(detail.locator("td code").first).to_be_visible()

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    w.screenshot(path=str(SCREENSHOTS / "compare-widget.png"))
    assert page.locator('img[src="x"]').count() == 0
    assert page.dialogs == [], f"a script ran from escaped content: {page.dialogs}"
