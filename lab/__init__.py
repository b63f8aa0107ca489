"""Graph Lab: build, step through, rewind and approve pydantic-graph v2 workflows in Jupyter.

Every checkpoint and event of a run is kept in DuckDB, so a run survives a kernel restart
and its history can be queried with SQL.
"""

from .built import BuiltGraph
from .diff import Change, StateDiff
from .errors import (
    ArgumentError,
    CapabilityBudgetError,
    CheckpointError,
    CheckpointValueError,
    EdgeConditionError,
    GraphDefinitionError,
    LabError,
    NodeExecutionError,
    NodeTimeout,
    ReducerError,
    RevisionMismatchError,
    RunNotFoundError,
    RunOwnedError,
    RunStateError,
    RunTimeout,
    StateContractError,
    StateEditError,
    StepLimitError,
    StoreError,
    StoreLockedError,
    StorePermissionError,
    StoreQueryError,
    StoreSchemaError,
    UndeclaredTransitionError,
    UnsupportedTopologyError,
    WaitAnsweredError,
    WaitError,
    WaitOwnerError,
    WaitReentryError,
)
from .events import report_progress
from .gates import CapabilityRequired, Gate, Verdict, consent, granted, interrupt
from .graph import LabGraph
from .history import Checkpoint
from .idempotent import IdempotentOp
from .lab import DEFAULT_PATH, Lab, current_lab, current_run
from .limits import DEFAULT_STEP_LIMIT, Limits
from .manifest import Manifest, Station
from .records import CheckpointRecord, EventRecord, PendingStation, RunRecord, Status, WaitRecord
from .replay import recorded
from .retry import Retry
from .run import Run, StepResult
from .subgraph import SubgraphError, run_subgraph
from .views import register_views
from .waits import Budgets

register_views()  # drawing, run widget, batch bar: shown through lab.display_hooks (issue 26)

__all__ = (
    # the lab and its parts
    "Lab",
    "IdempotentOp",
    "recorded",
    "LabGraph",
    "BuiltGraph",
    "Run",
    "StepResult",
    "current_lab",
    "current_run",
    "DEFAULT_PATH",
    # run control
    "DEFAULT_STEP_LIMIT",
    "Limits",
    "Retry",
    "report_progress",
    "run_subgraph",
    "SubgraphError",
    # gates and waits
    "Budgets",
    "Gate",
    "Verdict",
    "interrupt",
    "consent",
    "CapabilityRequired",
    "granted",
    "WaitRecord",
    # records
    "Checkpoint",
    "StateDiff",
    "Change",
    "Manifest",
    "Station",
    "RunRecord",
    "CheckpointRecord",
    "EventRecord",
    "PendingStation",
    "Status",
    # errors
    "LabError",
    "GraphDefinitionError",
    "UnsupportedTopologyError",
    "StateContractError",
    "CheckpointValueError",
    "StateEditError",
    "RevisionMismatchError",
    "UndeclaredTransitionError",
    "CheckpointError",
    "RunOwnedError",
    "RunStateError",
    "WaitAnsweredError",
    "WaitError",
    "WaitOwnerError",
    "WaitReentryError",
    "CapabilityBudgetError",
    "StepLimitError",
    "RunTimeout",
    "NodeTimeout",
    "NodeExecutionError",
    "ReducerError",
    "EdgeConditionError",
    "RunNotFoundError",
    "StoreError",
    "StoreLockedError",
    "StorePermissionError",
    "ArgumentError",
    "StoreSchemaError",
    "StoreQueryError",
)
