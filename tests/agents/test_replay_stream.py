"""Streamed model requests are recorded and replayed (issue 28, docs/replay.md): a station that reads
`agent.run_stream(...)` to the end records the streamed response; a rewind replays it as a stream
(0 model calls, the same text chunk by chunk reassembled, the same state), a changed prompt streams
live, and a plain request asking what a stream asked replays the stream's recording."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab


@dataclass
class Talk:
    topic: str = "kites"
    said: list[str] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    stream: bool = True


@pytest.fixture
def rlab(tmp_path: Path):
    with Lab(tmp_path / "lab.duckdb") as lab:
        yield lab


def test_a_streamed_request_is_recorded_and_replayed_as_a_stream(rlab: Lab) -> None:
    streamed: list[str] = []
    plain: list[str] = []

    async def stream_fn(messages: list, info: AgentInfo) -> AsyncIterator[str]:
        prompt = messages[-1].parts[-1].content
        streamed.append(prompt)
        for word in f"a long answer to {prompt}".split(" "):
            yield word + " "

    def plain_fn(messages: list, info: AgentInfo) -> ModelResponse:
        prompt = messages[-1].parts[-1].content
        plain.append(prompt)
        return ModelResponse(parts=[TextPart(f"plain answer to {prompt}")])

    agent = rlab.recorded(Agent(FunctionModel(plain_fn, stream_function=stream_fn)))
    g = rlab.graph("talk", state_type=Talk, output_type=int)

    @g.node
    @dataclass
    class Ask(BaseNode[Talk, None, int]):
        async def run(self, ctx: GraphRunContext[Talk]) -> End[int]:
            prompt = f"Tell me about {ctx.state.topic}"
            if not ctx.state.stream:  # the same question, asked without a stream
                ctx.state.said.append((await agent.run(prompt)).output)
                return End(len(ctx.state.said))
            async with agent.run_stream(prompt) as result:
                chunks = [c async for c in result.stream_text(delta=True, debounce_by=None)]
            ctx.state.said.append("".join(chunks))
            ctx.state.chunks.append(len(chunks))
            return End(len(ctx.state.said))

    run = g.start(Ask(), state=Talk())
    run.run()
    assert run.status == "done" and len(streamed) == 1 and plain == []
    first = run.state
    assert first.said == ["a long answer to Tell me about kites "] and first.chunks[0] > 1  # streamed live, chunk by chunk
    (live,) = run.calls()
    assert live.mode == "live" and live.response["parts"][0]["content"] == first.said[0] and live.tokens > 0
    run.rewind(0)
    run.run()
    assert len(streamed) == 1 and run.state.said == first.said  # replayed as a stream: no model call
    assert [c.mode for c in run.calls()] == ["live", "replayed"] and run.calls()[1].replayed_from == live.call_id
    unstreamed = run.fork(0, state=Talk(stream=False))
    unstreamed.run()
    assert plain == [] and unstreamed.state.said == first.said  # a plain request replays the stream's recording
    changed = run.fork(0, state=Talk(topic="boats"))
    changed.run()
    assert streamed == ["Tell me about kites", "Tell me about boats"] and changed.calls()[0].mode == "live"
