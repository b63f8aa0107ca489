"""The super-step engine: parallel graphs (broadcast, map, joins) stepped one frontier at a time.

A boundary of a parallel run is its *frontier*: every pending task with its fork stack, every
join's accumulated value for each run of its parent fork, and the state. A super-step runs all
pending tasks concurrently (as pydantic-graph does), then settles their results in frontier
order, deterministically: new tasks join the next frontier, items reaching a join are reduced
into it, a join whose fork run has no branch left in flight fires. One checkpoint per step.

The engine schedules the native graph's own objects — `Step.call`, `Decision` branches, `Fork`
maps and broadcasts (also over async iterables), `Join.reduce` with a `ReducerContext`, path
transforms and labels — with pydantic-graph's rules for fork stacks and join completion
(`Graph.get_parent_fork`, `is_final_join`, `intermediate_join_nodes`), so the frontier is the
lab's to checkpoint and restore. Forks, decisions, joins and the end node are not tasks of their
own: a task routes its result through them when it finishes (pydantic-graph runs them as
instant tasks). docs/parallel.md describes the checkpoint shape and the order of joined values.

The engine knows nothing of stores or views: it reports to its `StepHooks` (the run).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar, get_args, get_origin

from pydantic_graph import BaseNode, End, EndMarker, Graph
from pydantic_graph.decision import Decision, DecisionBranch
from pydantic_graph.join import Join, JoinNode, JoinState, ReducerContext
from pydantic_graph.node import EndNode, StartNode
from pydantic_graph.node import Fork as NativeFork
from pydantic_graph.paths import DestinationMarker, LabelMarker, Path, TransformMarker
from pydantic_graph.step import NodeStep, Step, StepContext, StepNode
from pydantic_graph.util import unpack_type_expression

from ..errors import EdgeConditionError, GraphDefinitionError, ReducerError
from ..gates import StationContext, WaitSignal, station_context
from .serial import Stop, wait_signal, within
from .tasks import Fork, ForkStack, JoinAcc, Task

T = TypeVar("T")

__all__ = (
    "StepHooks",
    "StepOutcome",
    "Settled",
    "branch_matches",
    "drive_steps",
    "entry_task",
    "guarded",
    "split_frontier",
    "tried",
)

START_FORK = Fork(StartNode.id, 0, 0)
"""The fork stack every run begins with (pydantic-graph's initial `ForkStackItem`)."""


def entry_task(node_id: str, inputs: Any) -> Task:
    """The first task of a parallel run: the start node with the graph's inputs, or a `BaseNode`."""
    return Task(0, node_id, inputs, (START_FORK,))


def split_frontier(pending: Sequence[Any]) -> tuple[list[Task], list[JoinAcc]]:
    tasks = [p for p in pending if isinstance(p, Task)]
    joins = [p for p in pending if isinstance(p, JoinAcc)]
    return tasks, joins


# -- what a task's routing produces --------------------------------------------------------------


@dataclass(slots=True)
class _NewTask:
    node_id: str
    inputs: Any
    fork_stack: ForkStack


@dataclass(slots=True)
class _JoinItem:
    join_id: str
    inputs: Any
    fork_stack: ForkStack


@dataclass(slots=True)
class _JoinOpen:
    """A map fork with `downstream_join_id` opens its join even when nothing reaches it."""

    join_id: str
    fork_stack: ForkStack


@dataclass(slots=True)
class _End:
    value: Any


@dataclass(slots=True)
class _Reduced:
    """A join item already reduced while the step ran (see `_Step._reduce_early`)."""

    join_id: str


_Arrival = _NewTask | _JoinItem | _JoinOpen | _End | _Reduced


# -- reporting -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Settled:
    """A task that finished: how long it ran and the stations its result went on to."""

    task: Task
    attempt: int
    ms: float
    next: tuple[str, ...]


@dataclass(slots=True)
class StepOutcome:
    """What one super-step did; the run turns it into one checkpoint and its events."""

    settled: list[Settled] = field(default_factory=list)
    parked: list[tuple[Task, int, WaitSignal]] = field(default_factory=list)
    failed: list[tuple[Task, int, BaseException]] = field(default_factory=list)
    dropped: list[tuple[Task, int, str]] = field(default_factory=list)
    """Tasks whose result was discarded: cancelled by End from a sibling, or by a join's reducer."""
    frontier: list[Any] = field(default_factory=list)
    """The next frontier: pending tasks (incl. parked and failed ones) and open joins."""
    end: EndMarker[Any] | None = None
    fired: list[str] = field(default_factory=list)
    """Joins whose fork run completed in this step."""


class StepHooks(Protocol):
    """What the super-step engine reports; the run owns checkpoints, events and waits."""

    def task_contexts(self, tasks: Sequence[Task]) -> dict[int, StationContext] | None:
        """The context of each task about to run, or None to park before the step (a breakpoint)."""
        ...

    def step_entered(self, tasks: Sequence[Task]) -> dict[int, int]:
        """The step's tasks are about to run; returns each task's attempt number."""
        ...

    def step_settled(self, outcome: StepOutcome) -> None:
        """The step finished: write its checkpoint (and waits, failure, End) in one transaction."""
        ...

    def step_failed(self, tasks: Sequence[Task], attempts: dict[int, int], node_id: str, error: BaseException) -> None:
        """Settling the step failed (a reducer, transform or decision raised): nothing is written."""
        ...

    def step_aborted(self, tasks: Sequence[Task], attempts: dict[int, int]) -> None:
        """The step was cancelled in flight."""
        ...

    def task_retrying(self, task: Task, attempt: int, error: Exception, failed_tries: int) -> float | None:
        """A task raised `error`: seconds to wait before trying it again in this step (its policy), or None."""
        ...

    def after_step(self, outcome: StepOutcome) -> bool:
        """True parks the run after this step (a breakpoint after a settled station)."""
        ...


# -- the driver ----------------------------------------------------------------------------------


async def drive_steps(
    native: Graph[Any, Any, Any, Any],
    *,
    state: Any,
    deps: Any,
    pending: Sequence[Any],
    hooks: StepHooks,
    max_steps: int | None,
    should_pause: Callable[[], bool],
    timeouts: Mapping[str, float] | None = None,
    between: Callable[[], Awaitable[None]] | None = None,
) -> Stop:
    """Run super-steps from the frontier `pending` until End, a failure, a wait, `max_steps` or a pause.

    `timeouts` gives some stations a time limit per try: past it the try fails with `NodeTimeout`.
    `between` is awaited at every boundary before the next step (a stream waits there for its reader).
    """
    frontier = list(pending)
    steps = 0
    while True:
        if max_steps is not None and steps >= max_steps:
            return Stop("paused", steps)
        if steps and between is not None:
            await between()
        if steps and should_pause():
            return Stop("paused", steps)
        tasks, _ = split_frontier(frontier)
        contexts = hooks.task_contexts(tasks)
        if contexts is None:
            return Stop("waiting", steps)
        attempts = hooks.step_entered(tasks)
        step = _Step(native, state, deps, frontier, attempts, hooks, timeouts or {})
        try:
            await step.execute(contexts)
        except asyncio.CancelledError:
            hooks.step_aborted(tasks, attempts)
            raise
        if step.escaped is not None:
            _escape(hooks, tasks, attempts, *step.escaped)
        try:
            outcome = await step.settle()
        except Exception as exc:
            hooks.step_failed(tasks, attempts, step.settling or (tasks[0].node_id if tasks else "?"), exc)
            return Stop("failed", steps)
        hooks.step_settled(outcome)
        steps += 1
        stop = _stop_after(hooks, outcome, steps)
        if stop is not None:
            return stop
        frontier = outcome.frontier


def _stop_after(hooks: StepHooks, outcome: StepOutcome, steps: int) -> Stop | None:
    """Why the run stops after a settled step (End, a failure, a wait, a breakpoint), or None to go on."""
    if outcome.end is not None:
        return Stop("done", steps)
    if outcome.failed:
        return Stop("failed", steps)
    if outcome.parked or hooks.after_step(outcome):
        return Stop("waiting", steps)
    return None


def _escape(hooks: StepHooks, tasks: Sequence[Task], attempts: dict[int, int], task: Task, exc: BaseException) -> None:
    """A task raised KeyboardInterrupt, SystemExit or another BaseException: record the step
    (interrupted by Ctrl-C, else failed; the state rolls back), then let the exception go on."""
    if isinstance(exc, KeyboardInterrupt):
        hooks.step_aborted(tasks, attempts)
    else:
        hooks.step_failed(tasks, attempts, task.node_id, exc)
    raise exc


_Result = tuple[Literal["ok"], list[_Arrival], float] | tuple[Literal["parked", "failed"], BaseException, float]


class _Step:
    """One super-step: run the frontier's tasks concurrently, then settle them in frontier order."""

    def __init__(
        self,
        native: Graph[Any, Any, Any, Any],
        state: Any,
        deps: Any,
        frontier: list[Any],
        attempts: dict[int, int],
        hooks: StepHooks,
        timeouts: Mapping[str, float],
    ):
        self.hooks = hooks
        self.timeouts = timeouts
        self.native = native
        self.state = state
        self.deps = deps
        self.tasks, joins = split_frontier(frontier)
        self.joins: dict[tuple[str, int], JoinAcc] = {(j.node_id, j.fork_run): j for j in joins}
        self.attempts = attempts
        self.results: dict[int, _Result] = {}
        self.end_from: int | None = None
        """The task whose result reached End first; its siblings were cancelled."""
        self.settling: str | None = None
        self.finished: list[int] = []
        """Task ids in the order their results came back."""
        self.early_cancelled: set[tuple[str, int]] = set()
        """Fork runs a reducer cancelled while the step ran (as pydantic-graph cancels in-flight siblings)."""
        self.survivors: set[int] = set()
        """Tasks that finished before their fork run was cancelled: they settle as usual."""
        self.cancelled_ids: set[int] = set()
        self.early_error: Exception | None = None
        self.escaped: tuple[Task, BaseException] | None = None
        """The first task that raised what is not an Exception; the whole step fails with it."""
        ids = [t.task_id for t in self.tasks]
        runs = [f.run for t in self.tasks for f in t.fork_stack]
        runs += [j.fork_run for j in joins] + [f.run for j in joins for f in j.downstream]
        self._next_task = max(ids, default=-1) + 1
        self._next_run = max(runs, default=0) + 1

    # -- running ---------------------------------------------------------------------------

    async def execute(self, contexts: dict[int, StationContext]) -> None:
        aio: dict[int, asyncio.Task[None]] = {}
        for task in self.tasks:
            token = station_context.set(contexts.get(task.task_id))  # the asyncio task copies it
            try:
                aio[task.task_id] = asyncio.ensure_future(self._run_one(task, aio))
            finally:
                station_context.reset(token)
        try:
            outcomes = await asyncio.gather(*aio.values(), return_exceptions=True)
        except asyncio.CancelledError:
            for t in aio.values():
                t.cancel()
            await asyncio.gather(*aio.values(), return_exceptions=True)
            raise
        cancelled_from_outside = [
            t for t, o in zip(aio, outcomes, strict=True) if isinstance(o, asyncio.CancelledError) and t not in self.cancelled_ids
        ]
        # End reached, or a task raised a BaseException: the engine cancelled the rest itself
        if self.end_from is None and self.escaped is None and cancelled_from_outside:
            raise asyncio.CancelledError  # a task was cancelled from outside the engine

    async def _run_one(self, task: Task, aio: dict[int, asyncio.Task[None]]) -> None:
        started = time.perf_counter()
        try:
            arrivals = await self._tries(task)
        except asyncio.CancelledError:
            if self.end_from is not None or task.task_id in self.cancelled_ids:
                return  # a sibling reached End, or a reducer cancelled its siblings: as pydantic-graph does
            raise
        except Exception as exc:
            ms = _ms(started)
            signal = wait_signal(exc)
            self.results[task.task_id] = ("parked", signal, ms) if signal is not None else ("failed", exc, ms)
            return
        except BaseException as exc:  # raised on the loop, it would stop the loop: stop the step instead
            if self.escaped is None:
                self.escaped = (task, exc)
                me = asyncio.current_task()
                for t in aio.values():
                    if t is not me and not t.done():
                        t.cancel()
            return
        self.results[task.task_id] = ("ok", arrivals, _ms(started))
        self.finished.append(task.task_id)
        try:
            self._reduce_early(arrivals, aio)
        except Exception as exc:  # a reducer raised: the step fails when it settles
            self.early_error = self.early_error or exc
        if self.end_from is None and any(isinstance(a, _End) for a in arrivals):
            self.end_from = task.task_id
            me = asyncio.current_task()
            for t in aio.values():
                if t is not me and not t.done():
                    t.cancel()

    async def _tries(self, task: Task) -> list[_Arrival]:
        """Run one task, tried again inside this step while its retry policy allows (seed 003)."""
        return await tried(
            lambda: _Router(self.native, self.state, self.deps).run(task),
            task,
            self.hooks,
            self.attempts.get(task.task_id, 0),
            self.timeouts.get(task.node_id),
        )

    def _reduce_early(self, arrivals: list[_Arrival], aio: dict[int, asyncio.Task[None]]) -> None:
        """Reduce items for joins whose reducer may cancel its siblings as they arrive (completion order).

        A reducer that takes a `ReducerContext` (`ReduceFirstValue`, early stopping) may call
        `cancel_sibling_tasks()`; pydantic-graph then cancels the siblings still in flight, so their
        side effects never happen. Plain reducers wait for settlement, in frontier order.
        """
        for i, a in enumerate(arrivals):
            if not isinstance(a, _JoinItem) or any(f.run < 0 for f in a.fork_stack):
                continue
            if not _may_cancel(self._join(a.join_id)):
                continue
            before = set(self.early_cancelled)
            self._reduce(a.join_id, a.inputs, a.fork_stack, [], self.early_cancelled)
            arrivals[i] = _Reduced(a.join_id)
            if self.early_cancelled != before:
                self.survivors |= set(self.finished)
                for t in self.tasks:
                    if t.task_id not in self.survivors and _in_any(t.fork_stack, self.early_cancelled - before):
                        self.cancelled_ids.add(t.task_id)
                        aio[t.task_id].cancel()

    # -- settling --------------------------------------------------------------------------

    async def settle(self) -> StepOutcome:
        if self.early_error is not None:
            raise self.early_error
        out = StepOutcome()
        if self.end_from is not None:
            return self._settle_end(out)
        live: list[Task] = []  # the next frontier's tasks, in order
        sources: list[ForkStack] = []
        cancelled: set[tuple[str, int]] = set(self.early_cancelled)  # (fork id, run) a reducer cancelled
        for task in self.tasks:
            attempt = self.attempts.get(task.task_id, 0)
            if _in_any(task.fork_stack, cancelled) and task.task_id not in self.survivors:
                how = "finished, but" if task.task_id in self.results else "cancelled in flight:"
                out.dropped.append((task, attempt, f"{how} a join's reducer cancelled its siblings"))
                continue
            kind, value, ms = self.results[task.task_id]
            if kind == "parked":
                assert isinstance(value, WaitSignal)
                out.parked.append((task, attempt, value))
                live.append(task)
                continue
            if kind == "failed":
                assert isinstance(value, BaseException)
                out.failed.append((task, attempt, value))
                live.append(task)
                continue
            self.settling = task.node_id
            assert isinstance(value, list)
            nxt = self._apply(value, live, cancelled, out)
            out.settled.append(Settled(task, attempt, ms, nxt))
            sources.append(task.fork_stack)
            if out.end is not None:
                return out
        if self.early_cancelled:  # what the survivors spawned in a cancelled fork run is cancelled too
            live[:] = [t for t in live if not _in_any(t.fork_stack, self.early_cancelled)]
        await self._fire_joins(sources, live, cancelled, out)
        if out.end is not None:
            return out
        out.frontier = [*live, *self._open_joins(live)]
        return out

    def _settle_end(self, out: StepOutcome) -> StepOutcome:
        for task in self.tasks:
            attempt = self.attempts.get(task.task_id, 0)
            res = self.results.get(task.task_id)
            if task.task_id == self.end_from:
                assert res is not None and res[0] == "ok"
                end = next(a for a in res[1] if isinstance(a, _End))  # type: ignore[union-attr]
                out.settled.append(Settled(task, attempt, res[2], (EndNode.id,)))
                out.end = EndMarker(end.value)
            elif res is not None and res[0] == "ok":
                out.settled.append(Settled(task, attempt, res[2], ()))
            else:
                out.dropped.append((task, attempt, "cancelled in flight: a sibling reached End"))
        return out

    def _apply(self, arrivals: list[_Arrival], live: list[Task], cancelled: set[tuple[str, int]], out: StepOutcome) -> tuple[str, ...]:
        """Apply one task's (or join's) routed result; returns the stations it went on to."""
        runs: dict[int, int] = {}

        def glob(stack: ForkStack) -> ForkStack:
            fixed = []
            for f in stack:
                if f.run < 0:
                    if f.run not in runs:
                        runs[f.run] = self._next_run
                        self._next_run += 1
                    f = Fork(f.fork_id, runs[f.run], f.thread)
                fixed.append(f)
            return tuple(fixed)

        nxt: list[str] = []
        for a in arrivals:
            if isinstance(a, _NewTask):
                live.append(Task(self._next_task, a.node_id, a.inputs, glob(a.fork_stack)))
                self._next_task += 1
                nxt.append(a.node_id)
            elif isinstance(a, _JoinOpen):
                fork_run, downstream = self._resolve_join(a.join_id, glob(a.fork_stack))
                if (a.join_id, fork_run) not in self.joins:
                    self.joins[(a.join_id, fork_run)] = JoinAcc(a.join_id, fork_run, self._join(a.join_id).initial_factory(), downstream)
            elif isinstance(a, _Reduced):
                nxt.append(a.join_id)
            elif isinstance(a, _JoinItem):
                self._reduce(a.join_id, a.inputs, glob(a.fork_stack), live, cancelled)
                nxt.append(a.join_id)
            else:
                out.end = EndMarker(a.value)
                nxt.append(EndNode.id)
                break
        return tuple(nxt)

    def _join(self, join_id: str) -> Join[Any, Any, Any, Any]:
        node = self.native.nodes[join_id]
        assert isinstance(node, Join)
        return node

    def _resolve_join(self, join_id: str, stack: ForkStack) -> tuple[int, ForkStack]:
        """Which run of the join's parent fork an item belongs to, and the stack its output runs under."""
        parent = self.native.get_parent_fork(join_id).fork_id  # type: ignore[arg-type]
        for i, f in enumerate(reversed(stack)):
            if f.fork_id == parent:
                downstream = stack[: len(stack) - i] if self.native.is_final_join(join_id) else stack  # type: ignore[arg-type]
                return f.run, downstream
        raise GraphDefinitionError(f"an item reached join {join_id} outside a run of its parent fork {parent}")

    def _reduce(self, join_id: str, value: Any, stack: ForkStack, live: list[Task], cancelled: set[tuple[str, int]]) -> None:
        join = self._join(join_id)
        fork_run, downstream = self._resolve_join(join_id, stack)
        acc = self.joins.get((join_id, fork_run))
        if acc is None:
            acc = self.joins[(join_id, fork_run)] = JoinAcc(join_id, fork_run, join.initial_factory(), downstream)
        native_state = JoinState(acc.value, (), acc.cancelled_siblings)
        ctx = ReducerContext(state=self.state, deps=self.deps, join_state=native_state)
        self.settling = join_id
        try:
            acc.value = join.reduce(ctx, acc.value, value)
        except Exception as exc:
            name = getattr(join.reducer, "__qualname__", repr(join.reducer))
            raise ReducerError(
                f"the reducer {name} of join {join_id} raised {type(exc).__name__}: {exc}; the step is not "
                "checkpointed (its head stays), fix the reducer and retry the run",
                node_id=join_id,
                original=exc,
            ) from exc
        acc.arrived += 1
        if native_state.cancelled_sibling_tasks:
            acc.cancelled_siblings = True
            parent = self.native.get_parent_fork(join_id).fork_id  # type: ignore[arg-type]
            cancelled.add((parent, fork_run))
            live[:] = [t for t in live if not _in_any(t.fork_stack, {(parent, fork_run)})]

    def _completed(self, join_id: str, fork_run: int, live: list[Task]) -> bool:
        """pydantic-graph's rule: no task of this fork run is still between the fork and the join."""
        inside = self.native.get_parent_fork(join_id).intermediate_nodes  # type: ignore[arg-type]
        for t in live:
            if t.node_id in inside and any(f.run == fork_run for f in t.fork_stack):
                return False
        return True

    def _blocked(self, join_id: str, acc: JoinAcc) -> bool:
        """A join waits while a join between it and its parent fork, in the same fork run, is open."""
        between = self.native.intermediate_join_nodes.get(join_id, set())  # type: ignore[arg-type]
        if not between:
            return False
        parent = self.native.get_parent_fork(join_id).fork_id  # type: ignore[arg-type]
        mine = next((f.run for f in acc.downstream if f.fork_id == parent), None)
        for (other_id, _), other in self.joins.items():
            if other_id in between:
                theirs = next((f.run for f in other.downstream if f.fork_id == parent), None)
                if mine is not None and mine == theirs:
                    return True
        return False

    async def _fire_joins(self, sources: list[ForkStack], live: list[Task], cancelled: set[tuple[str, int]], out: StepOutcome) -> None:
        """Fire every join whose fork run just completed; when no task is left, finish the rest."""
        pending_sources = list(sources)
        while pending_sources and out.end is None:
            runs = {f.run for st in pending_sources for f in st}
            pending_sources = []
            for key, acc in list(self.joins.items()):
                if key in self.joins and acc.fork_run in runs and await self._fire_if_done(key, acc, live, cancelled, out):
                    pending_sources.append(acc.downstream)
                    if out.end is not None:
                        return
        while not live and self.joins and out.end is None:
            fired = [await self._fire_if_done(key, acc, live, cancelled, out) for key, acc in list(self.joins.items())]
            if live or not any(fired):
                break
        if not live and self.joins and out.end is None and not out.parked and not out.failed:
            stuck = sorted({j.node_id for j in self.joins.values()})
            raise GraphDefinitionError(f"joins {stuck} can never complete: no task is left to reach them")

    async def _fire_if_done(self, key: tuple[str, int], acc: JoinAcc, live: list[Task], cancelled: set[tuple[str, int]], out: StepOutcome) -> bool:
        if out.end is not None or key not in self.joins:
            return False
        if not self._completed(acc.node_id, acc.fork_run, live) or self._blocked(acc.node_id, acc):
            return False
        await self._fire(key, acc, live, cancelled, out)
        return True

    async def _fire(self, key: tuple[str, int], acc: JoinAcc, live: list[Task], cancelled: set[tuple[str, int]], out: StepOutcome) -> None:
        del self.joins[key]
        self.settling = acc.node_id
        arrivals: list[_Arrival] = []
        await _Router(self.native, self.state, self.deps).edges(acc.node_id, acc.value, acc.downstream, arrivals)
        self._apply(arrivals, live, cancelled, out)
        out.fired.append(acc.node_id)

    def _open_joins(self, live: list[Task]) -> list[JoinAcc]:
        """The joins still open, each with the tasks it waits for (for the checkpoint's reader)."""
        out = []
        for acc in self.joins.values():
            inside = self.native.get_parent_fork(acc.node_id).intermediate_nodes  # type: ignore[arg-type]
            acc.waiting_for = tuple(
                t.task_id for t in live if t.node_id in inside and any(f.run == acc.fork_run for f in t.fork_stack)
            )
            out.append(acc)
        return out


def _may_cancel(join: Join[Any, Any, Any, Any]) -> bool:
    """A reducer that takes a `ReducerContext` (pydantic-graph passes one to 3-parameter reducers)."""
    try:
        return len(inspect.signature(join.reducer).parameters) != 2
    except (TypeError, ValueError):
        return True


def _in_any(stack: ForkStack, items: set[tuple[str, int]]) -> bool:
    return bool(items) and any((f.fork_id, f.run) in items for f in stack)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


# -- routing a result through paths, forks, decisions and joins ---------------------------------


class _Router:
    """Runs one task and follows its result the way pydantic-graph's iterator does.

    New fork runs get local (negative) numbers; settlement renumbers them in frontier order, so
    the numbering does not depend on which task finished first.
    """

    def __init__(self, native: Graph[Any, Any, Any, Any], state: Any, deps: Any):
        self.native = native
        self.state = state
        self.deps = deps
        self._local = 0

    async def run(self, task: Task) -> list[_Arrival]:
        node = self.native.nodes.get(task.node_id)  # type: ignore[call-overload]
        out: list[_Arrival] = []
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

    def _node_result(self, node_id: str, result: Any, stack: ForkStack, out: list[_Arrival]) -> None:
        if isinstance(result, StepNode):
            out.append(_NewTask(result.step.id, result.inputs, stack))
        elif isinstance(result, JoinNode):
            out.append(_JoinItem(result.join.id, result.inputs, stack))
        elif isinstance(result, BaseNode):
            nid = type(result).get_node_id()
            if nid not in self.native.nodes:
                raise GraphDefinitionError(
                    f"station {node_id} returned {nid}, which is not a node of this graph; add it to the graph"
                )
            out.append(_NewTask(nid, result, stack))
        elif isinstance(result, End):
            out.append(_End(result.data))
        else:
            raise GraphDefinitionError(f"station {node_id} returned {result!r}; a node returns another node or End")

    async def edges(self, node_id: str, value: Any, stack: ForkStack, out: list[_Arrival]) -> None:
        node = self.native.nodes[node_id]  # type: ignore[index]
        if isinstance(node, NativeFork):
            await self.fork(node, value, stack, out)
            return
        paths = self.native.edges_by_source.get(node_id, [])  # type: ignore[call-overload]
        if len(paths) != 1:
            raise GraphDefinitionError(f"station {node_id} has {len(paths)} outgoing paths; pydantic-graph needs exactly one")
        await self.path(paths[0], value, stack, out)

    async def path(self, path: Path, value: Any, stack: ForkStack, out: list[_Arrival]) -> None:
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

    async def dest(self, node_id: str, value: Any, stack: ForkStack, out: list[_Arrival]) -> None:
        node = self.native.nodes[node_id]  # type: ignore[index]
        if isinstance(node, Step):
            out.append(_NewTask(node_id, value, stack))
        elif isinstance(node, Join):
            out.append(_JoinItem(node_id, value, stack))
        elif isinstance(node, NativeFork):
            await self.fork(node, value, stack, out)
        elif isinstance(node, Decision):
            for branch in node.branches:
                if guarded(f"the condition of a branch of decision {node_id}", branch_matches, branch, value):
                    await self.path(branch.path, value, stack, out)
                    return
            raise RuntimeError(f"No branch matched inputs {value!r} for decision node {node_id}.")
        elif isinstance(node, EndNode):
            out.append(_End(value))
        else:
            raise GraphDefinitionError(f"cannot route to {node_id} ({type(node).__name__})")

    async def fork(self, node: NativeFork[Any, Any], value: Any, stack: ForkStack, out: list[_Arrival]) -> None:
        self._local -= 1
        run = self._local
        paths = self.native.edges_by_source.get(node.id, [])  # type: ignore[call-overload]
        if not node.is_map:
            for i, p in enumerate(paths):
                await self.path(p, value, (*stack, Fork(node.id, run, i)), out)
            return
        if node.downstream_join_id is not None:
            out.append(_JoinOpen(node.downstream_join_id, (*stack, Fork(node.id, run, 0))))
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
    call: Callable[[], Awaitable[T]], task: Task, hooks: StepHooks, attempt: int, seconds: float | None
) -> T:
    """Await a fresh `call()` for `task`, tried again inside its step while its retry policy allows.

    Seed 003: tries happen inside the same step on the same state and are not checkpointed; a wait
    is never retried; `seconds` bounds each try (the per-node timeout).
    """
    failed = 0
    while True:
        try:
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
