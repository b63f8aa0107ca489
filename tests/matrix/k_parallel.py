"""The matrix's parallel kind: a native map + join graph, adopted, on the lab's super-step engine.

``start -> spread -> map -> work (one branch per item) -> join COLLECT (reduce_sum) -> finish
-> end``, built with pydantic-graph's own `GraphBuilder` and handed over with ``lab.adopt``.
``spread`` adds the input to the tally and fans out the items ``1, 2, 3``; each ``work`` branch
gives ``item * 10``; ``finish`` adds one to the sum (61).

The variant's station sits **inside the map's branch**, in item 2's branch only, because that is
what the super-step engine has to get right and a station before the fan-out would test only
what the serial kinds already do: its siblings (items 1 and 3) run in the same super-step and
must settle into the join while it parks (``gate``: a `lab.Gate` node class the branch routes
to through a decision, its ``decide`` handing the item to the join; ``interrupt``: item 2 asks
and adds the answer), retries inside the step (``retry``: adopt's ``retry={"work": ...}``), or
holds the whole step open (``slow``: a SIGKILL lands mid-super-step with three branches in
flight, and resuming runs the step again). Only one branch does it, so there is one wait to
answer and one count of flaky tries. ``loop``: every branch goes round ``work`` again through a
decision, forever (the join never fires); each super-step runs all three branches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic_graph import Graph, GraphBuilder, GraphRunContext, StepContext
from pydantic_graph.id_types import JoinID
from pydantic_graph.join import Join, JoinNode, reduce_sum

from lab import Gate, Lab, Retry, Run, Verdict, interrupt

from .cases import ANSWER, Slow, flaky, reset_tries, wait_slow

START = 2
"""The standard input: ``spread`` adds it to the tally and fans out ``1 .. START + 1``."""

STATION_ITEM = 2
"""The item whose branch holds the variant's station."""


@dataclass
class Tally:
    variant: str = "plain"
    graph: str = ""
    total: int = 0
    trail: list[str] = field(default_factory=list)


SLOW: dict[str, Slow | None] = {}
"""The `slow` variant's signal files, by graph name."""

COLLECT = Join(id=JoinID("collect"), reducer=reduce_sum, initial_factory=int)
"""The join every branch reaches (a module-level object, so the gate's hint can name it)."""

Ctx = StepContext[Tally, None, int]


async def spread(ctx: Ctx) -> list[int]:
    ctx.state.total += ctx.inputs
    ctx.state.trail.append("spread")
    return list(range(1, ctx.inputs + 2))


async def _branch_work(ctx: Ctx) -> int:
    """One branch's work; item 2's branch is the variant's station (it asks before it changes state)."""
    item, variant = ctx.inputs, ctx.state.variant
    value = item
    if item == STATION_ITEM:
        if variant == "interrupt":
            value += int(interrupt({"question": "how many more?", "item": item}))
        elif variant == "retry":
            flaky(ctx.state.graph)
        elif variant == "slow":
            await wait_slow(SLOW.get(ctx.state.graph))
    ctx.state.trail.append(f"work{item}")
    return value * 10


async def work(ctx: Ctx) -> int:
    return await _branch_work(ctx)


async def work_gate(ctx: Ctx) -> Approve | int:
    """gate: item 2's branch routes to the consent gate instead of the join."""
    value = await _branch_work(ctx)
    return Approve(value) if ctx.inputs == STATION_ITEM else value


def negative(n: int) -> bool:
    """The loop's way to the join, never taken (the values only grow)."""
    return n < 0


async def finish(ctx: Ctx) -> int:
    ctx.state.trail.append("finish")
    return ctx.inputs + 1


@dataclass
class Approve(Gate[Tally]):
    """The consent gate inside item 2's branch; approving hands its value to the join."""

    value: int
    prompt = "Keep this item?"

    def details(self, ctx: Any) -> dict[str, Any]:
        return {"value": self.value}

    async def decide(
        self, ctx: GraphRunContext[Tally, None], verdict: Verdict
    ) -> Annotated[JoinNode[Tally, None], COLLECT]:
        ctx.state.trail.append("approved" if verdict.approved else "denied")
        return COLLECT.as_node(self.value if verdict.approved else 0)


def native_graph(variant: str) -> Graph[Any, Any, Any, Any]:
    """The variant's graph as a pydantic-graph user builds it."""
    g = GraphBuilder(state_type=Tally, input_type=int, output_type=int)
    s_spread = g.step(spread)
    s_work = g.step(work_gate if variant == "gate" else work, node_id="work")
    s_finish = g.step(finish)
    g.add(
        g.edge_from(g.start_node).to(s_spread),
        g.edge_from(s_spread).map().to(s_work),
        g.edge_from(COLLECT).to(s_finish),
        g.edge_from(s_finish).to(g.end_node),
    )
    if variant == "gate":
        g.add(
            g.node(Approve),
            g.edge_from(s_work).to(
                g.decision().branch(g.match(Approve).to(Approve)).branch(g.match(int).to(COLLECT))
            ),
        )
    elif variant == "loop":
        g.add(
            g.edge_from(s_work).to(
                g.decision(node_id="again")
                .branch(g.match(int, matches=negative).to(COLLECT))
                .branch(g.match(int).transform(_shrink).to(s_work))
            )
        )
    else:
        g.add(g.edge_from(s_work).to(COLLECT))
    return g.build()


def _shrink(ctx: StepContext[Tally, None, int]) -> int:
    """loop: a branch's next lap works on its item again (``work`` gives item * 10)."""
    return ctx.inputs // 10


class ParallelCase:
    name = "parallel"

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        name = f"{self.name}_{variant}"
        reset_tries(name)
        SLOW[name] = slow
        retry = {"work": Retry(max_attempts=3, on=(ConnectionError,))} if variant == "retry" else None
        return lab.adopt(native_graph(variant), name=name, retry=retry)

    def _args(self, graph: Any) -> dict[str, Any]:
        variant = graph.name.split("_", 1)[1]
        return {"inputs": START, "state": Tally(variant=variant, graph=graph.name)}

    def start(self, graph: Any, **kwargs: Any) -> Run:
        return graph.start(**self._args(graph), **kwargs)

    def subgraph_call(self, graph: Any) -> dict[str, Any]:
        return self._args(graph)

    def expected(self, variant: str) -> Any:
        items = range(1, START + 2)
        extra = ANSWER if variant == "interrupt" else 0
        return sum(items) * 10 + extra * 10 + 1


CASE = ParallelCase()
