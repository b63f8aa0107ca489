"""Delegated agent stations: a pydantic-ai agent as one durable, parked station (seed 001).

    from lab.agents import DelegatedAgentNode
    lab.agents.register("planner", planner_agent)          # exact name; runner="subprocess" for durability

    @g.node
    @dataclass
    class Outline(DelegatedAgentNode[Essay]):
        runtime = "planner"
        def prompt(self, ctx): return f"Outline an essay about {ctx.state.topic}"
        async def route(self, ctx, result: Plan) -> Review: ...

The station parks the run on a `delegate` wait and the lab runs an `AgentJob`
(QUEUED -> ADMITTED -> PREPARING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED | TIMED_OUT | LOST).
See docs/agents.md. pydantic-ai itself is needed only to run jobs: `pip install graph-lab[agents]`.
"""

from .board import AgentBoard
from .errors import (
    AgentJobStateError,
    AgentRequestConflict,
    AgentResultError,
    AgentRuntimeError,
    ApprovalRoundsExceeded,
    DelegatedJobFailed,
)
from .job import AgentJob
from .lifecycle import LIVE, STATUSES, TERMINALS
from .node import Containment, DelegatedAgentNode, DelegationRequired

__all__ = (
    "DelegatedAgentNode",
    "DelegationRequired",
    "Containment",
    "AgentBoard",
    "AgentJob",
    "STATUSES",
    "LIVE",
    "TERMINALS",
    "AgentRuntimeError",
    "AgentRequestConflict",
    "AgentJobStateError",
    "AgentResultError",
    "DelegatedJobFailed",
    "ApprovalRoundsExceeded",
)
