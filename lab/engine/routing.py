"""How a finished task's result travels: through paths, forks, decisions and joins (pydantic-graph's rules).

The super-step engine (lab.engine.superstep) runs a task with a `Router`, which calls the native
step and follows its result the way pydantic-graph's iterator does, producing *arrivals*: new
tasks, items for joins, joins a map opens, or End. The engine applies them when the step settles.
`tried` runs a task under its retry policy; `guarded` and `branch_matches` evaluate edge
transforms and decision branches (the super-step model uses them too).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, get_args, get_origin

from pydantic_graph import BaseNode, End, Graph
from pydantic_graph.decision import Decision, DecisionBranch
from pydantic_graph.join import Join, JoinNode
from pydantic_graph.node import EndNode, StartNode
from pydantic_graph.node import Fork as NativeFork
from pydantic_graph.paths import DestinationMarker, LabelMarker, Path, TransformMarker
from pydantic_graph.step import NodeStep, Step, StepContext, StepNode
from pydantic_graph.util import unpack_type_expression

from ..errors import EdgeConditionError, GraphDefinitionError
from ..gates import station_context
from .serial import wait_signal, within
from .tasks import Fork, ForkStack, Task

T = TypeVar("T")


class RetryHooks(Protocol):
    def task_retrying(self, task: Task, attempt: int, error: Exception, failed_tries: int) -> float | None:
        """A task raised `error`: seconds to wait before trying it again in this step (its policy), or None."""
        ...


__all__ = (
    "Arrival",
    "EndReached",
    "JoinItem",
    "JoinOpen",
    "NewTask",
    "Reduced",
    "RetryHooks",
    "Router",
    "branch_matches",
    "guarded",
    "tried",
)


# -- what a task's routing produces --------------------------------------------------------------


@dataclass(slots=True)
class NewTask:
    node_id: str
    inputs: Any
    fork_stack: ForkStack


@dataclass(slots=True)
class JoinItem:
    join_id: str
    inputs: Any
    fork_stack: ForkStack


@dataclass(slots=True)
class JoinOpen:
    """A map fork with `downstream_join_id` opens its join even when nothing reaches it."""

    join_id: str
    fork_stack: ForkStack


@dataclass(slots=True)
class EndReached:
    value: Any


@dataclass(slots=True)
class Reduced:
    """A join item already reduced while the step ran (see the super-step engine's early reduction)."""

    join_id: str


Arrival = NewTask | JoinItem | JoinOpen | EndReached | Reduced


# -- routing a result through paths, forks, decisions and joins ---------------------------------


class Router:
    """Runs one task and follows its result the way pydantic-graph's iterator does.

    New fork runs get local (negative) numbers; settlement renumbers them in frontier order, so
    the numbering does not depend on which task finished first.
    """

    def __init__(self, native: Graph[Any, Any, Any, Any], state: Any, deps: Any):
        self.native = native
        self.state = state
        self.deps = deps
        self._local = 0

    async def run(self, task: Task) -> list[Arrival]:
        node = self.native.nodes.get(task.node_id)  # type: ignore[call-overload]
        out: list[Arrival] = []
        if isinstance(node, StartNode):
            await self.edges(task.node_id, task.inputs, task.fork_stack, out)
        elif isinstance(node, Step):
            ctx = StepContext(state=self.state, deps=self.deps, inputs=task.inputs)
            output = await node.call(ctx)
            if isinstance(node, NodeStep):
                self._node_result(task.node_id, output, task.fork_stack, out)
            else:
                await self.edges(task.node_id, output, task.fork_stack, out)
        else:
            await self.dest(task.node_id, task.inputs, task.fork_stack, out)
        return out

    def _node_result(self, node_id: str, result: Any, stack: ForkStack, out: list[Arrival]) -> None:
        if isinstance(result, StepNode):
            out.append(NewTask(result.step.id, result.inputs, stack))
        elif isinstance(result, JoinNode):
            out.append(JoinItem(result.join.id, result.inputs, stack))
        elif isinstance(result, BaseNode):
            nid = type(result).get_node_id()
            if nid not in self.native.nodes:
                raise GraphDefinitionError(
                    f"station {node_id} returned {nid}, which is not a node of this graph; add it to the graph"
                )
            out.append(NewTask(nid, result, stack))
        elif isinstance(result, End):
            out.append(EndReached(result.data))
        else:
            raise GraphDefinitionError(f"station {node_id} returned {result!r}; a node returns another node or End")

    async def edges(self, node_id: str, value: Any, stack: ForkStack, out: list[Arrival]) -> None:
        node = self.native.nodes[node_id]  # type: ignore[index]
        if isinstance(node, NativeFork):
            await self.fork(node, value, stack, out)
            return
        paths = self.native.edges_by_source.get(node_id, [])  # type: ignore[call-overload]
        if len(paths) != 1:
            raise GraphDefinitionError(f"station {node_id} has {len(paths)} outgoing paths; pydantic-graph needs exactly one")
        await self.path(paths[0], value, stack, out)

    async def path(self, path: Path, value: Any, stack: ForkStack, out: list[Arrival]) -> None:
        while path.items:
            item = path.items[0]
            if isinstance(item, DestinationMarker):
                await self.dest(item.destination_id, value, stack, out)
                return
            if isinstance(item, TransformMarker):
                value = guarded(
                    f"the transform {getattr(item.transform, '__qualname__', item.transform)} on an edge",
                    item.transform,
                    StepContext(state=self.state, deps=self.deps, inputs=value),
                )
            elif not isinstance(item, LabelMarker):
                raise GraphDefinitionError(f"unexpected path item {item!r} in a built graph")
            path = path.next_path

    async def dest(self, node_id: str, value: Any, stack: ForkStack, out: list[Arrival]) -> None:
        node = self.native.nodes[node_id]  # type: ignore[index]
        if isinstance(node, Step):
            out.append(NewTask(node_id, value, stack))
        elif isinstance(node, Join):
            out.append(JoinItem(node_id, value, stack))
        elif isinstance(node, NativeFork):
            await self.fork(node, value, stack, out)
        elif isinstance(node, Decision):
            for branch in node.branches:
                if guarded(f"the condition of a branch of decision {node_id}", branch_matches, branch, value):
                    await self.path(branch.path, value, stack, out)
                    return
            raise RuntimeError(f"No branch matched inputs {value!r} for decision node {node_id}.")
        elif isinstance(node, EndNode):
            out.append(EndReached(value))
        else:
            raise GraphDefinitionError(f"cannot route to {node_id} ({type(node).__name__})")

    async def fork(self, node: NativeFork[Any, Any], value: Any, stack: ForkStack, out: list[Arrival]) -> None:
        self._local -= 1
        run = self._local
        paths = self.native.edges_by_source.get(node.id, [])  # type: ignore[call-overload]
        if not node.is_map:
            for i, p in enumerate(paths):
                await self.path(p, value, (*stack, Fork(node.id, run, i)), out)
            return
        if node.downstream_join_id is not None:
            out.append(JoinOpen(node.downstream_join_id, (*stack, Fork(node.id, run, 0))))
        if isinstance(value, Iterable):
            for i, item in enumerate(value):
                await self.path(paths[0], item, (*stack, Fork(node.id, run, i)), out)
        elif isinstance(value, AsyncIterable):
            i = 0
            async for item in value:
                await self.path(paths[0], item, (*stack, Fork(node.id, run, i)), out)
                i += 1
        else:
            raise RuntimeError(f"Cannot map non-iterable value: {value!r}")


async def tried(
    call: Callable[[], Awaitable[T]], task: Task, hooks: RetryHooks, attempt: int, seconds: float | None
) -> T:
    """Await a fresh `call()` for `task`, tried again inside its step while its retry policy allows.

    Seed 003: tries happen inside the same step on the same state and are not checkpointed; a wait
    is never retried; `seconds` bounds each try (the per-node timeout).
    """
    failed = 0
    while True:
        try:
            station = station_context.get()
            if station is not None:  # each try is a visit of its own: it may ask consent() once
                station.consented = False
            aw = call()
            return await (aw if seconds is None else within(aw, seconds, task.node_id))
        except Exception as exc:
            if wait_signal(exc) is not None:
                raise
            failed += 1
            delay = hooks.task_retrying(task, attempt, exc, failed)
            if delay is None:
                raise
            if delay:
                await asyncio.sleep(delay)


def guarded(what: str, call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`: an edge's transform or a decision's test; what it raises becomes an `EdgeConditionError` naming it."""
    try:
        return call(*args)
    except Exception as exc:
        raise EdgeConditionError(f"{what} raised {type(exc).__name__}: {exc}", original=exc) from exc


def branch_matches(branch: DecisionBranch[Any], value: Any) -> bool:
    """A decision branch's test, as pydantic-graph applies it."""
    if branch.matches is not None:
        return bool(branch.matches(value))
    source = unpack_type_expression(branch.source)
    if source in (Any, object):
        return True
    if get_origin(source) is Literal:
        options = get_args(source)
        if isinstance(value, int):
            options = tuple(v for v in options if not isinstance(v, int) or isinstance(v, bool) == isinstance(value, bool))
        return value in options
    return isinstance(value, source)
