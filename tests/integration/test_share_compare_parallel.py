"""`lab.compare` of two parallel runs, super-step by super-step (issue 28 part 3), on a real DuckDB
file and the real `dot`.

Scenario: a map of five numbers over `square`, joined by `collect`, then `total`. A square above
50 takes a detour through `trim` first. Run A squares 1…5 (none above 50); run B is A forked at
the step where the five squares are pending, with a state that adds 100 to the square of 3, so
exactly one branch of B differs (109 goes through `trim`). The comparison:
- aligns the two runs step by step: each row names what each side's step settled (`square ×5`)
  and its frontier after (A: `total`; B: `trim · joins: collect 4 of 5`);
- the first differing step on each side names every task it settled with its inputs (the five
  squares, `{"inputs": 3}` among them) and the state they started from;
- the drawing counts each side's steps as the run widget does (`square` `A 5 B 5`, `trim` `B 1`
  only, never a one-station-per-checkpoint path), and a side compared at a checkpoint where
  tasks are pending lights them (`A ▶ ×5`);
- the widget's position picker and the exported page name the settled stations and frontiers.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import StepContext
from pydantic_graph.join import reduce_list_append

from lab import Lab


@dataclass
class Bump:
    by: dict[str, int] = field(default_factory=dict)
    total: int = 0


async def _square(ctx: StepContext[Bump, None, int]) -> int:
    return ctx.inputs * ctx.inputs + ctx.state.by.get(str(ctx.inputs), 0)


async def _trim(ctx: StepContext[Bump, None, int]) -> int:
    return ctx.inputs - 100


async def _total(ctx: StepContext[Bump, None, list[int]]) -> int:
    ctx.state.total = sum(ctx.inputs)
    return ctx.state.total


@pytest.fixture
def lab(tmp_path) -> Any:
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    yield lab
    lab.close()


def declare(lab: Lab) -> Any:
    g = lab.graph("bumped_squares", state_type=Bump, input_type=list[int], output_type=int)
    square, trim, total = (g.step(f, node_id=f.__name__[1:]) for f in (_square, _trim, _total))
    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).map().to(square),
        g.edge_from(square).to(
            g.decision()
            .branch(g.match(int, matches=lambda v: v > 50).to(trim))
            .branch(g.match(int).to(collect))
        ),
        g.edge_from(trim).to(collect),
        g.edge_from(collect).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return g


def marks(svg: str) -> dict[str, str]:
    """Each station's mark line in a drawing."""
    out = {}
    for station, inner in re.findall(
        r'<g class="node [^"]*" data-station="([^"]*)">((?:(?!</g>).)*)</g>', svg, re.S
    ):
        found = re.search(r'<text class="gl-mark"[^>]*>([^<]*)</text>', inner)
        out[station] = found.group(1).strip() if found else ""
    return out


def test_two_parallel_runs_compare_step_by_step(lab, tmp_path) -> None:
    a = declare(lab).start(inputs=[1, 2, 3, 4, 5], state=Bump())
    a.run()
    pending = next(r.seq for r in a.history() if [p.node_id for p in r.next] == ["square"] * 5)
    b = a.fork(pending, state=Bump(by={"3": 100}))
    b.run()
    assert (a.output, b.output) == (55, 55) and b.state.total == 55

    cmp = lab.compare(a, b)
    assert cmp.parallel and cmp.diverged
    assert cmp.shared == pending  # the fork's edited state is the first difference
    rows = {r.index: r for r in cmp.rows}
    step = rows[pending + 1]  # the five squares, on both sides
    assert step.a["station"] == step.b["station"] == "square ×5"
    assert step.a["settled"] == step.b["settled"] == ["square"] * 5
    assert step.a["frontier"] == "total"  # A's join fired: every branch arrived
    assert step.b["frontier"] == "trim · joins: collect 4 of 5"  # B's third branch took the detour
    b_steps = [e["station"] for e in cmp.b.entries]
    a_steps = [e["station"] for e in cmp.a.entries]
    assert "trim" in b_steps and "trim" not in a_steps
    assert len(b_steps) == len(a_steps) + 1  # the detour is one more super-step
    assert any(c.path == "by.3" for c in step.diff.changes)

    first_a, first_b = cmp.first_a, cmp.first_b
    assert first_a["station"] == first_b["station"] == "square ×5"
    assert sorted(t["fields"]["inputs"] for t in first_b["tasks"]) == [1, 2, 3, 4, 5]
    assert {t["node"] for t in first_b["tasks"]} == {"square"}
    assert first_b["state_before"]["by"] == {"3": 100} and first_a["state_before"]["by"] == {}

    drawn = marks(cmp.svg())
    assert "A 5" in drawn["square"] and "B 5" in drawn["square"]  # five tasks each, not one station
    assert "B 1" in drawn["trim"] and "A" not in drawn["trim"]
    assert "A 1" in drawn["total"] and "B 1" in drawn["total"]
    assert "▶" not in "".join(drawn.values())  # both sides finished: nothing pending

    mid = lab.compare((a, pending), b)  # side A stopped with its five squares pending
    drawn = marks(mid.svg())
    assert "A ▶ ×5" in drawn["square"]
    assert "B 5" in drawn["square"] and "▶" not in drawn["trim"]

    data = cmp.to_json()
    assert data["parallel"] and data["steps"]["b"][1] == ["square"] * 5
    assert {"settled", "tasks", "frontier"} <= set(data["rows"][-2]["a"])

    from lab.widgets.compare_view import CompareView

    view = CompareView(cmp)
    labels = [label for label, _ in view.picker.options]
    assert any("square ×5 → trim · joins: collect 4 of 5" in label for label in labels)
    assert "its tasks&#x27; inputs" in view.summary.value or "its tasks' inputs" in view.summary.value

    page = lab.export_html([a, b], tmp_path / "cmp.html").read_text()
    assert "settled square ×5 · next trim · joins: collect 4 of 5" in page
