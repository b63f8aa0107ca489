"""Graphs built with pydantic-graph's own `GraphBuilder`, the way its documentation builds them.

test_adopt.py runs each natively (`Graph.iter`) and through `lab.adopt(...)` and compares
outputs, final states and visited stations; `adopt_worker.py` kills and resumes one of them.
Module-level definitions, so a worker process builds the same revision.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from pydantic_graph import BaseNode, End, EndMarker, Graph, GraphBuilder, GraphRunContext, StepContext

from lab import Gate, Verdict

# -- 1. BaseNode stations only ------------------------------------------------------------------


@dataclass
class Number:
    number: int = 0


@dataclass
class Increment(BaseNode[Number, None, int]):
    async def run(self, ctx: GraphRunContext[Number, None]) -> Check42:
        ctx.state.number += 1
        return Check42()


@dataclass
class Check42(BaseNode[Number, None, int]):
    async def run(self, ctx: GraphRunContext[Number, None]) -> Increment | End[int]:
        if ctx.state.number == 42 or ctx.state.number < 5:
            return Increment()
        return End(ctx.state.number)


def nodes_only() -> Graph[Any, Any, Any, Any]:
    g = GraphBuilder(state_type=Number, input_type=Increment, output_type=int)
    g.add(g.node(Increment), g.node(Check42), g.edge_from(g.start_node).to(Increment))
    return g.build()


# -- 2. a @g.step entry that returns the first node (the docs' graph_example.py) ----------------


@dataclass
class DivisibleBy5(BaseNode[None, None, int]):
    foo: int

    async def run(self, ctx: GraphRunContext) -> IncrementFoo | End[int]:
        return End(self.foo) if self.foo % 5 == 0 else IncrementFoo(self.foo)


@dataclass
class IncrementFoo(BaseNode[None, None, int]):
    foo: int

    async def run(self, ctx: GraphRunContext) -> DivisibleBy5:
        return DivisibleBy5(self.foo + 1)


def fives() -> Graph[Any, Any, Any, Any]:
    g = GraphBuilder(input_type=int, output_type=int)

    @g.step
    async def begin(ctx: StepContext[None, None, int]) -> DivisibleBy5:
        return DivisibleBy5(ctx.inputs)

    g.add(g.edge_from(g.start_node).to(begin), g.node(DivisibleBy5), g.node(IncrementFoo))
    return g.build()


# -- 3. a stateful machine with union returns and loops (the docs' vending_machine.py) ---------

PRICES = {"water": 1.25, "soda": 1.50, "crisps": 1.75, "chocolate": 2.00}


@dataclass
class Machine:
    user_balance: float = 0.0
    product: str | None = None
    log: list[str] = field(default_factory=list)


@dataclass
class Answers:
    """Where the docs' example calls input(): a scripted answer source in deps."""

    script: list[str]

    def ask(self, prompt: str) -> str:
        return self.script.pop(0)


@dataclass
class InsertCoin(BaseNode[Machine, Answers]):
    async def run(self, ctx: GraphRunContext[Machine, Answers]) -> CoinsInserted:
        return CoinsInserted(float(ctx.deps.ask("Insert coins: ")))


@dataclass
class CoinsInserted(BaseNode[Machine, Answers]):
    amount: float

    async def run(self, ctx: GraphRunContext[Machine, Answers]) -> SelectProduct | Purchase:
        ctx.state.user_balance += self.amount
        ctx.state.log.append(f"coin {self.amount}")
        return Purchase(ctx.state.product) if ctx.state.product is not None else SelectProduct()


@dataclass
class SelectProduct(BaseNode[Machine, Answers]):
    async def run(self, ctx: GraphRunContext[Machine, Answers]) -> Purchase:
        return Purchase(ctx.deps.ask("Select product: "))


@dataclass
class Purchase(BaseNode[Machine, Answers, None]):
    product: str

    async def run(self, ctx: GraphRunContext[Machine, Answers]) -> End[None] | InsertCoin | SelectProduct:
        if (price := PRICES.get(self.product)) is None:
            ctx.state.log.append(f"no {self.product}")
            return SelectProduct()
        ctx.state.product = self.product
        if ctx.state.user_balance >= price:
            ctx.state.user_balance = round(ctx.state.user_balance - price, 2)
            ctx.state.log.append(f"bought {self.product}")
            return End(None)
        return InsertCoin()


def vending() -> Graph[Any, Any, Any, Any]:
    g = GraphBuilder(state_type=Machine, deps_type=Answers, input_type=InsertCoin, output_type=None)
    g.add(
        g.node(InsertCoin),
        g.node(CoinsInserted),
        g.node(SelectProduct),
        g.node(Purchase),
        g.edge_from(g.start_node).to(InsertCoin),
    )
    return g.build()


