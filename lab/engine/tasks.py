"""What a run holds as its next station: a `BaseNode` instance, or a `TaskInput`.

pydantic-graph's native tasks are either `BaseNode` stations (the task's input *is* the node,
whose fields are its continuation data) or steps, decisions, the start and the end node, whose
task carries a plain input value. The lab checkpoints both; `TaskInput` names the second kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_graph import BaseNode, Graph
from pydantic_graph.decision import Decision
from pydantic_graph.join import Join
from pydantic_graph.node import EndNode, StartNode
from pydantic_graph.node import Fork as NativeFork

__all__ = (
    "TaskInput",
    "node_id_of",
    "request_input",
    "as_pending",
    "routing_only",
    "Fork",
    "ForkStack",
    "Task",
    "JoinAcc",
)


@dataclass(frozen=True, slots=True)
class TaskInput:
    """A pending native task that is not a `BaseNode`: its node id and its input value."""

    node_id: str
    inputs: Any


def request_input(node: Any) -> Any:
    """The value a `GraphTaskRequest` carries for this pending station."""
    return node.inputs if isinstance(node, TaskInput) else node


_NODE_IDS: dict[type, str | None] = {}
"""A class's node id if it is a `BaseNode`, else None: found once per class (the hot path of every
station). It keeps a class a notebook cell redefined alive, as pydantic-graph's own `@cache` on
`BaseNode.get_node_id` already does for the life of the process: a weak mapping would free nothing."""


def as_pending(node_id: str, inputs: Any) -> Any:
    """The pending station for a native task: the node itself, or a `TaskInput`."""
    cls = type(inputs)
    try:
        own = _NODE_IDS[cls]
    except KeyError:
        own = _NODE_IDS[cls] = cls.get_node_id() if issubclass(cls, BaseNode) else None
    except TypeError:  # an unhashable class (a metaclass that says so): asked every time
        own = cls.get_node_id() if isinstance(inputs, BaseNode) else None
    if own == node_id:
        return inputs
    return TaskInput(node_id, inputs)


def routing_only(native: Graph[Any, Any, Any, Any], node_id: str) -> bool:
    """Whether visiting `node_id` is pure routing (the start, the end, a decision, a fork or a join).

    Such a pseudo-step is not a step: step limits, `max_steps` and `run.step()` count only
    stations that do work (docs/run-control.md "Step limit").
    """
    node = native.nodes.get(node_id)  # type: ignore[call-overload]
    return isinstance(node, (StartNode, EndNode, Decision, Join, NativeFork))


# -- the super-step engine's frontier -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fork:
    """One entry of a task's fork stack: which fork spawned it, which run of that fork, which branch.

    The lab's own mirror of pydantic-graph's `ForkStackItem` with run ids numbered by the lab, so a
    checkpoint names them readably and a resumed run numbers new ones exactly as before the crash.
    """

    fork_id: str
    run: int
    thread: int

    def to_json(self) -> dict[str, Any]:
        return {"fork": self.fork_id, "run": self.run, "thread": self.thread}

    @classmethod
    def from_json(cls, data: Any) -> Fork:
        return cls(str(data["fork"]), int(data["run"]), int(data["thread"]))


ForkStack = tuple[Fork, ...]


@dataclass(frozen=True, slots=True)
class Task:
    """A pending task of a parallel run: its id, the station it runs, its input and its fork stack.

    `inputs` is the `BaseNode` instance for a node station, the plain input value otherwise.
    """

    task_id: int
    node_id: str
    inputs: Any
    fork_stack: ForkStack

    @property
    def station(self) -> Any:
        """The pending station as the serial codec knows it (a node, or a `TaskInput`)."""
        return as_pending(self.node_id, self.inputs)


@dataclass(slots=True)
class JoinAcc:
    """A join's accumulated value for one run of its parent fork, and what it still waits for.

    `arrived` counts the branches reduced so far; `waiting_for` (task ids) is filled in when a
    checkpoint is written, so a person reading the JSON sees which branches are outstanding.
    """

    node_id: str
    fork_run: int
    value: Any
    downstream: ForkStack
    arrived: int = 0
    cancelled_siblings: bool = False
    waiting_for: tuple[int, ...] = ()


def node_id_of(node: Any) -> str:
    """The station id of a pending entry: a node, a `TaskInput`, a frontier `Task` or a `JoinAcc`."""
    if isinstance(node, BaseNode):
        return type(node).get_node_id()
    if isinstance(node, (TaskInput, Task, JoinAcc)):
        return node.node_id
    return type(node).__name__
