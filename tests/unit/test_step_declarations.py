"""Step-style declarations on a lab graph (`@g.step`, `g.join`, `g.add(g.edge_from(...)...)`), cell by cell.

Scenarios:
- a chain of steps declared on `lab.graph(...)` runs from `g.start(inputs=...)` to the output
  native `Graph.run` gives for the same graph built with `GraphBuilder`, and draws its labels
- a map + join and a broadcast of three draw as native Mermaid does (forks, joins, labels),
  and the map runs on the super-step engine to native's output
- re-declaring a step (a re-run cell) replaces it everywhere an edge names it: new revision,
  new output; the same edge added twice is one edge
- an edge naming a step no longer declared, an unfinished edge, a sync step function, and
  inputs of the wrong type are refused with what to do
- with the kernel extension: a cell re-run that changes `.to(b)` into `.to(c)` drops the old
  edge and says so; the live `%lab graph` view redraws as the cells add a fan-out; a renamed
  step's cell drops the old step and names the edges that still use it; `%lab start inputs=...`
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append, reduce_sum

from lab import GraphDefinitionError, Lab
from lab.errors import StateContractError
from lab.render import spec_for


@dataclass
class Bag:
    seen: list[int]

    def __init__(self) -> None:
        self.seen = []


@pytest.fixture
def mlab():
    lab = Lab(":memory:")
    yield lab
    lab.close()


async def double(ctx: StepContext[Bag, None, int]) -> int:
    ctx.state.seen.append(ctx.inputs)
    return ctx.inputs * 2


async def inc(ctx: StepContext[Bag, None, int]) -> int:
    ctx.state.seen.append(ctx.inputs)
    return ctx.inputs + 1


async def square(ctx: StepContext[Bag, None, int]) -> int:
    return ctx.inputs**2


def declare_chain(lab: Lab):
    g = lab.graph("chain", state_type=Bag, input_type=int, output_type=int)
    d, i = g.step(double), g.step(inc)
    g.add(g.edge_from(g.start_node).to(d))
    g.add(g.edge_from(d).label("twice").to(i))
    g.add(g.edge_from(i).to(g.end_node))
    return g


def native_chain():
    b = GraphBuilder(state_type=Bag, input_type=int, output_type=int)
    d, i = b.step(double), b.step(inc)
    b.add(b.edge_from(b.start_node).to(d), b.edge_from(d).label("twice").to(i), b.edge_from(i).to(b.end_node))
    return b.build()


def _edges(mermaid: str) -> set[str]:
    return {ln.strip().replace(": End", "") for ln in mermaid.splitlines() if "-->" in ln}


def test_declared_chain_runs_like_native_and_draws_its_labels(mlab):
    g = declare_chain(mlab)
    run = g.start(inputs=5)
    assert run.step().node_id == "double"  # the start routes, it is not a step (issue 24 item 10)
    assert run.next_stations == ("inc",)
    run.run()
    native_state = Bag()
    native_out = asyncio.run(native_chain().run(inputs=5, state=native_state))
    assert (
        (run.status, run.output, run.state.seen)
        == ("done", native_out, native_state.seen)
        == ("done", 11, [5, 10])
    )
    assert _edges(g.mermaid()) == _edges(native_chain().render())
    assert "double -> inc [label=twice]" in g.render()
    assert g.edges == ["start -> double", "double -> label('twice') -> inc", "inc -> end"]


def declare_squares(lab: Lab):
    g = lab.graph("squares", state_type=Bag, input_type=list[int], output_type=list[int])
    sq = g.step(square)
    collect = g.join(reduce_list_append, initial_factory=list[int])
    g.add(
        g.edge_from(g.start_node).label("items").map().label("each").to(sq),
        g.edge_from(sq).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g


def test_fan_outs_draw_as_native_mermaid_does(mlab):
    g = declare_squares(mlab)
    b = GraphBuilder(state_type=Bag, input_type=list[int], output_type=list[int])
    sq = b.step(square)
    collect = b.join(reduce_list_append, initial_factory=list[int])
    b.add(
        b.edge_from(b.start_node).label("items").map().label("each").to(sq),
        b.edge_from(sq).to(collect),
        b.edge_from(collect).to(b.end_node),
    )
    assert _edges(g.mermaid()) == _edges(b.build().render())
    native_state = Bag()
    native_out = asyncio.run(b.build().run(inputs=[3, 1, 2], state=native_state))
    run = g.start(inputs=[3, 1, 2])
    assert run.step().tasks == ("square",) * 3  # the start routes (not a step); one super-step: three tasks
    assert run.checkpoint(1).next_stations == ("square",) * 3  # the start's checkpoint holds them pending
    assert run.output == native_out == [9, 1, 4]
    kinds = {n.id: n.kind for n in spec_for(g).nodes}
    assert kinds == {
        "__start__": "start",
        "map": "map",
        "square": "step",
        "reduce_list_append": "join",
        "__end__": "end",
    }

    fan = mlab.graph("fan", input_type=int, output_type=int)
    steps = [fan.step(fn) for fn in (double, inc, square)]
    total = fan.join(reduce_sum, initial=0)
    fan.add(
        fan.edge_from(fan.start_node).to(*steps),
        fan.edge_from(*steps).to(total),
        fan.edge_from(total).to(fan.end_node),
    )
    assert re.search(r"state broadcast <<fork>>", fan.mermaid())
    assert {n.kind for n in spec_for(fan).nodes} >= {"broadcast", "join", "step"}
    assert fan.edges == [
        "start -> broadcast[double | inc | square]",
        "double,inc,square -> reduce_sum",
        "reduce_sum -> end",
    ]


def test_redeclared_step_replaces_it_on_every_edge(mlab):
    g = declare_chain(mlab)
    first = g.revision
    assert g.start(inputs=5).run().output == 11

    async def double(ctx: StepContext[Bag, None, int]) -> int:  # the cell, edited and run again
        return ctx.inputs * 3

    g.step(double)
    g.add(g.edge_from(g.start_node).to(g.steps["double"]))  # the same edge again: still one
    assert len(g.edges) == 3 and g.revision > first
    assert g.start(inputs=5).run().output == 16


def test_bad_declarations_say_what_to_do(mlab):
    g = declare_chain(mlab)
    g.remove("inc")
    with pytest.raises(
        GraphDefinitionError,
        match=r"the edge double -> label\('twice'\) -> inc names step 'inc', which is no longer declared",
    ):
        g.build()
    dot = g.render()  # still draws: the step an edge names, dashed and marked missing
    assert 'inc [label="inc\\nmissing"' in dot and "double -> inc [label=twice]" in dot
    with pytest.raises(GraphDefinitionError, match=r"finish it with \.to\(\.\.\.\)"):
        g.add(g.edge_from(g.start_node).map())
    with pytest.raises(GraphDefinitionError, match="expects an async function"):
        g.step(lambda ctx: 1)
    g.step(inc)
    with pytest.raises(
        StateContractError, match=r"starts from inputs of type 'int'; start\(inputs=...\) got 'five'"
    ):
        g.start(inputs="five")
    with pytest.raises(GraphDefinitionError, match="has no node, step, join or edge 'nope'"):
        g.remove("nope")


# -- cell by cell, with the kernel extension ------------------------------------------------

FAN_CELLS = [
    """
