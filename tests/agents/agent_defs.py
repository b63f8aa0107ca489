"""Agents on FunctionModel for the delegated-station tests (importable by a worker subprocess).

Nothing here reaches a network: every model is a `FunctionModel` whose function decides the
response. `SLOW_FILE` makes the slow agent wait until a file appears, so a test controls when it
finishes (and can kill its worker while it runs).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


class Plan(BaseModel):
    """What the planner returns."""

    title: str
    points: list[str]


def _plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """First round: some text and a tool call; second round: the final result through the output tool."""
    if len(messages) == 1:
        return ModelResponse(parts=[TextPart("Looking up the topic."), ToolCallPart("lookup", {"topic": "durable"})])
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"title": "Durable agents", "points": ["park", "adopt"]})])


planner = Agent(FunctionModel(_plan), output_type=Plan, name="planner")


@planner.tool_plain
def lookup(topic: str) -> str:
    """Look a topic up (a fixed answer)."""
    return f"notes about {topic}"


SLOW_LIMIT = 120.0
"""Seconds the slow agent waits for its release before it fails (a worker of a failed test never lingers)."""


async def _slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Wait until the file named by $GRAPHLAB_TEST_RELEASE exists (at most SLOW_LIMIT s), then answer."""
    release = os.environ.get("GRAPHLAB_TEST_RELEASE")
    deadline = time.monotonic() + SLOW_LIMIT
    while release is None or not Path(release).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the slow agent was not released within {SLOW_LIMIT} s")
        await asyncio.sleep(0.02)
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"title": "Slow", "points": ["done"]})])


slow_planner = Agent(FunctionModel(_slow), output_type=Plan, name="slow_planner")


def _broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise RuntimeError("the model service answered 500")


broken = Agent(FunctionModel(_broken), output_type=Plan, name="broken")


def _asks(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask to `send` once per round, for as many rounds as the prompt's `rounds=N` says; then
    answer with what each call returned (so a test sees which verdict reached the tool)."""
    prompt = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
    rounds = int(prompt.split("rounds=")[1].split()[0]) if "rounds=" in prompt else 1
    returns = [str(p.content) for m in messages for p in m.parts if p.part_kind == "tool-return"]
    if len(returns) < rounds:
        n = len(returns) + 1
        return ModelResponse(parts=[ToolCallPart("send", {"to": f"desk {n}"}, tool_call_id=f"send-{n}")])
    return ModelResponse(
        parts=[ToolCallPart(info.output_tools[0].name, {"title": "Sent", "points": returns})]
    )


asker = Agent(FunctionModel(_asks), output_type=Plan, name="asker")


@asker.tool_plain(requires_approval=True)
def send(to: str) -> str:
    """Send the outline somewhere (a person approves each call)."""
    return f"sent to {to}"


_probed: list[int] = []
"""The probe's calls in this process: a module's state, to show what a next job does not inherit."""


def _probe(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The process it ran in: GRAPHLAB_TEST_MARK as the title, its pid and its calls so far as points."""
    _probed.append(os.getpid())
    title = os.environ.get("GRAPHLAB_TEST_MARK", "")
    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"title": title, "points": [str(os.getpid()), str(len(_probed))]})])


probe = Agent(FunctionModel(_probe), output_type=Plan, name="probe")


WORKER_SECRET = "sk-worker-secret-9f3a51c7"
"""An API key in the recorded worker agent's headers: no byte of it may reach a job folder's recordings or the store."""


async def _counted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """`_plan`, counted across processes: one line per call in the file $GRAPHLAB_TEST_CALLS names (its pid,
    and whether the secret header reached the model); first waits for $GRAPHLAB_TEST_HOLD's file when set
    (for $GRAPHLAB_TEST_HOLD_SECOND's before its second round only)."""
    hold = os.environ.get("GRAPHLAB_TEST_HOLD") or (os.environ.get("GRAPHLAB_TEST_HOLD_SECOND") if len(messages) > 1 else None)
    deadline = time.monotonic() + SLOW_LIMIT
    while hold is not None and not Path(hold).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the counted agent was not released within {SLOW_LIMIT} s")
        await asyncio.sleep(0.02)
    headers = (info.model_settings or {}).get("extra_headers") or {}
    with open(os.environ["GRAPHLAB_TEST_CALLS"], "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} secret={'yes' if WORKER_SECRET in str(headers) else 'no'}\n")
    return _plan(messages, info)


counted_worker = Agent(
    FunctionModel(_counted),
    output_type=Plan,
    name="counted_worker",
    model_settings={"extra_headers": {"Authorization": f"Bearer {WORKER_SECRET}"}, "temperature": 0.5},
)
"""The planner's answers, counted in a file: what a subprocess worker imports for the replay tests."""
counted_worker.tool_plain(lookup)
