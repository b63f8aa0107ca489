"""The super-step model for declared graphs (seed 002/003): nodes return updates, reducers fold them.

`lab.graph(..., model="superstep")` runs its `@g.step` nodes the LangGraph way. A step runs its
whole frontier concurrently on one state snapshot; each node returns a partial update (a dict
of field -> value), a whole state object, or None; the updates fold through the field reducers
(lab.reducers) in the fixed node order — the order the steps were declared — after the whole
states were merged by the graph's reducer; the outgoing edges of the nodes that ran, read
against the new state, give the next frontier, where a node reached by several branches runs
once. The run ends when the frontier is empty.

A step is atomic: when a node raises, or its folded state cannot be checkpointed, its siblings'
updates are discarded with it, no checkpoint is written, the state is the head's again and a
resume runs the whole step again (lab.engine.commit). Isolation (`isolate_state`) deep-copies
the snapshot per node so a sibling never sees another's in-place mutation; a retried try starts
from the step's starting state again (seed 003). The start node only routes: its step settles
and is checkpointed like any other, but it is not counted as a step (docs/run-control.md).

The frontier and its checkpoint are the super-step engine's (`Task`s, `StepOutcome`, its
`StepHooks`), so the run, the store and the views need nothing new.
"""

from __future__ import annotations

import asyncio
import copy
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_graph import EndMarker, Graph
from pydantic_graph.decision import Decision
from pydantic_graph.join import Join
from pydantic_graph.node import EndNode, StartNode
from pydantic_graph.node import Fork as NativeFork
from pydantic_graph.paths import DestinationMarker, LabelMarker, Path, TransformMarker
from pydantic_graph.step import Step, StepContext

from ..errors import GraphDefinitionError, ReducerError, StateContractError
from ..gates import station_context
from ..reducers import WHOLE_STATE, Reducer, last
from .commit import Settled, StepHooks, StepOutcome, commit
from .model_gates import gate_unasked
from .routing import branch_matches, guarded, tried
from .serial import Stop, wait_signal
from .superstep import START_FORK, boundary_stop, split_frontier
from .tasks import Task

__all__ = ("ModelSpec", "Isolation", "drive_model")

Isolation = Literal["fanout", "always", "never"]


@dataclass(frozen=True)
class ModelSpec:
    """A super-step model graph's options: field reducers, isolation, concurrency, node order."""

    reducers: Mapping[str, Reducer] = field(default_factory=dict)
    isolate_state: Isolation = "fanout"
    max_node_concurrency: int | None = None
    order: tuple[str, ...] = ()
    """Node ids in declaration order: the fixed order a step's updates fold in."""
    gates: frozenset[str] = frozenset()
    """The steps declared `@g.step(gate=True)`: the stations that may ask `consent()`, and must."""


class _Cancelled(Exception):
    """Stands for a sibling cancelled because another node of its step raised."""


async def drive_model(
    native: Graph[Any, Any, Any, Any],
    *,
    spec: ModelSpec,
    state: Any,
    deps: Any,
    pending: Sequence[Any],
    hooks: StepHooks,
    max_steps: int | None,
    should_pause: Callable[[], bool],
    timeouts: Mapping[str, float] | None = None,
    between: Callable[[], Awaitable[None]] | None = None,
) -> Stop:
    """Run model super-steps from the frontier `pending` until it is empty, a node fails, waits, `max_steps` or a pause."""
    frontier, _ = split_frontier(pending)
    steps = 0
    while True:
        halt = await boundary_stop(steps, max_steps, between, should_pause)
        if halt is not None:
            return halt
        contexts = hooks.task_contexts(frontier)
        if contexts is None:
            return Stop("waiting", steps)
        attempts = hooks.step_entered(frontier)
        step = _ModelStep(native, spec, state, deps, frontier, attempts, hooks, timeouts or {})
        try:
            await step.execute(contexts)
        except asyncio.CancelledError:
            hooks.step_aborted(frontier, attempts)
            raise
        outcome = _commit(step, frontier, attempts, hooks)
        if isinstance(outcome, str):
            return Stop(outcome, steps)  # type: ignore[arg-type]  # nothing applied: not a step, as a serial park
        if any(t.node_id != StartNode.id for t in frontier):
            steps += 1  # the start's routing is checkpointed but is not a step (docs/run-control.md)
        if outcome.end is not None:
            return Stop("done", steps)
        if hooks.after_step(outcome):
            return Stop("waiting", steps)
        frontier = [t for t in outcome.frontier if isinstance(t, Task)]


