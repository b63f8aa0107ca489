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
import copy
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic_graph import EndMarker, Graph
from pydantic_graph.join import Join, JoinState, ReducerContext
from pydantic_graph.node import EndNode, StartNode

from ..errors import GraphDefinitionError, ReducerError
from ..gates import StationContext, WaitSignal, station_context
from .commit import Settled, StepHooks, StepOutcome, commit
from .routing import Arrival, EndReached, JoinItem, JoinOpen, NewTask, Reduced, Router, tried
from .serial import Stop, wait_signal
from .tasks import Fork, ForkStack, JoinAcc, Task, routing_only

__all__ = (
    "StepHooks",
    "StepOutcome",
    "Settled",
    "boundary_stop",
    "drive_steps",
    "entry_task",
    "split_frontier",
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
        halt = await boundary_stop(steps, max_steps, between, should_pause)
        if halt is not None:
            return halt
        tasks, _ = split_frontier(frontier)
        contexts = hooks.task_contexts(tasks)
        if contexts is None:
            return Stop("waiting", steps)
        attempts = hooks.step_entered(tasks)
        step = _Step(native, state, deps, frontier, attempts, hooks, timeouts or {})
        try:
            await step.execute(contexts)
        except asyncio.CancelledError:  # the task still in flight first: the one the stop names
            hooks.step_aborted(sorted(tasks, key=lambda t: t.task_id in step.results), attempts)
            raise
        if step.escaped is not None:
            _escape(hooks, tasks, attempts, *step.escaped)
        try:
            outcome = await step.settle()
        except Exception as exc:
            hooks.step_failed(tasks, attempts, step.settling or (tasks[0].node_id if tasks else "?"), exc)
            return Stop("failed", steps)
        if not commit(hooks, tasks, attempts, outcome):
            return Stop("failed", steps)
        if any(not routing_only(native, s.task.node_id) for s in outcome.settled):
            steps += 1  # a station did work: the start's routing, or a step where all waited or failed, is not a step
        stop = _stop_after(hooks, outcome, steps)
        if stop is not None:
            return stop
        frontier = outcome.frontier


async def boundary_stop(
    steps: int, max_steps: int | None, between: Callable[[], Awaitable[None]] | None, should_pause: Callable[[], bool]
) -> Stop | None:
    """At a boundary before the next step: stop (paused) at `max_steps` or a pause; a stream's wait first."""
    if max_steps is not None and steps >= max_steps:
        return Stop("paused", steps)
    if steps and between is not None:
        await between()
    if steps and should_pause():
        return Stop("paused", steps)
    return None


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


_Result = tuple[Literal["ok"], list[Arrival], float] | tuple[Literal["parked", "failed"], BaseException, float]


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
        # the step works on copies: a step that fails leaves the head's join values as they were
        self.joins: dict[tuple[str, int], JoinAcc] = {(j.node_id, j.fork_run): replace(j) for j in joins}
        self._early_joins: dict[str, bool] = {}
        """Join id -> whether its reducer takes a `ReducerContext` (looked up once per step)."""
        self._inherited = set(self.joins)
        """Joins whose value came from the head: copied (deeply) before this step first reduces into them."""
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
        self.hooks.task_returned(task, self.attempts.get(task.task_id), self.results[task.task_id][2])
        await self._hand_over(task, arrivals, aio)

    async def _hand_over(self, task: Task, arrivals: list[Arrival], aio: dict[int, asyncio.Task[None]]) -> None:
        """A task's result as pydantic-graph's loop receives it: reduced early where it must be, End cancelling the rest."""
        if any(self._early(a) for a in arrivals):
            try:  # pydantic-graph hands a result to its loop after a checkpoint: siblings ready by then run first
                await asyncio.sleep(0)
            except asyncio.CancelledError:
                if self.end_from is not None or task.task_id in self.cancelled_ids:
                    return  # its result was not handed over before a sibling's reducer cancelled it (dropped)
                raise
        self.finished.append(task.task_id)
        try:
            self._reduce_early(arrivals, aio)
        except Exception as exc:  # a reducer raised: the step fails when it settles
            self.early_error = self.early_error or exc
        if self.end_from is None and any(isinstance(a, EndReached) for a in arrivals):
            self.end_from = task.task_id
            me = asyncio.current_task()
            for t in aio.values():
                if t is not me and not t.done():
                    t.cancel()

    async def _tries(self, task: Task) -> list[Arrival]:
        """Run one task, tried again inside this step while its retry policy allows (seed 003)."""
        return await tried(
            lambda: Router(self.native, self.state, self.deps).run(task),
            task,
            self.hooks,
            self.attempts.get(task.task_id, 0),
            self.timeouts.get(task.node_id),
        )

    def _early(self, arrival: Arrival) -> bool:
        """An item for a join whose reducer takes a `ReducerContext`: reduced as it arrives (see `_reduce_early`)."""
        if not isinstance(arrival, JoinItem) or any(f.run < 0 for f in arrival.fork_stack):
            return False
        early = self._early_joins.get(arrival.join_id)
        if early is None:
            early = self._early_joins[arrival.join_id] = _may_cancel(self._join(arrival.join_id))
        return early

    def _reduce_early(self, arrivals: list[Arrival], aio: dict[int, asyncio.Task[None]]) -> None:
        """Reduce items for joins whose reducer may cancel its siblings as they arrive (completion order).

        A reducer that takes a `ReducerContext` (`ReduceFirstValue`, early stopping) may call
        `cancel_sibling_tasks()`; pydantic-graph then cancels the siblings still in flight, so their
        side effects never happen. Such a reducer may also read the state, so it runs when pydantic-graph
        would run it: after the siblings ready at the same moment have done their work. Plain reducers
        wait for settlement, in frontier order.
        """
        for i, a in enumerate(arrivals):
            if not self._early(a):
                continue
            before = set(self.early_cancelled)
            self._reduce(a.join_id, a.inputs, a.fork_stack, [], self.early_cancelled)
            arrivals[i] = Reduced(a.join_id)
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
                end = next(a for a in res[1] if isinstance(a, EndReached))  # type: ignore[union-attr]
                out.settled.append(Settled(task, attempt, res[2], (EndNode.id,)))
                out.end = EndMarker(end.value)
            elif res is not None and res[0] == "ok":
                out.settled.append(Settled(task, attempt, res[2], ()))
            else:
                out.dropped.append((task, attempt, "cancelled in flight: a sibling reached End"))
        return out

    def _apply(self, arrivals: list[Arrival], live: list[Task], cancelled: set[tuple[str, int]], out: StepOutcome) -> tuple[str, ...]:
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
            if isinstance(a, NewTask):
                live.append(Task(self._next_task, a.node_id, a.inputs, glob(a.fork_stack)))
                self._next_task += 1
                nxt.append(a.node_id)
            elif isinstance(a, JoinOpen):
                fork_run, downstream = self._resolve_join(a.join_id, glob(a.fork_stack))
                if (a.join_id, fork_run) not in self.joins:
                    self.joins[(a.join_id, fork_run)] = JoinAcc(a.join_id, fork_run, self._join(a.join_id).initial_factory(), downstream)
            elif isinstance(a, Reduced):
                nxt.append(a.join_id)
            elif isinstance(a, JoinItem):
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
        elif (join_id, fork_run) in self._inherited:  # a reducer may change its value in place
            self._inherited.discard((join_id, fork_run))
            acc.value = copy.deepcopy(acc.value)
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
        arrivals: list[Arrival] = []
        await Router(self.native, self.state, self.deps).edges(acc.node_id, acc.value, acc.downstream, arrivals)
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
