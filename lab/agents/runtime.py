"""Runtime adapters: a pydantic-ai `Agent` under an exact name, and running one request on it.

`run_request` drives `Agent.iter()` node by node, so every model response and tool return is
reported as it happens (`emit`), with the tokens used so far. The same function runs in the
lab's process (an asyncio task) and in a worker subprocess (`lab.agents.worker`).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

from .errors import AgentRuntimeError

__all__ = ("Runtime", "Runner", "run_request", "load_target", "message_json", "usage_json", "binding_for", "check_binding")

Runner = Literal["task", "subprocess"]


@dataclass(frozen=True)
class Runtime:
    """An agent under an exact name, and where its jobs run.

    `runner="task"` runs jobs as asyncio tasks in the lab's process (quick prototyping; a job dies
    with the kernel). `runner="subprocess"` runs each job in a worker process that outlives a
    kernel restart; it imports the agent from `target` ("package.module:attribute"), so the agent
    must live in an importable module, not a notebook cell.
    """

    name: str
    agent: Any = None
    target: str | None = None
    runner: Runner = "task"

    def load(self) -> Any:
        return self.agent if self.agent is not None else load_target(self.target or "")

    def profile(self) -> dict[str, Any]:
        """What a run's jobs are bound to once it admits one (seed 001: "current Settings cannot redirect
        resumed work"): a worker's import target; a task's agent by its model, output type and tool names,
        so re-running the cell that defines the same agent keeps the binding and another agent does not."""
        if self.runner == "subprocess":
            return {"runner": "subprocess", "target": self.target}
        agent = self.load()
        model = getattr(agent, "model", None)
        if model is not None and not isinstance(model, str):
            model = f"{getattr(model, 'system', type(model).__name__)}:{getattr(model, 'model_name', '')}"
        output = getattr(agent, "output_type", None)
        tools = sorted(name for ts in getattr(agent, "toolsets", ()) for name in (getattr(ts, "tools", None) or {}))
        return {  # not the agent's name: pydantic-ai infers a missing one on its first run
            "runner": "task",
            "model": model,
            "output": getattr(output, "__qualname__", None) or repr(output),
            "tools": tools,
        }


def binding_for(jobs: list[Any], rt: Runtime) -> dict[str, Any]:
    """The runtime profile a run's new job is bound to: the one the run's first job under `rt`'s name was
    admitted with (`jobs` are the run's), so a retry, a re-admission or a next approval round is not
    redirected by registering the name again; else the profile of `rt`, registered now."""
    for rec in jobs:
        if rec.runtime == rt.name and isinstance(rec.request.get("binding"), dict):
            return rec.request["binding"]
    return rt.profile()


def check_binding(rec: Any, rt: Runtime) -> None:
    """Raise `AgentRuntimeError` if `rt` (registered now under the job's name) is not what its run bound."""
    bound = rec.request.get("binding")
    if not isinstance(bound, dict):
        return  # a job stored before bindings were recorded
    now = rt.profile()
    if now != bound:
        raise AgentRuntimeError(
            f"agent job {rec.request_id} is bound to runtime {rec.runtime!r} as its run admitted it ({bound}), "
            f"but {rec.runtime!r} is registered now as {now}; a run's work is never redirected to another "
            f"agent: register the original under {rec.runtime!r} again, or start a new run (g.start, or "
            "lab.fork(run_id, seq)) to use the new one"
        )


def load_target(target: str) -> Any:
    """The object `module:attribute` names (a worker imports its agent so)."""
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise AgentRuntimeError(f"a runtime target is 'package.module:attribute', got {target!r}")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise AgentRuntimeError(
            f"cannot import the agent {target!r} ({exc}); a subprocess runtime's agent must be importable from "
            "the lab's working directory or PYTHONPATH"
        ) from None
    return obj


def user_prompt(request: dict[str, Any]) -> str:
    """The agent's user prompt: the bounded prompt, then the frozen inputs as JSON when there are any."""
    prompt = request["prompt"]
    if request.get("inputs") is not None:
        prompt += "\n\nInputs (JSON):\n" + json.dumps(request["inputs"], indent=1, sort_keys=True)
    return prompt


def message_json(message: Any) -> dict[str, Any]:
    """One pydantic-ai message as what a view shows: its parts' kinds, text, tool names and arguments."""
    parts = []
    for part in message.parts:
        kind = part.part_kind
        item: dict[str, Any] = {"kind": kind}
        if kind in ("tool-call", "builtin-tool-call"):
            item.update(tool=part.tool_name, args=to_jsonable_python(part.args), id=part.tool_call_id)
        elif kind in ("tool-return", "builtin-tool-return", "retry-prompt"):
            item.update(tool=getattr(part, "tool_name", None), content=to_jsonable_python(part.content, fallback=str))
        elif hasattr(part, "content"):
            item["content"] = to_jsonable_python(part.content, fallback=str)
        parts.append(item)
    return {"role": message.kind, "parts": parts}


def usage_json(usage: Any) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "requests": usage.requests,
        "tool_calls": usage.tool_calls,
    }


async def run_request(
    agent: Any, request: dict[str, Any], emit: Callable[[list[tuple[str, dict[str, Any]]]], None]
) -> tuple[Any, dict[str, Any]]:
    """Run `request` on `agent`; after each agent step, `emit([("message", ...), ..., ("usage", ...)])`
    with what it added. Returns (output JSON, usage).

    A tool declared `requires_approval=True` ends the round: the output is then the calls to approve
    and the messages so far (`approvals.approvals_output`), and a request carrying `resume` (the
    next round) continues those messages with the person's verdict on the calls.
    """
    from .approvals import agent_call, approvals_output

    call = agent_call(agent, request, user_prompt(request))
    seen = len(call.get("message_history") or ())
    async with agent.iter(**call) as agent_run:
        async for _node in agent_run:
            messages = agent_run.all_messages()
            if len(messages) > seen:
                emit([("message", message_json(m)) for m in messages[seen:]] + [("usage", usage_json(agent_run.usage))])
                seen = len(messages)
    result = agent_run.result
    assert result is not None
    deferred = approvals_output(result)
    if deferred is not None:
        return deferred, usage_json(result.usage)
    return to_jsonable_python(result.output), usage_json(result.usage)
