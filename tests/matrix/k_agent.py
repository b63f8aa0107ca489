"""The matrix's delegated agent kind: ``Add -> Middle (a DelegatedAgentNode) -> Finish``.

``Middle`` hands its work to a pydantic-ai agent on a `FunctionModel` (no network), run as an
asyncio task in the lab's process (runtime ``matrix-agent``, registered by ``build``). The
agent multiplies the tally by ten; the variant decides what else happens:

- ``interrupt``: ``Middle.route`` calls ``interrupt()`` after the job and adds the answer;
- ``retry``: the agent raises ``ConnectionError`` on its first tries (``cases.flaky``), and
  ``Middle`` has ``Retry(max_attempts=3)``: each try is a new job;
- ``slow``: the agent awaits ``cases.wait_slow``, so the job runs until released;
- ``gate``: ``Middle`` routes to a consent gate; ``loop``: back to ``Add`` forever.

The agent learns the variant and the graph from the request's inputs (JSON in its prompt).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, Retry, Run, Verdict, interrupt
from lab.agents import DelegatedAgentNode

from .cases import ANSWER, Slow, flaky, reset_tries, wait_slow

RUNTIME = "matrix-agent"
INPUTS = "Inputs (JSON):\n"


@dataclass
class Tally:
    variant: str = "plain"
    graph: str = ""
    total: int = 0
    trail: list[str] = field(default_factory=list)


class Work(BaseModel):
    """What the agent returns: the new total."""

    total: int


SLOW: dict[str, Slow | None] = {}
"""The `slow` variant's signal files, by graph name (the agent looks them up in this process)."""


def _inputs(messages: list[ModelMessage]) -> dict[str, Any]:
    """The request's inputs: the JSON after 'Inputs (JSON):' in the first user prompt."""
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and isinstance(part.content, str) and INPUTS in part.content:
                    return json.loads(part.content.split(INPUTS, 1)[1])
    raise AssertionError("the matrix agent's prompt carries no inputs")


async def _work(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    given = _inputs(messages)
    if given["variant"] == "retry":
        flaky(given["graph"])
    elif given["variant"] == "slow":
        await wait_slow(SLOW.get(given["graph"]))
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"total": given["total"] * 10})])


AGENT = Agent(FunctionModel(_work), output_type=Work, name="matrix_agent")


@dataclass
class Add(BaseNode[Tally, None, int]):
    by: int = 1

    async def run(self, ctx: GraphRunContext[Tally, None]) -> Middle:
        ctx.state.total += self.by
        ctx.state.trail.append(f"add{self.by}")
        return Middle()


@dataclass
class Middle(DelegatedAgentNode[Tally]):
    """The variant's station: an agent job, then an interrupt / a gate / a loop back."""

    runtime = RUNTIME

    def prompt(self, ctx: GraphRunContext[Tally, None]) -> str:
        return f"Multiply {ctx.state.total} by ten"

    def inputs(self, ctx: GraphRunContext[Tally, None]) -> dict[str, Any]:
        return {"variant": ctx.state.variant, "graph": ctx.state.graph, "total": ctx.state.total}

    async def route(self, ctx: GraphRunContext[Tally, None], result: Work) -> Add | Approve | Finish:
        ctx.state.total = result.total
        ctx.state.trail.append("middle")
        variant = ctx.state.variant
        if variant == "interrupt":
            ctx.state.total += int(interrupt({"question": "how many more?"}))
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


class AgentCase:
    name = "agent"

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        name = f"{self.name}_{variant}"
        reset_tries(name)
        SLOW[name] = slow
        lab.agents.register(RUNTIME, AGENT)
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
        return 20 + ANSWER + 1 if variant == "interrupt" else 21


CASE = AgentCase()
