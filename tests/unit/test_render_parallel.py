"""Drawing parallel graphs: forks, maps and joins, edge labels as native Mermaid has them, and a
frontier overlay (every task lit, `×N` on a mapped step, a join's `k of n`).

Scenarios:
- a map + join graph's DOT as a text snapshot: a map, a broadcast and a join each get their own shape
- the labelled edges and the fork/join states of our Mermaid are those of pydantic-graph's own
  `Graph.render()` for the same graph (map with labels, explicit broadcast, implicit broadcast)
- a manifest whose stations are `map` / `broadcast` / `join` draws the same kinds
- the SVG from the real `dot`: a frontier of five tasks lights `▶ ×5`, a join shows `2 of 3`
- join counts under nested forks follow the join's parent fork run; the traversed edges of a
  super-step branch count one per task
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_dict_update, reduce_list_append, reduce_sum

from lab import Manifest, Station
from lab.manifest import END
from lab.render import (
    ForkFrame,
    FrontierTask,
    JoinProgress,
    join_counts,
    native_labels,
    overlay_from_frontier,
    spec_from_manifest,
    spec_from_native,
    svg_of,
    to_dot,
    to_mermaid,
)

SVG = "{http://www.w3.org/2000/svg}"


@dataclass
class Tally:
    total: int = 0


def squares():
    g = GraphBuilder(state_type=Tally, input_type=list[int], output_type=list[int])

    @g.step
    async def square(ctx: StepContext[Tally, None, int]) -> int:
        return ctx.inputs**2

    collect = g.join(reduce_list_append, initial_factory=list[int])
    g.add(
        g.edge_from(g.start_node).label("items").map().label("each").to(square),
        g.edge_from(square).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g.build()


def fan(implicit: bool = False):
    """A broadcast of three, one branch two steps long; `implicit` spells it as three edges from one source."""
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
    if implicit:
        g.add(*(g.edge_from(g.start_node).to(s) for s in (a, b, c)))
    else:
        g.add(g.edge_from(g.start_node).to(a, b, c))
    g.add(
        g.edge_from(a, b2, c).to(total),
        g.edge_from(b).label("twice").to(b2),
        g.edge_from(total).to(g.end_node),
    )
    return g.build()


SQUARES_DOT = """digraph squares {
	graph [bgcolor=transparent fontname="Helvetica,Arial,sans-serif" fontsize=11 nodesep=0.45 pad=0.25 rankdir=TB ranksep=0.45]
	node [color="#333333" fillcolor="#ffffff" fontcolor="#111111" fontname="Helvetica,Arial,sans-serif" fontsize=12 margin="0.12,0.05" penwidth=1.2 shape=box style="rounded,filled" width=1.35]
	edge [arrowsize=0.7 color="#555555" fontname="Helvetica,Arial,sans-serif" fontsize=10 penwidth=1.2]
	__start__ [label="" fillcolor="#333333" fixedsize=true shape=circle style=filled width=0.22]
	square [label="square\\n " style=filled]
	map [label="map\\n " fillcolor="#f0f7ff" peripheries=2 shape=trapezium style=filled width=1.1]
	reduce_list_append [label="reduce_list_append\\njoin" fillcolor="#f3f0ff" shape=invtrapezium style=filled width=1.1]
	__end__ [label="End\\n " margin=0.02 shape=doublecircle width=0.5]
	__start__ -> map [label=items]
	square -> reduce_list_append
	reduce_list_append -> __end__ [label=End]
	map -> square [label=each]
}
"""


def _shape(dot: str, node: str) -> tuple[str, str]:
    line = next(ln for ln in dot.splitlines() if ln.strip().startswith(f"{node} ["))
    shape = re.search(r"shape=(\w+)", line)
    peripheries = re.search(r"peripheries=(\d)", line)
    return (shape.group(1) if shape else "box", peripheries.group(1) if peripheries else "1")


def test_map_join_dot_snapshot_and_a_shape_per_kind():
    assert to_dot(spec_from_native(squares(), "squares")) == SQUARES_DOT
    dot = to_dot(spec_from_native(fan(), "fan"))
    shapes = {
        "map": _shape(SQUARES_DOT, "map"),
        "broadcast": _shape(dot, "broadcast"),
        "join": _shape(dot, "reduce_sum"),
        "step": _shape(dot, "a"),
    }
    assert len(set(shapes.values())) == 4, shapes  # every kind looks different
    assert 'broadcast [label="broadcast\\n "' in dot  # a label that is the kind is not repeated as a mark


def _labelled_edges(mermaid: str) -> set[str]:
    return {ln.strip() for ln in mermaid.splitlines() if "-->" in ln}


def _states(mermaid: str, kind: str) -> set[str]:
    return set(re.findall(rf"state (\w+) <<{kind}>>", mermaid))


def test_mermaid_edges_forks_and_joins_are_those_of_native_mermaid():
    for name, native in (("squares", squares()), ("fan", fan()), ("implicit", fan(implicit=True))):
        ours = to_mermaid(spec_from_native(native, name))
        theirs = native.render()
        # the same edges with the same labels (the lab also labels the edge into End "End")
        assert _labelled_edges(ours) == {
            e.replace("--> [*]", "--> [*]: End") for e in _labelled_edges(theirs)
        }
        assert _states(ours, "fork") == _states(theirs, "fork") != set()
        assert _states(ours, "join") == _states(theirs, "join") != set()
    assert native_labels(squares()) == {("__start__", "map"): "items", ("map", "square"): "each"}
    assert _states(to_mermaid(spec_from_native(fan(implicit=True), "i")), "fork") == {
        "__start___broadcast_fork"
    }


def test_manifest_station_kinds_draw_as_forks_and_joins():
    m = Manifest(
        key="kinds",
        stations=(
            Station("__start__", "step", "start", ("inputs",), "h0"),
            Station("spread", "map", "spread", (), "h1"),
            Station("work", "step", "work", ("inputs",), "h2"),
            Station("gather", "join", "gather", (), "h3"),
            Station("both", "broadcast", "both", (), "h4"),
            Station("fan", "fork", "map", (), "h5"),  # a fork station names its kind in its qualname
        ),
        edges=(
            ("__start__", "spread"),
            ("spread", "work"),
            ("work", "gather"),
            ("gather", "both"),
            ("both", END),
        ),
        schema_id="s",
    ).with_revision(1)
    spec = spec_from_manifest(m, {("spread", "work"): "each"})
    kinds = {n.id: n.kind for n in spec.nodes}
    assert (kinds["spread"], kinds["gather"], kinds["both"], kinds["fan"]) == (
        "map",
        "join",
        "broadcast",
        "map",
    )
    assert next(e.label for e in spec.edges if (e.src, e.dst) == ("spread", "work")) == "each"
    assert "shape=trapezium" in to_dot(spec) and "shape=invtrapezium" in to_dot(spec)


def _groups(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.get("data-station"): g for g in root.iter(f"{SVG}g") if g.get("data-station") is not None}


def _texts(g: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in g.iter(f"{SVG}text")]


START_FRAME = ForkFrame("__start__", "0", 0)


def test_svg_lights_every_task_of_a_frontier_and_a_joins_arrivals():
    """The super-step engine's frontiers: forks, joins and decisions are passed through, never tasks."""
    spec = spec_from_native(squares(), "squares")
    five = [FrontierTask("square", (START_FRAME, ForkFrame("map", "1", i))) for i in range(5)]
    ov = overlay_from_frontier([["__start__"]], five, spec=spec)
    svg = svg_of(spec, ov)
    nodes = _groups(svg)
    assert "gl-current" in nodes["square"].get("class") and _texts(nodes["square"]) == ["square", "▶ ×5"]
    assert "gl-map" in nodes["map"].get("class") and "gl-join" in nodes["reduce_list_append"].get("class")
    assert _texts(nodes["map"]) == ["map", "×1"] and "gl-visited" in nodes["map"].get("class")
    assert "gl-visited" not in nodes["__start__"].get("class")  # the start is a point, not a station
    edge = {e.get("data-edge"): e for e in ET.fromstring(svg).iter(f"{SVG}g") if e.get("data-edge")}
    assert edge["__start__→map"].get("class") == "edge gl-trav"
    assert edge["map→square"].get("class") == "edge gl-trav" and _texts(edge["map→square"]) == ["each ×5"]
    assert edge["square→reduce_list_append"].get("class") == "edge gl-idle"
    done = overlay_from_frontier([["__start__"], ["square"] * 5], [], spec=spec, done=True)
    assert done.current == {END} and done.joins == {} and done.visits["square"] == 5
    assert done.traversed[("square", "reduce_list_append")] == 5 and done.visits["reduce_list_append"] == 1
    assert done.traversed[("reduce_list_append", END)] == 1

    spec = spec_from_native(fan(), "fan")
    branches = [FrontierTask(s, (START_FRAME, ForkFrame("broadcast", "1", i))) for i, s in enumerate("abc")]
    first = overlay_from_frontier([["__start__"]], branches, spec=spec)
    assert first.current == {"a", "b", "c"} and first.tasks == {} and first.joins == {}
    # one step on: a and c reached the join, b's branch goes on to b2
    ov = overlay_from_frontier(
        [["__start__"], ["a", "b", "c"]],
        [FrontierTask("b2", (START_FRAME, ForkFrame("broadcast", "1", 1)))],
        accumulators=[JoinProgress("reduce_sum", "broadcast:1", 2, waiting=1)],
        spec=spec,
    )
    nodes = _groups(svg_of(spec, ov))
    assert _texts(nodes["reduce_sum"]) == ["reduce_sum", "join 2 of 3"]
    assert "gl-joining" in nodes["reduce_sum"].get("class") and "gl-current" not in nodes["reduce_sum"].get(
        "class"
    )
    assert _texts(nodes["b2"]) == ["b2", "▶ next"] and _texts(nodes["a"]) == ["a", "×1"]
    assert ov.traversed == {
        ("__start__", "broadcast"): 1,
        ("broadcast", "a"): 1,
        ("broadcast", "b"): 1,
        ("broadcast", "c"): 1,
        ("a", "reduce_sum"): 1,
        ("c", "reduce_sum"): 1,
        ("b", "b2"): 1,
    }
    assert 'reduce_sum [label="reduce_sum\\njoin 2 of 3" color="#56B4E9"' in to_dot(spec, ov)


