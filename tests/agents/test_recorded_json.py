"""The recorder's cheaper ways to a request's and a response's JSON text write the very bytes the slow ways
write (lab/agents/recorded_json.py), so digests and recordings made before still match.

Scenarios:
- requests and responses of several shapes (text, tool calls and returns, structured output, usage with
  details): the lean serializers write what the adapter writes; a usage holding an undeclared field, and
  parts given as a tuple, take the full serializer, and also write the adapter's bytes;
- request parameters (no tools, tools and instructions, structured output) are `to_json` of the dataclass
  without its private fields, byte for byte;
- `RecordedModel.request` is its own function: the boundary wrappers pydantic-ai puts around a Model
  subclass's `request` are exactly the three that act only for a model answering requests itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import subprocess
import sys
import warnings
from typing import Any

import pydantic_core
import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.test import TestModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.usage import RequestUsage

from lab.agents.recorded_json import SERIALIZERS, STEADY, Serializers
from lab.agents.recorded_model import RecordedModel


class Out(BaseModel):
    a: int
    b: list[str]


def _tool(word: str, times: int = 2) -> str:
    """Repeat a word."""
    return word * times


def _seen(agent_kwargs: dict[str, Any], prompt: str = "visit é") -> list[tuple[list[Any], Any, Any, ModelResponse]]:
    """Each request an agent made (messages, settings, parameters) and its response."""
    seen: list[tuple[list[Any], Any, Any, ModelResponse]] = []

    class Seeing(WrapperModel):
        async def request(self, messages, model_settings, parameters):  # type: ignore[override]
            response = await self.wrapped.request(messages, model_settings, parameters)
            seen.append((list(messages), model_settings, parameters, response))
            return response

    asyncio.run(Agent(Seeing(TestModel()), **agent_kwargs).run(prompt))
    return seen


SHAPES = {
    "text": {},
    "tools and instructions": {"tools": [_tool], "instructions": "Be brief \u2603"},
    "structured output": {"output_type": Out, "tools": [_tool]},
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_messages_and_responses_are_the_adapters_bytes(shape: str) -> None:
    seen = _seen(SHAPES[shape])
    assert seen
    full = Serializers()
    for messages, _, parameters, response in seen:
        for m in messages:
            assert SERIALIZERS.for_message(m).to_json(m, exclude=STEADY) == full.of(type(m)).to_json(m, exclude=STEADY)
        assert b"[" + SERIALIZERS.response(response) + b"]" == ModelMessagesTypeAdapter.dump_json([response])
        private = {f.name for f in dataclasses.fields(parameters) if f.name.startswith("_")}
        assert SERIALIZERS.parameters(parameters) == pydantic_core.to_json(parameters, exclude=private)


def test_a_response_the_lean_serializer_cannot_write_takes_the_full_one() -> None:
    usage = RequestUsage(input_tokens=3, output_tokens=4, details={"reasoning": 2})
    usage.vendor_tokens = 7  # type: ignore[attr-defined]  # an undeclared field: pydantic-ai's serializer keeps it
    with_extra = ModelResponse(parts=[TextPart("hi"), ToolCallPart("f", {"x": 1})], usage=usage, model_name="m")
    as_tuple = ModelResponse(parts=(TextPart("hi"),), usage=RequestUsage(input_tokens=1), model_name="m")  # type: ignore[arg-type]
    plain = ModelResponse(parts=[TextPart("hi")], usage=RequestUsage(input_tokens=1, details={"a": 1}), model_name="m")
    lean = SERIALIZERS.for_message(plain)
    assert lean is not SERIALIZERS.of(ModelResponse)  # this pydantic-ai's schema is the one the lean serializer expects
    assert SERIALIZERS.for_message(with_extra) is SERIALIZERS.of(ModelResponse)
    assert SERIALIZERS.for_message(as_tuple) is SERIALIZERS.of(ModelResponse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for response in (with_extra, as_tuple, plain):
            assert b"[" + SERIALIZERS.response(response) + b"]" == ModelMessagesTypeAdapter.dump_json([response])
    assert b'"vendor_tokens":7' in SERIALIZERS.response(with_extra)
    request = ModelRequest.user_text_prompt("hello")
    assert SERIALIZERS.for_message(request) is not SERIALIZERS.of(ModelRequest)


def test_recorded_models_request_skips_only_the_wrappers_for_models_that_answer() -> None:
    class Plain(WrapperModel):
        async def request(self, messages, model_settings, parameters):  # type: ignore[override]
            return await self.wrapped.request(messages, model_settings, parameters)

    names = []
    fn = Plain.request
    while hasattr(fn, "__wrapped__"):
        names.append(fn.__code__.co_name)
        fn = fn.__wrapped__
    # a new boundary wrapper in pydantic-ai: look at what it does for a wrapper model before adding it here
    assert names == ["timed_request", "budgeted", "restoring_request"]
    assert not Plain._answers_requests_itself  # noqa: SLF001  # what makes all three pass a wrapper's request through
    assert not hasattr(RecordedModel.request, "__wrapped__")
    assert inspect.iscoroutinefunction(RecordedModel.request)


@dataclasses.dataclass
class _Params:
    tools: list[Any]
    names: set[str]
    mode: Any
    flag: Any
    _private: Any = None


def test_parameters_kept_by_steady_key_are_the_bytes_to_json_writes() -> None:
    """Scalars and empty containers make a key (the text is reused); `True` and `1`, `0.0` and `-0.0`,
    a list that holds something (changed in place between requests) are written anew, byte for byte."""
    s = Serializers()

    def same(p: _Params) -> bytes:
        out = s.parameters(p)
        assert out == pydantic_core.to_json(p, exclude={"_private"})
        return out

    first = same(_Params([], set(), "text", True, _private="x"))
    assert same(_Params([], set(), "text", True)) is first  # kept: the same text object
    assert same(_Params([], set(), "text", 1)) != first  # True == 1, but writes `true`
    assert same(_Params([], set(), "text", 0.0)) != same(_Params([], set(), "text", -0.0))
    held: list[Any] = [{"name": "a"}]
    p = _Params(held, set(), "text", True)
    before = same(p)
    held[0]["name"] = "b"  # changed in place: not a key, so never stale
    assert same(p) != before and b'"b"' in s.parameters(p)
    assert len(s.steady_parameters) == 2
    with_tools = _seen(SHAPES["tools and instructions"])
    for _, _, parameters, _ in with_tools:
        assert s.parameters(parameters) == pydantic_core.to_json(
            parameters, exclude={f.name for f in dataclasses.fields(parameters) if f.name.startswith("_")}
        )


_SET_TEXT = """
import sys
from pydantic_ai.models import ModelRequestParameters
from lab.agents.recorded_json import Serializers
p = ModelRequestParameters(revealed_tool_names={"search", "fetch", "summarize", "rank", "quote", "cite"})
sys.stdout.buffer.write(Serializers().parameters(p))
"""


def test_a_set_in_the_parameters_writes_the_same_text_in_every_process() -> None:
    """A set of strings iterates in an order its process's string hashing picks: the parameters'
    text (and so the request's digest) must not change with it, or a replay after a kernel restart
    misses. Three processes with other `PYTHONHASHSEED`s write the same bytes, the set sorted; a set
    of none or one item writes what pydantic-core always wrote (recordings made before still match)."""
    texts = {
        subprocess.run(
            [sys.executable, "-c", _SET_TEXT], env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True, check=True, timeout=120,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(texts) == 1, texts
    (text,) = texts
    assert b'"revealed_tool_names":["cite","fetch","quote","rank","search","summarize"]' in text
    s = Serializers()
    for names in (set(), {"one"}):
        p = _Params([], names, "text", True)
        assert s.parameters(p) == pydantic_core.to_json(p, exclude={"_private"})
