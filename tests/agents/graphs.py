"""Graphs with delegated stations, declared the same way by the tests and by a stand-in kernel script."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, LabGraph
from lab.agents import DelegatedAgentNode

from .agent_defs import Plan


@dataclass
class Essay:
    topic: str = "durable agents"
    title: str = ""
    points: list[str] = field(default_factory=list)


def declare(lab: Lab, runtime: str = "planner", name: str = "essay", timeout: float | None = None) -> LabGraph:
    """Outline (delegated to `runtime`) -> Publish -> End, the Outline's result routed by the graph."""
    g = lab.graph(name, state_type=Essay, output_type=str)

    @g.node
    @dataclass
    class Outline(DelegatedAgentNode[Essay]):
        def prompt(self, ctx: GraphRunContext[Essay]) -> str:
            return f"Outline an essay about {ctx.state.topic}"

        def inputs(self, ctx: GraphRunContext[Essay]) -> dict[str, str]:
            return {"topic": ctx.state.topic}

        async def route(self, ctx: GraphRunContext[Essay], result: Plan) -> Publish | End[str]:
            ctx.state.title = result.title
            ctx.state.points = list(result.points)
            return Publish() if result.points else End("nothing to say")

    Outline.runtime = runtime
    Outline.timeout = timeout

    @g.node
    @dataclass
    class Publish(BaseNode[Essay, None, str]):
        async def run(self, ctx: GraphRunContext[Essay]) -> End[str]:
            return End(f"{ctx.state.title}: {', '.join(ctx.state.points)}")

    return g


def declare_sending(lab: Lab, runtime: str, rounds: int, max_rounds: int | None = None) -> LabGraph:
    """Outline, delegated to an agent that asks approval to `send` in each of `rounds` model rounds."""
    g = lab.graph(f"sending-{runtime}", state_type=Essay, output_type=str)

    @g.node
    @dataclass
    class Outline(DelegatedAgentNode[Essay]):
        def prompt(self, ctx: GraphRunContext[Essay]) -> str:
            return f"Outline {ctx.state.topic} and send it, rounds={rounds} of sending"

        async def route(self, ctx: GraphRunContext[Essay], result: Plan) -> End[str]:
            ctx.state.points = list(result.points)
            return End(" | ".join(result.points))

    Outline.runtime = runtime
    if max_rounds is not None:
        Outline.max_approval_rounds = max_rounds
    return g
