"""Typed records the engine writes and the store keeps: runs, checkpoints, events.

These are plain frozen dataclasses holding JSON-ready values. The store never holds live
Python objects: state and node fields are JSON here, decoded by the codec against the pinned
graph only when asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NewType

__all__ = (
    "EVENT_ROW",
    "RunId",
    "Status",
    "TERMINAL_STATUSES",
    "EventKind",
    "Durability",
    "PendingStation",
    "CheckpointRecord",
    "EventRecord",
    "RunRecord",
    "WaitKind",
    "WaitRecord",
    "JobStatus",
    "JOB_TERMINALS",
    "JobRecord",
    "JobEventRecord",
    "EffectStatus",
    "EffectRecord",
    "utcnow",
)

RunId = NewType("RunId", str)
"""A run's id: a sortable, URL-safe string (time-ordered hex)."""

Status = Literal["created", "running", "waiting", "queued", "done", "failed", "cancelled", "interrupted"]
"""A run's status. `interrupted` means the process died while a station was in flight;
`waiting` that it is parked on a wait; `queued` that the wait was answered and the next step
goes on (seed 001: a verdict "admits QUEUED")."""

TERMINAL_STATUSES: frozenset[str] = frozenset({"done", "cancelled"})
"""Statuses from which no station runs again. `failed` is not terminal: `retry()` may follow."""

EventKind = Literal[
    "started",
    "entered",
    "settled",
    "failed",
    "interrupted",
    "resumed",
    "retry",
    "cancelled",
    "done",
    "waiting",
    "verdict",
    "rewind",
    "fork",
    "edited",
    "breakpoint",
    "warning",
    "dropped",
    "call",
    "recorded",
    "replay",
    "progress",
    "subgraph",
]
"""What an event observed. `dropped`: a parallel task whose result was discarded (a sibling
reached End, or a join's reducer cancelled its siblings). `call`: a subroutine visit invoked a
child (its run id or store; docs/subroutines.md). `recorded`: a station's recorded call, live or
replayed, with its tokens (docs/replay.md); `replay`: the run's replay mode chosen (`run.replay = ...`),
which a reopened handle takes. Events observe; they never drive recovery."""

Durability = Literal["step", "batch"]
"""`step`: every boundary reaches the OS before the next station runs. `batch`: every N boundaries."""


