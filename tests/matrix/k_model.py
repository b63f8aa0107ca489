"""The matrix's super-step model kind: `lab.graph(..., model="superstep")` whose `@g.step` nodes return updates.

The same tally as k_nodes.py, the seed-002 way: each step returns a partial update folded by the
field reducers (`trail` appends, `total` takes the last value); the run's output is the value a
`.transform(...)` hands `g.end_node` (the model's result is otherwise its state). The gate
variant's `approve` step is declared `@g.step(gate=True)` and asks `consent(...)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_graph import StepContext

from lab import Lab, Retry, Run, consent, interrupt
from lab.reducers import append

from .cases import ANSWER, Slow, flaky, reset_tries, wait_slow


@dataclass
class Tally:
    variant: str = "plain"
    graph: str = ""
    total: int = 0
    trail: list[str] = field(default_factory=list)


SLOW: dict[str, Slow | None] = {}
"""The `slow` variant's signal files, by graph name."""

Ctx = StepContext[Tally, None, None]


async def add(ctx: Ctx) -> dict[str, Any]:
    """Adds 2 (the first time) or 1 (each round of the loop)."""
    return {"total": ctx.state.total + (1 if "middle" in ctx.state.trail else 2), "trail": ["add"]}


async def middle(ctx: Ctx) -> dict[str, Any]:
    """The variant's station: plain work, or an interrupt / flaky / slow station."""
    variant, total = ctx.state.variant, ctx.state.total
    if variant == "interrupt":
        total += int(interrupt({"question": "how many more?"}))
    elif variant == "retry":
        flaky(ctx.state.graph)
    elif variant == "slow":
        await wait_slow(SLOW.get(ctx.state.graph))
    return {"total": total * 10, "trail": ["middle"]}


async def approve(ctx: Ctx) -> dict[str, Any]:
    """The gate variant's consent gate: parks until run.approve() / run.deny()."""
    verdict = consent("Finish the tally?", {"total": ctx.state.total})
    return {"trail": ["approved" if verdict.approved else "denied"]}


async def finish(ctx: Ctx) -> dict[str, Any]:
    return {"trail": ["finish"]}


def result(ctx: StepContext[Tally, None, Tally]) -> int:
    """The run's output: the tally plus one."""
    return ctx.state.total + 1


def negative(state: Tally) -> bool:
    """The loop's way out, never taken (the tally only grows)."""
    return state.total < 0


class ModelCase:
    name = "model"

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        name = f"{self.name}_{variant}"
        reset_tries(name)
        SLOW[name] = slow
        g = lab.graph(name, state_type=Tally, output_type=int, model="superstep", reducers={"trail": append})
        first = g.step(add)
        mid = g.step(middle, retry=Retry(max_attempts=3, on=(ConnectionError,)) if variant == "retry" else None)
        g.add(g.edge_from(g.start_node).to(first), g.edge_from(first).to(mid))
        if variant == "loop":  # GraphBuilder refuses a graph with no edge to its end: this one's never holds
            g.add(
                g.edge_from(mid).to(
                    g.decision(node_id="again")
                    .branch(g.match(Tally, matches=negative).transform(result).to(g.end_node))
                    .branch(g.match(Tally).to(first))
                )
            )
            return g
        if variant == "gate":
            gate = g.step(approve, gate=True)
            g.add(g.edge_from(mid).to(gate))
            mid = gate
        last = g.step(finish)
        g.add(g.edge_from(mid).to(last), g.edge_from(last).transform(result).to(g.end_node))
        return g

    def _args(self, graph: Any) -> dict[str, Any]:
        variant = graph.name.split("_", 1)[1]
        return {"inputs": None, "state": Tally(variant=variant, graph=graph.name)}

    def start(self, graph: Any, **kwargs: Any) -> Run:
        return graph.start(**self._args(graph), **kwargs)

    def subgraph_call(self, graph: Any) -> dict[str, Any]:
        return self._args(graph)

    def expected(self, variant: str) -> Any:
        return (2 + ANSWER) * 10 + 1 if variant == "interrupt" else 21


CASE = ModelCase()
