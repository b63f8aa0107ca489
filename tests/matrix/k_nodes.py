"""The matrix's node-class kind: ``@g.node`` BaseNode classes (see cases.py for the variants)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, Retry, Run, Verdict, interrupt

from .cases import ANSWER, Slow, flaky, reset_tries, wait_slow


@dataclass
class Tally:
    variant: str = "plain"
    graph: str = ""
    total: int = 0
    trail: list[str] = field(default_factory=list)


SLOW: dict[str, Slow | None] = {}
"""The `slow` variant's signal files, by graph name (a node class cannot take them as fields)."""


@dataclass
class Add(BaseNode[Tally, None, int]):
    by: int = 1

    async def run(self, ctx: GraphRunContext[Tally, None]) -> Middle:
        ctx.state.total += self.by
        ctx.state.trail.append(f"add{self.by}")
        return Middle()


@dataclass
class Middle(BaseNode[Tally, None, int]):
    """The variant's station: plain work, or an interrupt / flaky / slow / looping station."""

    async def run(self, ctx: GraphRunContext[Tally, None]) -> Add | Approve | Finish:
        variant = ctx.state.variant
        if variant == "interrupt":
            ctx.state.total += int(interrupt({"question": "how many more?"}))
        elif variant == "retry":
            flaky(ctx.state.graph)
        elif variant == "slow":
            await wait_slow(SLOW.get(ctx.state.graph))
        ctx.state.total *= 10
        ctx.state.trail.append("middle")
        if variant == "loop":
            return Add(by=1)
        return Approve() if variant == "gate" else Finish()


@dataclass
class Approve(Gate[Tally]):
    prompt = "Finish the tally?"

    def details(self, ctx: Any) -> dict[str, Any]:
        return {"total": ctx.state.total}

    async def decide(self, ctx: Any, verdict: Verdict) -> Finish:
        ctx.state.trail.append("approved" if verdict.approved else "denied")
        return Finish()


@dataclass
class Finish(BaseNode[Tally, None, int]):
    async def run(self, ctx: GraphRunContext[Tally, None]) -> End[int]:
        ctx.state.trail.append("finish")
        return End(ctx.state.total + 1)


class NodesCase:
    name = "nodes"

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        name = f"{self.name}_{variant}"
        reset_tries(name)
        SLOW[name] = slow
        g = lab.graph(name, state_type=Tally, output_type=int)
        g.node(Add)
        g.node(Middle, retry=Retry(max_attempts=3, on=(ConnectionError,)) if variant == "retry" else None)
        g.node(Approve)
        g.node(Finish)
        return g

    def _args(self, graph: Any) -> dict[str, Any]:
        variant = graph.name.split("_", 1)[1]
        return {"node": Add(by=2), "state": Tally(variant=variant, graph=graph.name)}

    def start(self, graph: Any, **kwargs: Any) -> Run:
        args = self._args(graph)
        return graph.start(args.pop("node"), **args, **kwargs)

    def subgraph_call(self, graph: Any) -> dict[str, Any]:
        return self._args(graph)

    def expected(self, variant: str) -> Any:
        return (2 + ANSWER) * 10 + 1 if variant == "interrupt" else 21


CASE = NodesCase()