def _commit(step: _ModelStep, frontier: list[Task], attempts: dict[int, int], hooks: StepHooks) -> StepOutcome | str:
    """The step as a whole: its checkpoint, or "failed" (nothing written) or "waiting" (no update applied)."""
    if step.failure is not None:
        task, exc = step.failure
        hooks.step_failed(frontier, attempts, task.node_id, exc)  # nothing is written; the state rolls back
        if not isinstance(exc, Exception):
            raise exc
        return "failed"
    if step.parked and len(frontier) > 1:
        task = step.parked[0][0]
        hooks.step_failed(frontier, attempts, task.node_id, GraphDefinitionError(
            f"station {task.node_id} asked to wait (a gate or interrupt()) in a super-step of {len(frontier)} nodes; "
            "a superstep-model graph waits only in a step of its own: route to the waiting step from one node"
        ))
        return "failed"
    if step.parked:  # the step waits: no update applies, the run parks at its head's state (no checkpoint of its own)
        hooks.step_parked(step.parked)
        return "waiting"
    try:
        outcome = step.settle()
    except Exception as exc:
        hooks.step_failed(frontier, attempts, step.settling or frontier[0].node_id, exc)
        return "failed"
    if not commit(hooks, frontier, attempts, outcome, step.blame):
        return "failed"  # the folded state cannot be stored: the whole step is discarded
    return outcome