def test_join_counts_follow_the_parent_fork_run_under_nested_forks():
    outer = [ForkFrame("map", "m1", 0)], [ForkFrame("map", "m1", 1)]
    tasks = [
        # item 0 of the outer map: its inner broadcast has one branch at the inner join, one on its way
        FrontierTask("inner_join", (outer[0][0], ForkFrame("bc", "b1", 0))),
        FrontierTask("slow", (outer[0][0], ForkFrame("bc", "b1", 1))),
        # item 1: both inner branches reduced already; it is at the outer join
        FrontierTask("outer_join", (outer[1][0],)),
        # a task of another run of the outer map does not count toward m1
        FrontierTask("slow", (ForkFrame("map", "m2", 0), ForkFrame("bc", "b9", 1))),
    ]
    forks = {"inner_join": "bc", "outer_join": "map"}
    counts = join_counts(
        tasks, [JoinProgress("inner_join", "b2", 2), JoinProgress("outer_join", "m1", 0)], forks
    )
    # inner: run b1 has 1 at the door + 1 coming; run b2 reduced 2 (it fired since): summed per join
    assert counts["inner_join"] == (3, 4)
    # outer: 1 at the door; 2 tasks of item 0 still on their way under m1
    assert counts["outer_join"] == (1, 3)
    # a checkpoint that records which branches a join waits for is taken at its word
    assert join_counts([], [JoinProgress("outer_join", "m1", 3, waiting=2)], forks) == {"outer_join": (3, 5)}