from dataclasses import dataclass, field
from pydantic_graph import StepContext
from pydantic_graph.join import reduce_sum
from lab import Lab
lab = Lab(':memory:')
g = lab.graph("fan", input_type=int, output_type=int)
""",
    """
@g.step
async def a(ctx: StepContext[None, None, int]) -> int:
    return ctx.inputs + 1

@g.step
async def b(ctx: StepContext[None, None, int]) -> int:
    return ctx.inputs + 2
""",
    "total = g.join(reduce_sum, initial=0)",
    "g.add(g.edge_from(g.start_node).to(a, b), g.edge_from(a, b).to(total), g.edge_from(total).to(g.end_node))",
]


def test_cells_build_a_fan_out_and_a_rerun_edge_cell_replaces_its_edges(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.unit.test_kernel_ext import get_ipython, lab_magic, run_cells

    widgets = pytest.importorskip("lab.widgets")
    ip = get_ipython()
    ip.run_line_magic("load_ext", "kernel_ext")
    try:
        run_cells(ip, FAN_CELLS[:2], prefix="fan")
        g = ip.user_ns["g"]
        view = lab_magic(ip, "graph")
        assert isinstance(view, widgets.GraphView)
        empty = view.value
        run_cells(ip, FAN_CELLS[2:], prefix="fan-later")
        assert view.value != empty and 'data-station="broadcast"' in view.value
        assert 'class="node gl-join" data-station="reduce_sum"' in view.value

        before = list(g.edges)
        ip.run_cell(FAN_CELLS[3], cell_id="fan-later-1")  # the same cell again: nothing doubles
        assert g.edges == before and "removed" not in capsys.readouterr().err
        changed = FAN_CELLS[3].replace(".to(a, b)", ".to(a)").replace("edge_from(a, b)", "edge_from(a)")
        result = ip.run_cell(changed, cell_id="fan-later-1")
        assert result.success
        err = capsys.readouterr().err
        assert "this cell used to declare edge start -> broadcast[a | b], edge a,b -> reduce_sum" in err
        assert g.edges == ["reduce_sum -> end", "start -> a", "a -> reduce_sum"]
        assert 'data-station="broadcast"' not in view.value  # the live view redrew: no fork now
        assert g.start(inputs=1).run().output == 2
    finally:
        ip.run_line_magic("unload_ext", "kernel_ext")
        lab: Any = ip.user_ns.get("lab")
        if isinstance(lab, Lab) and not lab.store.closed:
            lab.close()
        for name in ("lab", "g", "a", "b", "total"):
            ip.user_ns.pop(name, None)


def test_magic_starts_a_step_graph_from_its_inputs() -> None:
    from tests.unit.test_kernel_ext import get_ipython, lab_magic, run_cells

    ip = get_ipython()
    ip.run_line_magic("load_ext", "kernel_ext")
    try:
        run_cells(
            ip,
            [
                "from lab import Lab\nfrom tests.unit import test_step_declarations as t\nlab = Lab(':memory:')",
                "g = t.declare_chain(lab)",
            ],
            prefix="magic-steps",
        )
        run = lab_magic(ip, "start inputs=5")
        assert run.next_stations == ("__start__",)
        lab_magic(ip, "run")
        assert run.output == 11
    finally:
        ip.run_line_magic("unload_ext", "kernel_ext")
        lab: Any = ip.user_ns.get("lab")
        if isinstance(lab, Lab) and not lab.store.closed:
            lab.close()
        for name in ("lab", "g", "t", "run"):
            ip.user_ns.pop(name, None)


CHAIN_CELLS = [
    "from pydantic_graph import StepContext\nfrom lab import Lab\nlab = Lab(':memory:')\n"
    "g = lab.graph('chain', input_type=int, output_type=int)",
    "@g.step\nasync def double(ctx: StepContext[None, None, int]) -> int:\n    return ctx.inputs * 2",
    "g.add(g.edge_from(g.start_node).to(double), g.edge_from(double).to(g.end_node))",
]


def test_renamed_step_cell_drops_the_old_step_and_names_its_edges(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.test_kernel_ext import get_ipython, run_cells

    ip = get_ipython()
    ip.run_line_magic("load_ext", "kernel_ext")
    try:
        run_cells(ip, CHAIN_CELLS, prefix="chain")
        g = ip.user_ns["g"]
        assert g.start(inputs=4).run().output == 8
        renamed = CHAIN_CELLS[1].replace("def double(", "def triple(").replace("* 2", "* 3")
        assert ip.run_cell(renamed, cell_id="chain-1").success
        err = capsys.readouterr().err
        assert "this cell used to declare double and now declares triple" in err
        assert "the edge(s) start -> double; double -> end still name double" in err
        assert list(g.steps) == ["triple"]
        with pytest.raises(GraphDefinitionError, match="names step 'double', which is no longer declared"):
            g.build()
        assert 'double [label="double\\nmissing"' in g.render()  # drawn dashed until the edges change
        # the edge cell, edited in place and run again: its old edges go, the graph runs again
        assert ip.run_cell(CHAIN_CELLS[2].replace("double", "triple"), cell_id="chain-2").success
        assert g.edges == ["start -> triple", "triple -> end"]
        assert "this cell used to declare edge start -> double, edge double -> end" in capsys.readouterr().err
        assert g.start(inputs=4).run().output == 12
    finally:
        ip.run_line_magic("unload_ext", "kernel_ext")
        lab: Any = ip.user_ns.get("lab")
        if isinstance(lab, Lab) and not lab.store.closed:
            lab.close()
        for name in ("lab", "g", "double", "triple"):
            ip.user_ns.pop(name, None)