class _ModelStep:
    """One super-step of the model: run every node on the snapshot, then fold and route."""

    def __init__(
        self,
        native: Graph[Any, Any, Any, Any],
        spec: ModelSpec,
        state: Any,
        deps: Any,
        tasks: list[Task],
        attempts: dict[int, int],
        hooks: StepHooks,
        timeouts: Mapping[str, float],
    ):
        self.native, self.spec, self.state, self.deps = native, spec, state, deps
        rank = {nid: i for i, nid in enumerate(spec.order)}
        self.tasks = sorted(tasks, key=lambda t: (t.node_id != StartNode.id, rank.get(t.node_id, len(rank)), t.task_id))
        self.attempts, self.hooks, self.timeouts = attempts, hooks, timeouts
        self.results: dict[int, tuple[Any, float]] = {}
        self.failure: tuple[Task, BaseException] | None = None
        self.parked: list[tuple[Task, int, Any]] = []
        self.settling: str | None = None
        self._next_task = max((t.task_id for t in tasks), default=-1) + 1

    # -- running ---------------------------------------------------------------------------

    async def execute(self, contexts: Mapping[int, Any]) -> None:
        runnable = [t for t in self.tasks if t.node_id != StartNode.id]
        copy_each = self.spec.isolate_state == "always" or (self.spec.isolate_state == "fanout" and len(runnable) > 1)
        limit = self.spec.max_node_concurrency
        gate = asyncio.Semaphore(limit) if limit is not None else None
        aio: dict[int, asyncio.Task[None]] = {}
        for task in runnable:
            snapshot = copy.deepcopy(self.state) if copy_each else self.state
            token = station_context.set(contexts.get(task.task_id))  # the asyncio task copies it
            try:
                aio[task.task_id] = asyncio.ensure_future(self._run_one(task, snapshot, gate, aio))
            finally:
                station_context.reset(token)
        try:
            await asyncio.gather(*aio.values(), return_exceptions=True)
        except asyncio.CancelledError:
            for t in aio.values():
                t.cancel()
            await asyncio.gather(*aio.values(), return_exceptions=True)
            raise

    async def _run_one(self, task: Task, snapshot: Any, gate: asyncio.Semaphore | None, aio: dict[int, asyncio.Task[None]]) -> None:
        started = time.perf_counter()
        try:
            if gate is None:
                result = await self._tries(task, snapshot)
            else:
                async with gate:
                    result = await self._tries(task, snapshot)
        except asyncio.CancelledError:
            if self.failure is not None:
                return  # a sibling raised: this step is discarded as a whole
            raise
        except BaseException as exc:
            signal = wait_signal(exc)
            if signal is not None:  # a consent wait from a step not declared a gate is refused where it parks
                self.parked.append((task, self.attempts.get(task.task_id, 0), signal))
                return
            self._fail(task, exc, aio)
            return
        unasked = gate_unasked(task.node_id, station_context.get(), self.spec.gates)
        if unasked is not None:
            self._fail(task, unasked, aio)
            return
        self.results[task.task_id] = (result, round((time.perf_counter() - started) * 1000, 3))
        self.hooks.task_returned(task, self.attempts.get(task.task_id), self.results[task.task_id][1])

    def _fail(self, task: Task, exc: BaseException, aio: dict[int, asyncio.Task[None]]) -> None:
        """The step fails with `task`'s `exc` (the first failure wins); its siblings are cancelled."""
        if self.failure is None:
            self.failure = (task, exc)
            me = asyncio.current_task()
            for t in aio.values():
                if t is not me and not t.done():
                    t.cancel()

    async def _tries(self, task: Task, snapshot: Any) -> Any:
        """One node on its snapshot, tried again inside this step while its retry policy allows (seed 003).

        Every try starts from the step's starting state: what a failed try changed in place is undone,
        and its `interrupt()` calls get the answers the station was given again, in order.
        """
        node = self.native.nodes.get(task.node_id)  # type: ignore[call-overload]
        if not isinstance(node, Step):
            raise GraphDefinitionError(f"station {task.node_id} is not a @g.step; a superstep-model graph runs steps")
        tries = 0

        def call() -> Any:
            nonlocal tries
            if tries:
                _reset(snapshot, self.hooks.head_state())
                station = station_context.get()
                if station is not None:  # the try asks its interrupt()s again: the answers it was given are its own
                    station.used = 0
            tries += 1
            return node.call(StepContext(state=snapshot, deps=self.deps, inputs=None))

        return await tried(call, task, self.hooks, self.attempts.get(task.task_id, 0), self.timeouts.get(task.node_id))

    # -- folding and routing ---------------------------------------------------------------

    def settle(self) -> StepOutcome:
        """Fold the updates in node order into the state, then resolve the edges against it."""
        staged = self._fold(*self._updates())
        for name, value in staged.items():  # every reducer ran: only now does the live state change
            setattr(self.state, name, value)
        out = StepOutcome()
        live: list[Task] = []
        seen: set[str] = set()
        end_value: Any = None
        reached_end = False
        for task in self.tasks:
            value = task.inputs if task.node_id == StartNode.id else self.state
            nxt: list[str] = []
            for dest, v in self._destinations(task.node_id, value):
                nxt.append(dest)
                if dest == EndNode.id:  # the state itself is the run's result (run.state); a transform gives an output
                    end_value, reached_end = (None if v is self.state else v), True
                elif dest not in seen:  # a node reached by several branches runs once
                    seen.add(dest)
                    live.append(Task(self._next_task, dest, None, (START_FORK,)))
                    self._next_task += 1
            ms = self.results[task.task_id][1] if task.task_id in self.results else 0.0  # the start only routes
            out.settled.append(Settled(task, self.attempts.get(task.task_id, 0), ms, tuple(nxt)))
        out.frontier = list(live)
        if not live:
            out.end = EndMarker(end_value if reached_end else None)
        return out

    def blame(self, error: StateContractError) -> tuple[str, str] | None:
        """The station whose update holds the value the codec refused, and which field it is."""
        named = re.search(r"state field '([^'.]+)", str(error))
        field_name = named.group(1) if named else None
        updates: list[tuple[str, str, Any]] = []  # (station, field, value) in node order
        for task in self.tasks:
            result = self.results.get(task.task_id, (None, 0.0))[0]
            if isinstance(result, Mapping):
                updates += [(task.node_id, str(k), v) for k, v in result.items()]
            elif result is not None:
                updates += [(task.node_id, f, getattr(result, f, None)) for f in _fields(self.state)]
        if field_name is not None:
            updates = [u for u in updates if u[1] == field_name]
        for node_id, name, value in updates:
            if not _jsonable(value):
                return node_id, f"update of field {name!r}"
        if updates:
            return updates[0][0], f"update of field {updates[0][1]!r}"
        return None

    def _updates(self) -> tuple[list[tuple[str, Any]], list[tuple[str, Mapping[str, Any]]]]:
        """The nodes' results in node order: whole states, and partial updates."""
        state_type = type(self.state)
        wholes: list[tuple[str, Any]] = []
        partial: list[tuple[str, Mapping[str, Any]]] = []
        for task in self.tasks:
            self.settling = task.node_id
            result = self.results[task.task_id][0] if task.node_id != StartNode.id else None
            if result is None:
                continue
            if isinstance(result, state_type) and not isinstance(result, Mapping):
                wholes.append((task.node_id, result))
            elif isinstance(result, Mapping):
                partial.append((task.node_id, result))
            else:
                raise GraphDefinitionError(
                    f"station {task.node_id} returned {result!r}; a node of a superstep-model graph returns a dict "
                    f"of field updates, a whole {state_type.__qualname__}, or None"
                )
        return wholes, partial

    def _fold(self, wholes: list[tuple[str, Any]], partial: list[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
        fields = _fields(self.state)
        staged: dict[str, Any] = {}
        if wholes:
            merge = self.spec.reducers.get(WHOLE_STATE)
            base = wholes[0][1]
            for node_id, other in wholes[1:]:
                base = other if merge is None else self._apply(merge, base, other, WHOLE_STATE, node_id)
            staged = {name: getattr(base, name) for name in fields}
        for node_id, update in partial:
            for name, value in update.items():
                if name not in fields:
                    raise GraphDefinitionError(
                        f"station {node_id} returned an update for {name!r}, which is not a field of "
                        f"{type(self.state).__qualname__} (its fields are {list(fields)}); the step is not checkpointed"
                    )
                current = staged[name] if name in staged else getattr(self.state, name)
                staged[name] = self._apply(self.spec.reducers.get(name, last), current, value, name, node_id)
        return staged

    def _apply(self, reducer: Reducer, current: Any, update: Any, name: str, node_id: str) -> Any:
        self.settling = node_id
        try:
            return reducer(current, update)
        except Exception as exc:
            rname = getattr(reducer, "__qualname__", repr(reducer))
            what = "the graph's whole-state reducer" if name == WHOLE_STATE else f"the reducer {rname} of field {name!r}"
            raise ReducerError(
                f"{what} raised {type(exc).__name__}: {exc} folding the update of station {node_id}; the step is not "
                "checkpointed (its head stays): fix the reducer or the update and retry the run",
                node_id=node_id,
                original=exc,
            ) from exc

    def _destinations(self, node_id: str, value: Any) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for path in self.native.edges_by_source.get(node_id, []):  # type: ignore[call-overload]
            self._path(path, value, out)
        return out

    def _path(self, path: Path, value: Any, out: list[tuple[str, Any]]) -> None:
        while path.items:
            item = path.items[0]
            if isinstance(item, DestinationMarker):
                self._dest(item.destination_id, value, out)
                return
            if isinstance(item, TransformMarker):
                value = guarded(
                    f"the transform {getattr(item.transform, '__qualname__', item.transform)} on an edge",
                    item.transform,
                    StepContext(state=self.state, deps=self.deps, inputs=value),
                )
            elif not isinstance(item, LabelMarker):
                raise GraphDefinitionError(f"a superstep-model graph routes plain edges, broadcasts and decisions, not {item!r}")
            path = path.next_path

    def _dest(self, node_id: str, value: Any, out: list[tuple[str, Any]]) -> None:
        node = self.native.nodes[node_id]  # type: ignore[index]
        if isinstance(node, (Step, EndNode)):
            out.append((node_id, value))
        elif isinstance(node, NativeFork) and not node.is_map:
            for p in self.native.edges_by_source.get(node.id, []):  # type: ignore[call-overload]
                self._path(p, value, out)
        elif isinstance(node, Decision):
            for branch in node.branches:
                if guarded(f"the condition of a branch of decision {node_id}", branch_matches, branch, value):
                    self._path(branch.path, value, out)
                    return
            raise GraphDefinitionError(f"no branch of decision {node_id} matched {value!r}; add a catch-all branch")
        else:
            kind = "a map" if isinstance(node, NativeFork) else "a join" if isinstance(node, Join) else type(node).__name__
            raise GraphDefinitionError(
                f"station {node_id} is {kind}; a superstep-model graph folds updates with field reducers instead "
                "(lab.graph(..., reducers=...)) and fans out with broadcast edges"
            )


def _fields(state: Any) -> tuple[str, ...]:
    from ..reducers import state_fields

    fields = state_fields(type(state))
    if fields is None:
        raise GraphDefinitionError(
            f"a superstep-model graph needs a dataclass or pydantic state to fold updates into, got {type(state).__qualname__}"
        )
    return fields


def _reset(state: Any, fresh: Any) -> None:
    """Put the fields of `fresh` back into `state` in place (a retried try sees the step's starting state)."""
    for name in _fields(state):
        setattr(state, name, getattr(fresh, name))


def _jsonable(value: Any) -> bool:
    from pydantic_core import to_jsonable_python

    try:
        to_jsonable_python(value)
    except Exception:
        return False
    return True
