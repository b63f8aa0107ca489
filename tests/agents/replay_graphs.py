"""A five-station agent workflow whose model counts its calls: the replay tests, the kernel restart
script and notebooks/replay.ipynb build it the same way (docs/replay.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, LabGraph

STAGES = ("Research", "Outline", "Draft", "Review", "Polish")


class CountingModel:
    """A `FunctionModel` body that answers `answer to <prompt>` and counts the prompts it saw."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, messages: list[Any], info: AgentInfo) -> ModelResponse:
        prompt = messages[-1].parts[-1].content
        self.prompts.append(prompt)
        return ModelResponse(parts=[TextPart(f"answer to {prompt}")], model_name="counting")

    @property
    def calls(self) -> int:
        return len(self.prompts)


@dataclass
class Article:
    topic: str = "kites"
    tone: str = "plain"
    """Only the Review stage's prompt reads it: a fork that changes it changes one request."""
    notes: list[str] = field(default_factory=list)


def prompt_of(stage: str, state: Article) -> str:
    if stage == "Review":
        return f"Review the draft in a {state.tone} tone"
    return f"{stage}: {state.topic} ({len(state.notes)} notes so far)"


def declare(lab: Lab, name: str = "article") -> tuple[LabGraph, CountingModel, Agent]:
    """Research -> Outline -> Draft -> Review -> Polish -> End: each stage asks the agent once."""
    counter = CountingModel()
    agent = lab.recorded(Agent(FunctionModel(counter)))
    g = lab.graph(name, state_type=Article, output_type=int)

    async def ask(stage: str, ctx: GraphRunContext[Article]) -> None:
        result = await agent.run(prompt_of(stage, ctx.state))
        ctx.state.notes.append(result.output)

    @g.node
    @dataclass
    class Research(BaseNode[Article, None, int]):
        async def run(self, ctx: GraphRunContext[Article]) -> Outline:
            await ask("Research", ctx)
            return Outline()

    @g.node
    @dataclass
    class Outline(BaseNode[Article, None, int]):
        async def run(self, ctx: GraphRunContext[Article]) -> Draft:
            await ask("Outline", ctx)
            return Draft()

    @g.node
    @dataclass
    class Draft(BaseNode[Article, None, int]):
        async def run(self, ctx: GraphRunContext[Article]) -> Review:
            await ask("Draft", ctx)
            return Review()

    @g.node
    @dataclass
    class Review(BaseNode[Article, None, int]):
        async def run(self, ctx: GraphRunContext[Article]) -> Polish:
            await ask("Review", ctx)
            return Polish()

    @g.node
    @dataclass
    class Polish(BaseNode[Article, None, int]):
        async def run(self, ctx: GraphRunContext[Article]) -> End[int]:
            await ask("Polish", ctx)
            return End(len(ctx.state.notes))

    return g, counter, agent
