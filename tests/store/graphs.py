"""Graphs of the conformance suite, at module level so every process builds the same revision."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, LabGraph, Verdict


@dataclass
class Order:
    item: str = ""
    log: list[str] = field(default_factory=list)
    nap: float = 0.0


@dataclass
class Prepare(BaseNode[Order, None, str]):
    async def run(self, ctx: GraphRunContext[Order, None]) -> Approve:
        ctx.state.log.append(f"prepared {ctx.state.item}")
        return Approve()


@dataclass
class Approve(Gate[Order]):
    prompt = "Ship the order?"

    def details(self, ctx: GraphRunContext[Order, None]) -> dict[str, str]:
        return {"item": ctx.state.item}

    async def decide(self, ctx: GraphRunContext[Order, None], verdict: Verdict) -> Ship:
        ctx.state.log.append(f"verdict {verdict.approved} {verdict.note}")
        return Ship()


@dataclass
class Ship(BaseNode[Order, None, str]):
    async def run(self, ctx: GraphRunContext[Order, None]) -> End[str]:
        ctx.state.log.append("shipped")
        return End(f"shipped {ctx.state.item}")


def declare_orders(lab: Lab) -> LabGraph:
    g = lab.graph("orders", state_type=Order, output_type=str)
    for cls in (Prepare, Approve, Ship):
        g.node(cls)
    return g


@dataclass
class Tally:
    n: int = 0
    limit: int = 5
    nap: float = 0.0
    marker: str = ""


@dataclass
class Count(BaseNode[Tally, None, int]):
    async def run(self, ctx: GraphRunContext[Tally, None]) -> Count | End[int]:
        if ctx.state.marker and ctx.state.n == 2 and not os.path.exists(ctx.state.marker):
            open(ctx.state.marker, "w").close()  # the station in flight the killer waits for (once)
            time.sleep(60)
        if ctx.state.nap:
            time.sleep(ctx.state.nap)
        if ctx.state.limit < 0:
            raise ValueError(f"a negative limit: {ctx.state.limit}")
        ctx.state.n += 1
        return End(ctx.state.n) if ctx.state.n >= ctx.state.limit else Count()


def declare_tally(lab: Lab) -> LabGraph:
    g = lab.graph("tally", state_type=Tally, output_type=int)
    g.node(Count)
    return g


def pid() -> int:
    return os.getpid()
