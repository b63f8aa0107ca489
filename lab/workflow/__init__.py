"""Declarative workflows (seed 004): a YAML or dict definition compiled onto the lab's engine.

One idea per module: `expressions` (the gate-expression language), `definition` (loading and
validating a workflow file), `bag` (the schema-validated variable bag), `exits` (exit evaluation
and step manifests), `compile` (stations on the serial engine), `session` (sealed session
folders).
"""

from .compile import ActivityContext, ActivityResult, WorkflowGraph, WorkflowState
from .definition import Definition, load
from .errors import (
    BagError,
    ChoiceError,
    ExpressionError,
    NoExitError,
    Problem,
    SessionStoreError,
    WorkflowDefinitionError,
    WorkflowError,
)
from .expressions import evaluate, parse

__all__ = (
    "WorkflowGraph",
    "WorkflowState",
    "ActivityContext",
    "ActivityResult",
    "Definition",
    "load",
    "parse",
    "evaluate",
    "WorkflowError",
    "WorkflowDefinitionError",
    "Problem",
    "ExpressionError",
    "BagError",
    "NoExitError",
    "ChoiceError",
    "SessionStoreError",
)
