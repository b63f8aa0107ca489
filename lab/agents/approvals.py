"""Tool approvals inside a delegated station's agent (seed 001 "Consent re-entry").

A tool declared `requires_approval=True` (pydantic-ai's deferred tools) ends the agent's model
round: its job ends SUCCEEDED with the calls to approve and the messages so far as its output
(`approvals_output`), not a result. The station then parks on one consent wait for that round,
listing every call the round asks to make (`ToolApprovalRequired`); `run.approve()` approves them
all, `run.deny(note)` denies them all (the agent reads the note as each call's answer). The
station runs again from the top: its first job's outcome and the verdict come back from its
answer log, in order, and it delegates the next round as a new job whose request carries the
messages and the verdict (`resume`), so the agent continues where it stopped. One approval per
model round; a chain longer than the station's `max_approval_rounds` fails the station.

The answer log of a station with approvals reads: job 1's outcome, verdict 1, job 2's outcome,
... so a restart while parked on any of those waits, in either runner, resumes the chain.
"""

from __future__ import annotations

from typing import Any

from ..errors import RunStateError
from ..gates import ConsentRequired, StationContext
from .errors import AgentRuntimeError

__all__ = (
    "APPROVALS",
    "APPROVAL_ENTRY",
    "MAX_APPROVAL_ROUNDS",
    "ToolApprovalRequired",
    "agent_call",
    "approvals_output",
    "pending_approvals",
    "take_verdict",
)

APPROVALS = "graph_lab:tool_approvals"
"""The key of a job output that asks for approvals instead of giving a result."""
APPROVAL_ENTRY = "graph_lab:approval"
"""The key of a verdict in a station's answer log."""
MAX_APPROVAL_ROUNDS = 3
"""Chained approval rounds a delegated station allows by default (`max_approval_rounds` on the class)."""


class ToolApprovalRequired(ConsentRequired):
    """A delegated station's agent asked to call tools that need a person's approval: one consent wait per round."""

    def __init__(
        self,
        station: str,
        calls: list[dict[str, Any]],
        *,
        round_no: int,
        max_rounds: int,
        request_id: Any,
        prior: list[Any],
    ):
        names = ", ".join(f"{c['tool']}({_args(c.get('args'))})" for c in calls)
        super().__init__(
            f"{station}: the agent asks to call {names} (approval round {round_no} of at most {max_rounds})",
            {"tool_approvals": calls, "round": round_no, "max_rounds": max_rounds, "request_id": request_id},
            prior=prior,
        )


def _args(args: Any) -> str:
    if isinstance(args, dict):
        return ", ".join(f"{k}={v!r}" for k, v in args.items())
    return "" if args is None else repr(args)


def pending_approvals(output: Any) -> dict[str, Any] | None:
    """The calls and messages a job's output holds when its round ended asking for approvals, else None."""
    if isinstance(output, dict) and len(output) == 1 and isinstance(output.get(APPROVALS), dict):
        return output[APPROVALS]
    return None


def take_verdict(station: StationContext, name: str) -> dict[str, Any] | None:
    """The verdict on this round's calls: from the answer log when the station replays an earlier
    round, else the consent wait's verdict just given (entered into the log), else None: ask."""
    if station.used < len(station.answers):
        entry = station.answers[station.used]
        verdict = entry.get(APPROVAL_ENTRY) if isinstance(entry, dict) and len(entry) == 1 else None
        if not isinstance(verdict, dict):
            raise RunStateError(
                f"delegated station {name} reached a tool approval where it made another call before it parked "
                f"(call {station.used + 1} of its run); a station makes its calls in the same order every time it "
                "runs: make that order depend on the state, not on anything that changes"
            )
        station.used += 1
        return verdict
    if station.verdict is None:
        return None
    verdict = {"approved": station.verdict.approved, "note": station.verdict.note}
    station.verdict = None  # one verdict answers one round
    station.answers.append({APPROVAL_ENTRY: verdict})
    station.used += 1
    return verdict


def resume_of(pending: dict[str, Any], verdict: dict[str, Any]) -> dict[str, Any]:
    """What the next round's request carries: the messages so far and the verdict on each call."""
    return {
        "messages": pending["messages"],
        "approvals": {c["id"]: bool(verdict["approved"]) for c in pending["calls"]},
        "note": verdict.get("note"),
    }


# -- in the runner (needs pydantic-ai) ---------------------------------------------------------


def agent_call(agent: Any, request: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The keyword arguments of `agent.iter(...)` for `request`: its `prompt` (the first round), or the
    next round's messages and verdicts; the agent's output type plus `DeferredToolRequests` when a tool
    of the agent needs approval (another agent runs exactly as declared)."""
    from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolDenied
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    declared = agent.output_type
    spec = list(declared) if isinstance(declared, (list, tuple)) else [declared]
    resume = request.get("resume")
    if not resume:
        if DeferredToolRequests in spec or not _asks_approval(agent):
            return {"user_prompt": prompt}  # the agent as declared (no output schema built again per job)
        return {"user_prompt": prompt, "output_type": [*spec, DeferredToolRequests]}
    if DeferredToolRequests not in spec:
        spec.append(DeferredToolRequests)
    note = resume.get("note") or "The person denied this tool call."
    verdicts = {cid: (True if ok else ToolDenied(note)) for cid, ok in resume["approvals"].items()}
    return {
        "user_prompt": None,
        "message_history": ModelMessagesTypeAdapter.validate_python(resume["messages"]),
        "deferred_tool_results": DeferredToolResults(approvals=verdicts),
        "output_type": spec,
    }


def _asks_approval(agent: Any) -> bool:
    """Whether any of the agent's tools is declared `requires_approval=True` (its toolsets' `tools`)."""
    for toolset in getattr(agent, "toolsets", ()):
        tools = getattr(toolset, "tools", None)
        if isinstance(tools, dict) and any(getattr(t, "requires_approval", False) for t in tools.values()):
            return True
    return False


def approvals_output(result: Any) -> dict[str, Any] | None:
    """A finished round's output when it asks for approvals (calls and messages as JSON), else None."""
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_core import to_jsonable_python

    out = result.output
    if not isinstance(out, DeferredToolRequests):
        return None
    if out.calls:
        names = ", ".join(c.tool_name for c in out.calls)
        raise AgentRuntimeError(
            f"the agent deferred tool calls to be run outside it ({names}); a delegated station answers only "
            "approvals (tools declared requires_approval=True): run those tools inside the agent"
        )
    calls = [
        {
            "tool": c.tool_name,
            "args": to_jsonable_python(out.validated_args.get(c.tool_call_id, c.args)),
            "id": c.tool_call_id,
        }
        for c in out.approvals
    ]
    messages = ModelMessagesTypeAdapter.dump_python(result.all_messages(), mode="json")
    return {APPROVALS: {"calls": calls, "messages": messages}}
