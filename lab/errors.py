"""The lab's exceptions: a small hierarchy on built-in bases.

Every message says what was wrong and what to do instead. Driver errors (DuckDB's) are
translated into these once, at the store boundary, so a notebook user never sees a raw
`duckdb.IOException`.
"""

from __future__ import annotations

__all__ = (
    "LabError",
    "ArgumentError",
    "GraphDefinitionError",
    "EntryStationError",
    "UnsupportedTopologyError",
    "StateContractError",
    "CheckpointValueError",
    "RevisionMismatchError",
    "UndeclaredTransitionError",
    "CheckpointError",
    "StateEditError",
    "RunStateError",
    "WaitError",
    "WaitOwnerError",
    "WaitReentryError",
    "WaitAnsweredError",
    "CapabilityBudgetError",
    "StepLimitError",
    "EffectInDoubtError",
    "ReplayMissError",
    "UnstorableEffectError",
    "RunTimeout",
    "NodeTimeout",
    "NodeExecutionError",
    "ReducerError",
    "EdgeConditionError",
    "RunNotFoundError",
    "StoreError",
    "StoreLockedError",
    "StorePermissionError",
    "StoreSchemaError",
    "StoreQueryError",
)


class LabError(Exception):
    """Base class of every error Graph Lab raises on purpose."""


class ArgumentError(LabError, TypeError, ValueError):
    """An argument of the wrong type or value (say `lab.runs(status=5)`); the message names it.

    A `TypeError` and a `ValueError` both, so code that caught either before still catches it.
    """


class GraphDefinitionError(LabError, TypeError):
    """A declared graph cannot be built: a node's return hint is missing or names no declared node."""


class EntryStationError(GraphDefinitionError):
    """A fresh run asked to start at a station other than the graph's declared entry (seed 001)."""


class UnsupportedTopologyError(GraphDefinitionError):
    """The serial engine refuses broadcast, map/spread, joins, reducers and parallel paths (seed 001)."""


class StateContractError(LabError, TypeError):
    """A state or node type does not round-trip through JSON, so it cannot be checkpointed."""


class CheckpointValueError(StateContractError, ValueError):
    """A state, node field or End value does not validate as declared, or would not read back equal.

    Raised at `start` and when a station settles, so a bad value fails that station (and is
    never stored) instead of making the run unresumable later.
    """


class RevisionMismatchError(LabError, RuntimeError):
    """A run is pinned to a graph revision that differs from the graph defined now."""


class UndeclaredTransitionError(LabError, RuntimeError):
    """A station returned a successor that the pinned manifest does not permit."""


class CheckpointError(LabError, ValueError):
    """A stored checkpoint cannot be decoded against its pinned graph."""

    def __init__(self, message: str, *, run_id: str | None = None, seq: int | None = None):
        where = ""
        if run_id is not None:
            where = f"run {run_id}" + (f" checkpoint {seq}" if seq is not None else "") + ": "
        super().__init__(where + message)
        self.run_id = run_id
        self.seq = seq


class StateEditError(LabError, ValueError):
    """An edited (or forked) state does not validate against the declared state type."""


class RunStateError(LabError, RuntimeError):
    """The action is not possible in the run's current status (say, stepping a finished run)."""


class RunOwnedError(RunStateError):
    """Another live process advances this run: step, edit or take it over there (docs/store.md)."""


class WaitError(RunStateError):
    """A verdict, answer or grant that does not fit the run's current wait (or there is none)."""


class WaitOwnerError(WaitError):
    """A verdict names a wait that is not the run's single current wait owner (seed 001)."""


class WaitReentryError(WaitError):
    """An answered wait's checkpoint would re-enter a station that is not the wait's (seed 001).

    Raised before the first node runs, so nothing changes: the head, the wait and its answer stay.
    """


class CapabilityBudgetError(LabError, RuntimeError):
    """A run asked for capabilities more often than its budget allows (seed 001 handshake)."""


