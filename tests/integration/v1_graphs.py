"""Graphs the hand-made pydantic-graph v1 documents in `v1_documents/` were written for.

Each document is what v1's `FileStatePersistence` wrote for a run of the same node classes:
`consent.json` parks on a tool-approval gate (the gate keeps the serializable message suffix and
the tool call id), `hardware_wait.json` re-snapshots a capability station after the try that
needed a GPU, `pending.json` ends on a snapshot a runner took and never finished. The delegated
document is for the essay graph of tests/agents (`tests/agents/v1_delegated.json`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, LabGraph, Verdict

DOCUMENTS = Path(__file__).with_name("v1_documents")


def document(name: str) -> str:
    return (DOCUMENTS / name).read_text()


@dataclass
class Chat:
    question: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


@dataclass
class Think(BaseNode[Chat, None, str]):
    async def run(self, ctx: GraphRunContext[Chat, None]) -> ApproveTool:
        call = {"kind": "tool-call", "tool": "delete_rows", "args": {"table": "drafts"}, "id": "call_7"}
        ctx.state.messages.append({"role": "assistant", "parts": [call]})
        return ApproveTool(tool_call_id="call_7", suffix=[{"role": "assistant", "parts": [call]}])


@dataclass
class ApproveTool(Gate[Chat]):
    """The consent gate: the model's pending tool call, kept as serializable data (no live objects)."""

    tool_call_id: str = ""
    suffix: list[dict[str, Any]] = field(default_factory=list)
    prompt = "Let the model call delete_rows?"

    def details(self, ctx: GraphRunContext[Chat, None]) -> dict[str, Any]:
        return {"call": self.tool_call_id, "suffix": self.suffix}

    async def decide(self, ctx: GraphRunContext[Chat, None], verdict: Verdict) -> RunTool | Refuse:
        ctx.state.log.append(f"verdict:{verdict.approved}")
        return RunTool(tool_call_id=self.tool_call_id) if verdict.approved else Refuse(note=verdict.note or "")


@dataclass
class RunTool(BaseNode[Chat, None, str]):
    tool_call_id: str = ""

    async def run(self, ctx: GraphRunContext[Chat, None]) -> End[str]:
        ctx.state.messages.append({"role": "tool", "id": self.tool_call_id, "content": "3 rows deleted"})
        return End(f"{self.tool_call_id}: 3 rows deleted")


@dataclass
class Refuse(BaseNode[Chat, None, str]):
    note: str = ""

    async def run(self, ctx: GraphRunContext[Chat, None]) -> End[str]:
        return End(f"refused: {self.note}")


def declare_chat(lab: Lab, name: str = "chat") -> LabGraph:
    g = lab.graph(name, state_type=Chat, output_type=str)
    g.node(entry=True)(Think)
    for cls in (ApproveTool, RunTool, Refuse):
        g.node(cls)
    return g