def test_chained_forks_and_joins_light_through():
    """A join that fired into a broadcast: both passed through in one step, both drawn as visited."""
    g = GraphBuilder(input_type=list[int], output_type=dict[str, int])

    @g.step
    async def square(ctx: StepContext[None, None, int]) -> int:
        return ctx.inputs**2

    @g.step
    async def total(ctx: StepContext[None, None, list[int]]) -> dict[str, int]:
        return {"total": sum(ctx.inputs)}

    @g.step
    async def biggest(ctx: StepContext[None, None, list[int]]) -> dict[str, int]:
        return {"biggest": max(ctx.inputs)}

    collect = g.join(reduce_list_append, initial_factory=list[int])
    summary = g.join(reduce_dict_update, initial_factory=dict[str, int])
    g.add(
        g.edge_from(g.start_node).map().to(square),
        g.edge_from(square).to(collect),
        g.edge_from(collect).to(total, biggest),
        g.edge_from(total, biggest).to(summary),
        g.edge_from(summary).to(g.end_node),
    )
    spec = spec_from_native(g.build(), "two_stage")
    frontier = [FrontierTask(s, (START_FRAME,)) for s in ("total", "biggest")]
    ov = overlay_from_frontier([["__start__"], ["square"] * 5], frontier, spec=spec)
    assert ov.traversed[("square", "reduce_list_append")] == 5
    assert ov.traversed[("reduce_list_append", "broadcast")] == 1
    assert ov.traversed[("broadcast", "total")] == ov.traversed[("broadcast", "biggest")] == 1
    assert ov.visits["reduce_list_append"] == ov.visits["broadcast"] == 1
    assert ("total", "reduce_dict_update") not in ov.traversed and "reduce_dict_update" not in ov.visits