def utcnow() -> datetime:
    """Timezone-aware now, so stored times compare across machines."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class PendingStation:
    """A station the run will execute next: its node id and its constructor fields as JSON."""

    node_id: str
    fields: dict[str, Any]
    meta: dict[str, Any] | None = None
    """Parallel runs only: a task's `task` id and `fork_stack`, or a join's `join` state (docs/parallel.md)."""

    def to_json(self) -> dict[str, Any]:
        if self.meta:
            return {"node_id": self.node_id, "fields": self.fields, **self.meta}
        return {"node_id": self.node_id, "fields": self.fields}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PendingStation:
        meta = {k: v for k, v in data.items() if k not in ("node_id", "fields")}
        return cls(data["node_id"], data["fields"], meta or None)


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """The durable snapshot at one boundary of a run (seed 001 "Checkpoint Ownership")."""

    run_id: str
    seq: int
    parent_seq: int | None
    status: Status
    state: Any
    """The state as JSON (the declared state type's TypeAdapter, `mode="json"`)."""
    next: tuple[PendingStation, ...]
    """Stations to run next; a list so the super-step engine fits without a schema change."""
    output: Any = None
    """End data as JSON, on the terminal checkpoint only."""
    created_at: datetime = field(default_factory=utcnow)
    counters: dict[str, Any] | None = None
    """Run-owned budget counters (capability resumes); None reads as zero (seed 001)."""


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One observation during a run. `seq` orders events within the run."""

    run_id: str
    seq: int
    kind: EventKind
    node_id: str | None = None
    attempt: int | None = None
    """Station-attempt correlation: the same number on an `entered` and its settlement."""
    checkpoint_seq: int | None = None
    """The checkpoint this event led to (settled) or started from (entered)."""
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)


EVENT_ROW = ("seq", "kind", "node_id", "attempt", "checkpoint_seq", "payload", "created_at")
"""The fields of an `EventRecord` as a row of `Store.event_rows_json` (a run's events in one JSON text,
what an exported page embeds): the payload an object (`{}` when absent), `created_at` an ISO-8601
text to the millisecond, UTC without an offset (`2026-12-06T08:02:35.123`)."""


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run's row: what graph revision it is pinned to, its status and head."""

    run_id: str
    graph_key: str
    revision: int
    digest: str
    status: Status
    head_seq: int | None
    durability: Durability
    output: Any = None
    error: dict[str, Any] | None = None
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    parent_run_id: str | None = None
    parent_seq: int | None = None
    breakpoints: dict[str, list[str]] | None = None
    """Station ids to park before/after: `{"before": [...], "after": [...]}`."""


WaitKind = Literal["consent", "interrupt", "breakpoint", "capability", "delegate"]
"""Why a run is parked: a gate, an `interrupt()` call, a breakpoint, a missing capability, or a
delegated agent station's job (docs/agents.md)."""


@dataclass(frozen=True, slots=True)
class WaitRecord:
    """One park of a run, bound to the waiting checkpoint it wrote, with its resolution.

    `owner` is the wait's id: a verdict must name (or implicitly take) the run's single current
    wait owner, so a stale view cannot answer a newer wait (seed 001 "Consent re-entry").
    """

    run_id: str
    owner: str
    kind: WaitKind
    node_id: str
    checkpoint_seq: int
    prompt: str | None = None
    details: Any = None
    """JSON shown verbatim (escaped) by views: what is being approved, asked or needed."""
    prior: list[Any] = field(default_factory=list)
    """Answers already given to earlier `interrupt()` calls of the same station attempt."""
    created_at: datetime = field(default_factory=utcnow)
    resolved_at: datetime | None = None
    resolution: dict[str, Any] | None = None
    """`{"approved": bool, "note": str|None}`, `{"answer": ...}`, `{"continued": True}` or
    `{"granted": name, "value": ..., "by": "person"|"provider"}`."""

    @property
    def open(self) -> bool:
        return self.resolution is None

    @property
    def approved(self) -> bool | None:
        return None if self.resolution is None else self.resolution.get("approved")

    @property
    def note(self) -> str | None:
        return None if self.resolution is None else self.resolution.get("note")


JobStatus = Literal[
    "QUEUED", "ADMITTED", "PREPARING", "RUNNING", "CANCELLING", "SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "LOST"
]
"""An agent job's lifecycle (seed 001 "Delegated Agent Macro-Nodes"):
QUEUED -> ADMITTED -> PREPARING -> RUNNING -> one terminal."""

JOB_TERMINALS: frozenset[str] = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "LOST"})
"""A job in one of these never changes again, except LOST -> CANCELLED after containment."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One delegated agent job: the request (its id is the idempotency key) and its current truth."""

    request_id: str
    runtime: str
    """The exact runtime adapter name the request names (no fallback)."""
    runner: str
    """Where it runs: `task` (an asyncio task in the lab's process) or `subprocess` (a worker process)."""
    request: dict[str, Any]
    """The bounded prompt, the immutable inputs, the result type's name, timeout: JSON."""
    digest: str
    """Hash of `runtime` + `request`: the same id with another digest is a different request."""
    status: JobStatus
    run_id: str | None = None
    node_id: str | None = None
    wait_owner: str | None = None
    """The wait this job answers (the parked station's)."""
    checkpoint_seq: int | None = None
    retry_of: str | None = None
    """The request this one retries (a person's choice after LOST)."""
    output: Any = None
    """The agent's result as JSON, once SUCCEEDED."""
    error: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    """Tokens and requests the agent used (pydantic-ai `RunUsage` as JSON)."""
    worker: dict[str, Any] | None = None
    """A subprocess job's worker: pid, host, process start time, job folder."""
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)
    ended_at: datetime | None = None

    @property
    def terminal(self) -> bool:
        return self.status in JOB_TERMINALS


@dataclass(frozen=True, slots=True)
class JobEventRecord:
    """One observation of a job: a transition, an agent message, usage, or a result that came too late."""

    request_id: str
    seq: int
    kind: str
    """`transition`, `message`, `usage`, `inert` (a later terminal, recorded and never applied) or `provided`."""
    from_status: str | None = None
    to_status: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)


EffectStatus = Literal["started", "done", "failed"]
"""An `IdempotentOp`'s record (seed 002 "All-or-nothing steps"): `started` is written before the
effect runs, `done` (with its result) after it returned, `failed` after it raised. A `started`
record that a later try finds was never finished is *in doubt*: the effect may have happened."""


@dataclass(frozen=True, slots=True)
class EffectRecord:
    """One side effect of one station visit, keyed so that a retry or a resume finds it."""

    key: str
    """`run_id/checkpoint_seq/node_id/name#n`: the station visit (its checkpoint and node), the op's
    name, and which call of that op in the visit (the first is `#1`)."""
    run_id: str
    node_id: str
    checkpoint_seq: int | None
    name: str
    status: EffectStatus
    result: Any = None
    """The effect's return value as JSON, once `done`."""
    error: dict[str, Any] | None = None
    """`{"type", "message"}` of the effect's exception once `failed`; why it is in doubt otherwise."""
    tries: int = 1
    """How many times the effect was started (more than 1 only for a failed or repeatable one)."""
    settled_by: str | None = None
    """`effect` (it returned or raised), `person` (`lab.settle_effect`), or None while started."""
    created_at: datetime = field(default_factory=utcnow)
    updated_at: datetime = field(default_factory=utcnow)

    @property
    def in_doubt(self) -> bool:
        """Started and never finished: the effect may or may not have happened."""
        return self.status == "started"