# -- 4. steps joined by a decision with g.match(type, matches=...) branches ----------------------


@dataclass
class Tally:
    log: list[str] = field(default_factory=list)


STEP_SLEEP = 0.0
"""Seconds each step sleeps (the kill-and-resume worker sets it so a SIGKILL lands mid-step)."""


def decisions() -> Graph[Any, Any, Any, Any]:
    g = GraphBuilder(state_type=Tally, input_type=str, output_type=str)

    @g.step
    async def parse(ctx: StepContext[Tally, None, str]) -> int | str:
        await asyncio.sleep(STEP_SLEEP)
        ctx.state.log.append(f"parse {ctx.inputs}")
        return int(ctx.inputs) if ctx.inputs.isdigit() else ctx.inputs

    @g.step
    async def big(ctx: StepContext[Tally, None, int]) -> str:
        ctx.state.log.append(f"big {ctx.inputs}")
        return f"big {ctx.inputs}"

    @g.step
    async def double(ctx: StepContext[Tally, None, int]) -> str:
        await asyncio.sleep(STEP_SLEEP)
        ctx.state.log.append(f"double {ctx.inputs}")
        return str(ctx.inputs * 2)

    @g.step
    async def shout(ctx: StepContext[Tally, None, str]) -> str:
        ctx.state.log.append(f"shout {ctx.inputs}")
        return ctx.inputs.upper()

    g.add(
        g.edge_from(g.start_node).to(parse),
        g.edge_from(parse).to(
            g.decision(node_id="route")
            .branch(g.match(int, matches=lambda n: isinstance(n, int) and n > 100).to(big))
            .branch(g.match(int).to(double))
            .branch(g.match(str).to(shout))
        ),
        g.edge_from(double).to(parse),
        g.edge_from(big, shout).to(g.end_node),
    )
    return g.build()


# -- 5. a graph using deps --------------------------------------------------------------------


@dataclass
class Pricing:
    """Deps: a live-ish object the lab never checkpoints (a client would live here)."""

    rate: float
    calls: list[str] = field(default_factory=list)


@dataclass
class Quote:
    total: float = 0.0


@dataclass
class Convert(BaseNode[Quote, Pricing, float]):
    amount: float

    async def run(self, ctx: GraphRunContext[Quote, Pricing]) -> End[float]:
        ctx.deps.calls.append(f"convert {self.amount}")
        ctx.state.total = round(self.amount * ctx.deps.rate, 2)
        return End(ctx.state.total)


def with_deps() -> Graph[Any, Any, Any, Any]:
    g = GraphBuilder(state_type=Quote, deps_type=Pricing, input_type=float, output_type=float)

    @g.step
    async def fee(ctx: StepContext[Quote, Pricing, float]) -> Convert:
        ctx.deps.calls.append("fee")
        return Convert(ctx.inputs + 1.5)

    g.add(g.edge_from(g.start_node).to(fee), g.node(Convert))
    return g.build()


# -- 6. a Gate station inside an adopted graph ---------------------------------------------------


@dataclass
class Post:
    text: str = ""
    published: bool = False


@dataclass
class Review(Gate[Post]):
    prompt = "Publish this post?"

    def details(self, ctx: GraphRunContext[Post, None]) -> dict[str, str]:
        return {"text": ctx.state.text}

    async def decide(self, ctx: GraphRunContext[Post, None], verdict: Verdict) -> Publish | End[str]:
        return Publish() if verdict.approved else End(f"rejected: {verdict.note}")


@dataclass
class Publish(BaseNode[Post, None, str]):
    async def run(self, ctx: GraphRunContext[Post, None]) -> End[str]:
        ctx.state.published = True
        return End(f"published: {ctx.state.text}")


def gated() -> Graph[Any, Any, Any, Any]:
    g = GraphBuilder(state_type=Post, input_type=str, output_type=str)

    @g.step
    async def compose(ctx: StepContext[Post, None, str]) -> Review:
        ctx.state.text = ctx.inputs.strip()
        return Review()

    g.add(g.edge_from(g.start_node).to(compose), g.node(Review), g.node(Publish))
    return g.build()


# -- the native reference -----------------------------------------------------------------------


async def native_trace(graph: Graph[Any, Any, Any, Any], **kwargs: Any) -> tuple[list[str], Any]:
    """The node ids of every task `Graph.iter` runs, in order, and the output."""
    visited: list[str] = []
    async with graph.iter(**kwargs) as run:
        visited.append(run.next_task[0].node_id)
        async for item in run:
            if isinstance(item, EndMarker):
                return visited, item.value
            visited.extend(t.node_id for t in item)
    raise AssertionError("the native run ended without an EndMarker")
