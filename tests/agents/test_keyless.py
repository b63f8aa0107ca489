"""A message or response whose JSON holds no dict key of its own is not searched for secrets (lab/agents/keyless.py),
and that changes nothing stored: only keys are ever left out.

Scenarios:
- a `TestModel` request and response are keyless; a tool call's dict arguments, a non-empty
  `provider_details` or usage `details`, or a class with a secret-looking field name are not;
- a keyless text that says "password" (a value, not a key) is what the full secret check makes of it,
  byte for byte, so its digest is the one recorded before;
- end to end on a DuckDB file: a response whose `provider_details` holds a secret header is stored
  without it, and a text answer and a prompt that mention a password are stored as they are and replay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab
from lab.agents.keyless import keyless
from lab.agents.recorded_json import SERIALIZERS
from lab.recording import scrubbed

SECRET = "sk-keyless-0123456789"


def test_plain_messages_are_keyless_and_dicts_or_secret_field_names_are_not() -> None:
    got = Agent(TestModel()).run_sync("hi").all_messages()
    assert [keyless(m) for m in got] == [True, True]
    assert not keyless(ModelResponse(parts=[ToolCallPart("login", {"password": SECRET})]))
    assert keyless(
        ModelResponse(parts=[ToolCallPart("login", '{"password": "x"}')])
    )  # a string: no key in the JSON
    assert not keyless(ModelResponse(parts=[TextPart("a")], provider_details={"headers": {"x": SECRET}}))
    assert not keyless(
        ModelResponse(parts=[TextPart("a")], usage=RequestUsage(details={"api_key_tokens": 1}))
    )
    assert keyless(ModelResponse(parts=[TextPart("a")], provider_details={}))

    @dataclass
    class Leaky:
        api_key: str = SECRET
        notes: list[str] = field(default_factory=list)

    assert not keyless(Leaky()) and not keyless({"a": 1}) and not keyless(object())


def test_a_keyless_text_that_mentions_a_secret_is_what_the_full_check_makes_of_it() -> None:
    """The full check (`scrubbed`) finds "password" and walks the text; it leaves out no value, so the
    skip keeps the very bytes (and digests) recorded before."""
    response = ModelResponse(parts=[TextPart('Your PASSWORD and api_key stay in the text: \u00e9 "q" 1e20')])
    request = ModelRequest(parts=[UserPromptPart("reset my password, Bearer please")])
    assert keyless(response) and keyless(request)
    for text in (SERIALIZERS.response(response), SERIALIZERS.messages([request])):
        assert scrubbed(text) == text


@dataclass
class Box:
    got: list[str] = field(default_factory=list)


def test_only_keys_are_left_out_of_a_stored_response(tmp_path: Path) -> None:
    calls: list[int] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        if len(calls) == 1:
            return ModelResponse(parts=[TextPart("the password is in the vault")])
        return ModelResponse(
            parts=[TextPart("ok")], provider_details={"headers": {"Authorization": SECRET}, "n": 1}
        )

    with Lab(tmp_path / "lab.duckdb") as lab:
        agent = lab.recorded(Agent(FunctionModel(answer)))
        g = lab.graph("keyless", state_type=Box, output_type=int)

        @g.node
        @dataclass
        class Ask(BaseNode[Box, None, int]):
            async def run(self, ctx: GraphRunContext[Box]) -> Ask | End[int]:
                ctx.state.got.append((await agent.run(f"my password #{len(ctx.state.got)}")).output)
                return Ask() if len(ctx.state.got) < 2 else End(len(ctx.state.got))

        run = g.start(Ask(), state=Box())
        run.run()
        assert run.status == "done" and run.state.got == ["the password is in the vault", "ok"]
        stored = lab.sql("select request::VARCHAR, response::VARCHAR from calls order by call_id").fetchall()
        assert SECRET not in json.dumps(stored) and "Authorization" not in json.dumps(stored)
        first, second = (json.loads(r) for _, r in stored)
        assert first["parts"][0]["content"] == "the password is in the vault"
        assert second["provider_details"] == {"n": 1}
        assert "my password #0" in stored[0][0]
        fork = run.fork(0)
        fork.run()
        assert fork.state == run.state and len(calls) == 2
        assert {c.mode for c in fork.calls()} == {"replayed"}
