"""The run widget over parallel runs: each checkpoint a super-step, drawn as its whole frontier.

Scenarios (real runs on the super-step engine, a DuckDB store in memory):
- a map of 5 declared on `lab.graph`: Step lights `square` once with `▶ ×5`, the `each` edge
  reads `each ×5`, the timeline is labelled "step" and says `square ×5`; the last step lights End
- a broadcast of 3 with one branch a step longer, adopted from a native graph: the three branches
  light at once, then the join shows `2 of 3` (`gl-joining`) while the long branch is lit
- scrubbing the timeline back redraws the earlier frontier; a rewound branch counts only its steps
(tests/browser/test_parallel_view.py shows the same in a real JupyterLab and Chromium.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append, reduce_sum

from lab import Lab
from lab.widgets import RunWidget


@pytest.fixture
def mem_lab():
    lab = Lab(":memory:")
    yield lab
    lab.close()


def lit(w: RunWidget) -> list[str]:
    return re.findall(r'<g class="node [^"]*gl-current[^"]*" data-station="([^"]*)"', w.graph.value)


def marks(w: RunWidget, station: str) -> str:
    m = re.search(
        rf'data-station="{station}">.*?<text class="gl-mark"[^>]*>([^<]*)</text>', w.graph.value, re.S
    )
    assert m is not None, station
    return m.group(1)


def edge_label(w: RunWidget, edge: str) -> str:
    m = re.search(rf'data-edge="{edge}">.*?</g>', w.graph.value, re.S)
    assert m is not None, edge
    texts = re.findall(r"<text [^>]*>([^<]*)</text>", m.group(0))
    return texts[-1] if texts else ""


@dataclass
class Tally:
    squared: int = 0


def declare_squares(lab: Lab):
    g = lab.graph("squares", state_type=Tally, input_type=list[int], output_type=list[int])

    @g.step
    async def square(ctx: StepContext[Tally, None, int]) -> int:
        ctx.state.squared += 1
        return ctx.inputs**2

    collect = g.join(reduce_list_append, initial_factory=list[int])
    g.add(
        g.edge_from(g.start_node).label("numbers").map().label("each").to(square),
        g.edge_from(square).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g


def test_map_of_five_lights_one_station_with_five_tasks(mem_lab):
    run = declare_squares(mem_lab).start(inputs=[1, 2, 3, 4, 5])
    w = RunWidget(run)
    assert w.slider.description == "step" and lit(w) == ["__start__"]
    w.step_btn.click()  # the start's routing (checkpoint 1, not a step), then the five squares (issue 24 item 10)
    assert w.wait(10)
    assert run.status == "done" and run.output == [1, 4, 9, 16, 25]
    assert lit(w) == ["__end__"] and marks(w, "square") == "×5"
    assert 'class="node gl-join gl-visited" data-station="reduce_list_append"' in w.graph.value
    w.slider.value = 1  # scrub back to the start's checkpoint: the five tasks pending
    assert w.selected_seq == 1 and lit(w) == ["square"] and marks(w, "square") == "▶ ×5"
    assert (
        edge_label(w, "map&#8594;square") == "each ×5"
        and 'class="edge gl-trav" data-edge="__start__&#8594;map"' in w.graph.value
    )
    assert "next square ×5" in w.timeline_label.value
    w.rewind_btn.click()  # a new branch from step 1: the abandoned step is not counted
    w.step_btn.click()
    assert w.wait(10)
    assert run.status == "done" and marks(w, "square") == "×5" and w.slider.max == 2


def fan_graph():
    g = GraphBuilder(input_type=int, output_type=int)

    @g.step
    async def a(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs + 1

    @g.step
    async def b(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs + 2

    @g.step
    async def b2(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs * 2

    @g.step
    async def c(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs + 3

    total = g.join(reduce_sum, initial=0)
    g.add(
        g.edge_from(g.start_node).to(a, b, c),
        g.edge_from(b).label("twice").to(b2),
        g.edge_from(a, b2, c).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return g.build()


def test_broadcast_of_three_shows_the_join_filling(mem_lab):
    run = mem_lab.adopt(fan_graph(), name="fan").start(inputs=1)
    w = RunWidget(run)
    w.step_btn.click()  # the start's routing (checkpoint 1, not a step), then a, b and c (issue 24 item 10)
    assert w.wait(10)
    assert lit(w) == ["b2"] and marks(w, "reduce_sum") == "join 2 of 3"
    assert 'class="node gl-join gl-joining" data-station="reduce_sum"' in w.graph.value
    assert "next b2 · joins: reduce_sum 2 of 3" in w.timeline_label.value
    assert edge_label(w, "b&#8594;b2") == "twice"
    w.slider.value = 1  # the start's checkpoint: the broadcast's three branches pending
    assert sorted(lit(w)) == ["a", "b", "c"]
    w.slider.value = 2
    w.run_btn.click()
    assert w.wait(10)
    assert run.output == 12 and lit(w) == ["__end__"] and 'gl-joining" data-station' not in w.graph.value
