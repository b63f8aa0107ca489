"""The matrix's step kind: a lab graph declared cell by cell with `@g.step` and `g.add` edges.

The serial shape ``start -> add -> middle -> finish -> end`` (lab/builder.py replays it into a
native `GraphBuilder`): ``add`` adds its input to the tally, ``middle`` is the variant's station
(plain work, an ``interrupt()``, a flaky try, a slow wait) and multiplies by ten, ``finish`` adds
one. The ``gate`` variant routes ``middle`` to a `lab.Gate` node class (declared with
``g.node``, joined in through ``middle``'s return hint) whose ``decide`` ends the run; the
``loop`` variant routes ``middle`` back to ``add`` forever (through a decision whose way to
the end never holds: GraphBuilder refuses a graph with no edge to its end). Each variant declares its own
``middle`` (under the one node id ``middle``) so its return hint gives exactly its edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_graph import End, GraphRunContext, StepContext

from lab import Gate, Lab, Retry, Run, Verdict, interrupt

from .cases import ANSWER, Slow, flaky, reset_tries, wait_slow

START = 2
"""The standard input: what ``add`` adds first."""


@dataclass
class Tally:
    variant: str = "plain"
    graph: str = ""
    total: int = 0
    trail: list[str] = field(default_factory=list)


SLOW: dict[str, Slow | None] = {}
"""The `slow` variant's signal files, by graph name (a step's inputs are checkpointed JSON)."""

Ctx = StepContext[Tally, None, int]


async def add(ctx: Ctx) -> int:
    ctx.state.total += ctx.inputs
    ctx.state.trail.append(f"add{ctx.inputs}")
    return ctx.state.total


async def _middle_work(ctx: StepContext[Tally, None, Any]) -> None:
    variant = ctx.state.variant
    if variant == "interrupt":
        ctx.state.total += int(interrupt({"question": "how many more?"}))
    elif variant == "retry":
        flaky(ctx.state.graph)
    elif variant == "slow":
        await wait_slow(SLOW.get(ctx.state.graph))
    ctx.state.total *= 10
    ctx.state.trail.append("middle")


async def middle(ctx: Ctx) -> int:
    """plain, interrupt, retry, slow: on to ``finish`` with the tally."""
    await _middle_work(ctx)
    return ctx.state.total


async def middle_gate(ctx: Ctx) -> Approve:
    """gate: on to the consent gate."""
    await _middle_work(ctx)
    return Approve()


async def middle_loop(ctx: Ctx) -> int:
    """loop: round again through ``add`` (with 1)."""
    await _middle_work(ctx)
    return 1


def negative(n: int) -> bool:
    """The loop's way out, never taken (the tally only grows)."""
    return n < 0


async def finish(ctx: Ctx) -> int:
    ctx.state.trail.append("finish")
    return ctx.inputs + 1


@dataclass
class Approve(Gate[Tally]):
    prompt = "Finish the tally?"

    def details(self, ctx: Any) -> dict[str, Any]:
        return {"total": ctx.state.total}

    async def decide(self, ctx: GraphRunContext[Tally, None], verdict: Verdict) -> End[int]:
        ctx.state.trail.append("approved" if verdict.approved else "denied")
        return End(ctx.state.total + 1)


_MIDDLES = {"gate": middle_gate, "loop": middle_loop}


class StepsCase:
    name = "steps"

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        name = f"{self.name}_{variant}"
        reset_tries(name)
        SLOW[name] = slow
        g = lab.graph(name, state_type=Tally, input_type=int, output_type=int)
        s_add = g.step(add)
        retry = Retry(max_attempts=3, on=(ConnectionError,)) if variant == "retry" else None
        s_middle = g.step(_MIDDLES.get(variant, middle), node_id="middle", retry=retry)
        g.add(g.edge_from(g.start_node).to(s_add), g.edge_from(s_add).to(s_middle))
        if variant == "gate":
            g.node(Approve)  # middle's return hint adds the edge middle -> Approve
        elif variant == "loop":  # a graph must reach its end (GraphBuilder validates it); this one never does
            g.add(
                g.edge_from(s_middle).to(
                    g.decision(node_id="again")
                    .branch(g.match(int, matches=negative).to(g.end_node))
                    .branch(g.match(int).to(s_add))
                )
            )
        else:
            s_finish = g.step(finish)
            g.add(g.edge_from(s_middle).to(s_finish), g.edge_from(s_finish).to(g.end_node))
        return g

    def _args(self, graph: Any) -> dict[str, Any]:
        variant = graph.name.split("_", 1)[1]
        return {"inputs": START, "state": Tally(variant=variant, graph=graph.name)}

    def start(self, graph: Any, **kwargs: Any) -> Run:
        return graph.start(**self._args(graph), **kwargs)

    def subgraph_call(self, graph: Any) -> dict[str, Any]:
        return self._args(graph)

    def expected(self, variant: str) -> Any:
        return (START + ANSWER) * 10 + 1 if variant == "interrupt" else START * 10 + 1


CASE = StepsCase()