class StepLimitError(LabError, RuntimeError):
    """A run reached its step limit before End (seed 002: "step_limit ... caps total super-steps").

    The run is `failed`, its head is the last checkpoint; `run.run(step_limit=...)` or
    `run.retry()` continues it.
    """

    def __init__(self, message: str, *, run_id: str, limit: int):
        super().__init__(message)
        self.run_id = run_id
        self.limit = limit


class ReplayMissError(LabError, RuntimeError):
    """A run with `replay="strict"` made a call no recording of its lineage answers (docs/replay.md).

    The message names the station, the call and what changed: a diff of the closest recorded
    request and this one. Replay in `"auto"` mode to call for real, or put the request back.
    """

    def __init__(self, message: str, *, node_id: str, name: str, index: int, diff: str = ""):
        super().__init__(message)
        self.node_id = node_id
        self.name = name
        self.index = index
        self.diff = diff


class EffectInDoubtError(LabError, RuntimeError):
    """An `IdempotentOp` started its effect on an earlier try and never recorded its result (seed 002).

    The effect may or may not have happened, so the lab does not run it again on its own. Say
    which: `lab.settle_effect(key, result)` (it happened: the station gets that result) or
    `lab.settle_effect(key, rerun=True)` (it did not), then `run.retry()`.
    """

    def __init__(self, message: str, *, key: str):
        super().__init__(message)
        self.key = key


class UnstorableEffectError(EffectInDoubtError):
    """An `IdempotentOp`'s effect ran but its result is not JSON, so it stays recorded in doubt."""


class RunTimeout(LabError, TimeoutError):
    """A run's whole-run `timeout=` ran out (seed 002): the step in flight was cancelled.

    The run is `failed`, its head is the last checkpoint; `run.run()` or `run.retry()` resumes it.
    """

    def __init__(self, message: str, *, run_id: str, timeout: float):
        super().__init__(message)
        self.run_id = run_id
        self.timeout = timeout


class NodeTimeout(LabError, TimeoutError):
    """A station ran longer than its own `timeout=`; a `Retry` policy may try it again."""

    def __init__(self, message: str, *, node_id: str, timeout: float):
        super().__init__(message)
        self.node_id = node_id
        self.timeout = timeout


class NodeExecutionError(LabError, RuntimeError):
    """A station failed and the caller asked failures to raise (seed 003 "NodeExecutionException").

    `node_id` and `attempt` say which station and which try of it from its checkpoint (1 for the
    first; a `Retry(max_attempts=3)` station that failed every try says 3); `entered_seq` is the
    event sequence number of that try's `entered` event (the events' `attempt` column); the
    station's own exception is `__cause__` and `original`.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        attempt: int | None = None,
        original: BaseException | None = None,
        entered_seq: int | None = None,
    ):
        super().__init__(message)
        self.run_id = run_id
        self.node_id = node_id
        self.attempt = attempt
        self.original = original
        self.entered_seq = entered_seq


class ReducerError(NodeExecutionError):
    """A join's reducer raised while a step was settled (seed 003 "ReducerException"); names the join."""


class EdgeConditionError(NodeExecutionError):
    """An edge's condition (a decision's match or a path transform) raised (seed 003 "EdgeConditionException")."""


class RunNotFoundError(LabError, KeyError):
    """No run with that id is in the store."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class StoreError(LabError, RuntimeError):
    """The store cannot be opened, read or written."""


class StoreLockedError(StoreError):
    """Another process holds the DuckDB file."""


class StorePermissionError(StoreError, PermissionError):
    """The store's file, journal or folder cannot be written by this process (read-only)."""


class StoreSchemaError(StoreError):
    """The store was written by a schema this version of Graph Lab does not know."""


class StoreQueryError(StoreError, ValueError):
    """A query given to `lab.sql` failed or tried to write."""


class WaitAnsweredError(WaitError, StoreError):
    """On a shared store, another process answered this wait first (or the run moved on): the first
    verdict won and this answer was not stored. A `StoreError` too: nothing of its write was kept."""


class RetryPolicyError(NodeExecutionError):
    """A station's retry policy could not say how long to wait: its backoff function raised, or
    returned no number of seconds >= 0. Recorded as the station's failure (the station's own error
    is `original`)."""
