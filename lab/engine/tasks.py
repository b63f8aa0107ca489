"""What a run holds as its next station: a `BaseNode` instance, or a `TaskInput`.

pydantic-graph's native tasks are either `BaseNode` stations (the task's input *is* the node,
whose fields are its continuation data) or steps, decisions, the start and the end node, whose
task carries a plain input value. The lab checkpoints both; `TaskInput` names the second kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_graph import BaseNode

__all__ = ("TaskInput", "node_id_of", "request_input", "as_pending")


@dataclass(frozen=True, slots=True)
class TaskInput:
    """A pending native task that is not a `BaseNode`: its node id and its input value."""

    node_id: str
    inputs: Any


def node_id_of(node: Any) -> str:
    if isinstance(node, BaseNode):
        return type(node).get_node_id()
    if isinstance(node, TaskInput):
        return node.node_id
    return type(node).__name__


def request_input(node: Any) -> Any:
    """The value a `GraphTaskRequest` carries for this pending station."""
    return node.inputs if isinstance(node, TaskInput) else node


def as_pending(node_id: str, inputs: Any) -> Any:
    """The pending station for a native task: the node itself, or a `TaskInput`."""
    if isinstance(inputs, BaseNode) and type(inputs).get_node_id() == node_id:
        return inputs
    return TaskInput(node_id, inputs)
