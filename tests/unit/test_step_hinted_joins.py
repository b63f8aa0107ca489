"""A node class in a declared graph may route to a join by its return hint (issue 26 done-when 4).

The parallel kind declared cell by cell: a `lab.Gate` inside a map's branch hands its item to the
join (`-> Annotated[JoinNode[S, None], collect]`, pydantic-graph's way). The hint names the join
object the class's cell saw (here the module's `COLLECT`); the graph holds the one `g.join(...)`
declared under that id now (running the join's cell again makes a new object).
Before, `g.build()` added both and failed ("All nodes must have unique node IDs. 'collect' was the
ID for Join(...) and Join(...)"); now the hint names the join declared under that id now.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from pydantic_graph import GraphRunContext, StepContext
from pydantic_graph.id_types import JoinID
from pydantic_graph.join import Join, JoinNode, reduce_sum

from lab import Gate, Lab, Verdict


@dataclass
class S:
    seen: list = field(default_factory=list)


COLLECT = Join(id=JoinID("collect"), reducer=reduce_sum, initial_factory=int)
"""The join as the cell that defined the classes below saw it."""


@dataclass
class Keep(Gate[S]):
    item: int
    prompt = "Keep this item?"

    async def decide(
        self, ctx: GraphRunContext[S, None], verdict: Verdict
    ) -> Annotated[JoinNode[S, None], COLLECT]:
        return COLLECT.as_node(self.item if verdict.approved else 0)


async def check(ctx: StepContext[S, None, int]) -> Keep | int:
    ctx.state.seen.append(ctx.inputs)
    return Keep(ctx.inputs) if ctx.inputs == 20 else ctx.inputs


def _declare(lab: Lab, name: str):  # noqa: ANN202
    g = lab.graph(name, state_type=S, input_type=list[int], output_type=int)
    collect = g.join(
        reduce_sum, initial_factory=int, node_id="collect"
    )  # the join's cell, run again: a new object
    assert collect is not COLLECT
    s_check = g.step(check)
    g.node(Keep)
    g.add(
        g.edge_from(g.start_node).map().to(s_check),
        g.edge_from(s_check).to(g.decision().branch(g.match(Keep).to(Keep)).branch(g.match(int).to(collect))),
        g.edge_from(collect).to(g.end_node),
    )
    return g


def test_a_gate_hands_its_item_to_the_join_its_hint_names_after_the_join_cell_ran_again():
    """Issue 26 done-when 4: a Gate in a map's branch of a declared graph routes to the join declared now."""
    with Lab(":memory:") as lab:
        g = _declare(lab, "hinted")
        assert g.build().manifest.engine == "superstep"
        run = g.start(inputs=[10, 20, 30])
        run.run()
        assert run.status == "waiting" and run.wait.kind == "consent"
        run.approve()
        run.run()
        assert (run.status, run.output) == ("done", 60)
        denied = g.start(inputs=[10, 20, 30])
        denied.run()
        denied.deny()
        denied.run()
        assert (denied.status, denied.output) == ("done", 40)
