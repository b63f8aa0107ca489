"""Parallel graphs built with pydantic-graph's own `GraphBuilder`: the corpus for issue 11.

Each builder returns a fresh native graph; `CASES` pairs it with the arguments of one run.
test_parallel.py runs every case natively (`await graph.run(...)`) and in the lab (`run()` and
`step()` to the end) and compares output, final state and the multiset of visited steps.
Module-level definitions, so a worker process (parallel_worker.py) builds the same revision.
Every step records its visit in `state.visits` when it returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic_graph import Graph, GraphBuilder, GraphRunContext, StepContext
from pydantic_graph.id_types import JoinID
from pydantic_graph.join import (
    Join,
    JoinNode,
    ReduceFirstValue,
    ReducerContext,
    reduce_dict_update,
    reduce_list_append,
    reduce_list_extend,
    reduce_null,
    reduce_sum,
)

from lab import Gate, Verdict, interrupt


@dataclass
class Log:
    visits: list[str] = field(default_factory=list)
    total: int = 0
    seen: dict[str, int] = field(default_factory=dict)


@dataclass
class Scale:
    factor: int = 10


Ctx = StepContext[Log, None, int]


def _visit(ctx: StepContext[Log, Any, Any], name: str) -> None:
    ctx.state.visits.append(name)


# -- broadcasts -----------------------------------------------------------------------------------


def implicit_broadcast() -> Graph[Any, Any, Any, Any]:
    """One source, several edges: pydantic-graph inserts a broadcast fork."""
    g = GraphBuilder(state_type=Log, input_type=int, output_type=list[int])

    @g.step
    async def source(ctx: Ctx) -> int:
        _visit(ctx, "source")
        return ctx.inputs + 1

    @g.step
    async def double(ctx: Ctx) -> int:
        _visit(ctx, "double")
        return ctx.inputs * 2

    @g.step
    async def triple(ctx: Ctx) -> int:
        _visit(ctx, "triple")
        return ctx.inputs * 3

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(source),
        g.edge_from(source).to(double),
        g.edge_from(source).to(triple),
        g.edge_from(double, triple).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g.build()


def broadcast() -> Graph[Any, Any, Any, Any]:
    """`.broadcast(...)` with a label and a transform on its branches."""
    g = GraphBuilder(state_type=Log, input_type=int, output_type=dict[str, int])

    @g.step
    async def left(ctx: Ctx) -> dict[str, int]:
        _visit(ctx, "left")
        return {"left": ctx.inputs}

    @g.step
    async def right(ctx: Ctx) -> dict[str, int]:
        _visit(ctx, "right")
        return {"right": ctx.inputs}

    merge = g.join(reduce_dict_update, initial_factory=dict[str, int], node_id="merge")
    g.add(
        g.edge_from(g.start_node).broadcast(
            lambda b: [b.label("as is").to(left), b.transform(lambda ctx: ctx.inputs * 100).to(right)]
        ),
        g.edge_from(left, right).to(merge),
        g.edge_from(merge).to(g.end_node),
    )
    return g.build()


# -- maps -------------------------------------------------------------------------------------------


def squares() -> Graph[Any, Any, Any, Any]:
    """The issue's example: map a list over a step, append the results."""
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=list[int])

    @g.step
    async def square(ctx: Ctx) -> int:
        _visit(ctx, "square")
        return ctx.inputs**2

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(square), g.edge_from(square).to(collect), g.edge_from(collect).to(g.end_node))
    return g.build()


def empty_map() -> Graph[Any, Any, Any, Any]:
    """Mapping an empty list: with `downstream_join_id` the join still fires with its initial value."""
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=int)

    @g.step
    async def item(ctx: Ctx) -> int:
        _visit(ctx, "item")
        return ctx.inputs

    total = g.join(reduce_sum, initial=7, node_id="total")
    g.add(
        g.edge_from(g.start_node).map(downstream_join_id="total").to(item),
        g.edge_from(item).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return g.build()


def map_of_maps() -> Graph[Any, Any, Any, Any]:
    """A map inside a map; the inner join sums each row, the outer join collects the sums."""
    g = GraphBuilder(state_type=Log, input_type=list[list[int]], output_type=list[int])

    @g.step
    async def row(ctx: StepContext[Log, None, list[int]]) -> list[int]:
        _visit(ctx, "row")
        return ctx.inputs

    @g.step
    async def cell(ctx: Ctx) -> int:
        _visit(ctx, "cell")
        await asyncio.sleep(0)
        return ctx.inputs * 10

    row_sum = g.join(reduce_sum, initial=0, node_id="row_sum")
    rows = g.join(reduce_list_append, initial_factory=list[int], node_id="rows")
    g.add(
        g.edge_from(g.start_node).map().to(row),
        g.edge_from(row).map().to(cell),
        g.edge_from(cell).to(row_sum),
        g.edge_from(row_sum).to(rows),
        g.edge_from(rows).to(g.end_node),
    )
    return g.build()


async def _count_to(n: int) -> AsyncIterator[int]:
    for i in range(n):
        await asyncio.sleep(0)
        yield i


def async_map() -> Graph[Any, Any, Any, Any]:
    """A map over an async generator a step returns."""
    g = GraphBuilder(state_type=Log, input_type=int, output_type=int)

    @g.step
    async def numbers(ctx: Ctx) -> AsyncIterator[int]:
        _visit(ctx, "numbers")
        return _count_to(ctx.inputs)

    @g.step
    async def plus_one(ctx: Ctx) -> int:
        _visit(ctx, "plus_one")
        return ctx.inputs + 1

    total = g.join(reduce_sum, initial=0, node_id="total")
    g.add(
        g.edge_from(g.start_node).to(numbers),
        g.edge_from(numbers).map().to(plus_one),
        g.edge_from(plus_one).to(total),
        g.edge_from(total).to(g.end_node),
    )
    return g.build()


# -- joins ------------------------------------------------------------------------------------------


def _mapped(reducer: Any, output_type: Any, step_out: Callable[[int], Any], **join_kwargs: Any) -> Graph[Any, Any, Any, Any]:
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=output_type)

    @g.step
    async def each(ctx: Ctx) -> Any:
        _visit(ctx, "each")
        return step_out(ctx.inputs)

    j = g.join(reducer, node_id="j", **join_kwargs)
    g.add(g.edge_from(g.start_node).map().to(each), g.edge_from(each).to(j), g.edge_from(j).to(g.end_node))
    return g.build()


def join_append() -> Graph[Any, Any, Any, Any]:
    return _mapped(reduce_list_append, list[int], lambda x: x + 1, initial_factory=list[int])


def join_extend() -> Graph[Any, Any, Any, Any]:
    return _mapped(reduce_list_extend, list[int], lambda x: [x, -x], initial_factory=list[int])


def join_dict() -> Graph[Any, Any, Any, Any]:
    return _mapped(reduce_dict_update, dict[str, int], lambda x: {f"k{x}": x * x}, initial_factory=dict[str, int])


def join_sum() -> Graph[Any, Any, Any, Any]:
    return _mapped(reduce_sum, int, lambda x: x * 3, initial=0)


def join_null() -> Graph[Any, Any, Any, Any]:
    return _mapped(reduce_null, type(None), lambda x: x, initial=None)


def _weighted(ctx: ReducerContext[Log, None], current: int, inputs: int) -> int:
    """A custom reducer that reads and writes the state through its context."""
    ctx.state.total += inputs
    ctx.state.seen[str(inputs)] = len(ctx.state.seen)
    return current * 2 + inputs


def join_custom() -> Graph[Any, Any, Any, Any]:
    return _mapped(_weighted, int, lambda x: x, initial=1)


def join_first() -> Graph[Any, Any, Any, Any]:
    """`ReduceFirstValue` takes the first branch to arrive and cancels its siblings in flight."""
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=int)

    @g.step
    async def slow_or_fast(ctx: Ctx) -> int:
        await asyncio.sleep(0.05 * ctx.inputs)
        _visit(ctx, "slow_or_fast")
        return ctx.inputs

    @g.step
    async def after(ctx: Ctx) -> int:
        await asyncio.sleep(0.1 * ctx.inputs)  # the later ones are cancelled mid-sleep
        _visit(ctx, "after")
        return ctx.inputs

    first = g.join(ReduceFirstValue[int](), initial=-1, node_id="first")
    g.add(
        g.edge_from(g.start_node).map().to(slow_or_fast),
        g.edge_from(slow_or_fast).to(after),
        g.edge_from(after).to(first),
        g.edge_from(first).to(g.end_node),
    )
    return g.build()


def join_without_fork() -> Graph[Any, Any, Any, Any]:
    """A join fed by a plain chain: its parent fork is the start; it fires when nothing is left."""
    g = GraphBuilder(state_type=Log, input_type=int, output_type=list[int])

    @g.step
    async def first(ctx: Ctx) -> int:
        _visit(ctx, "first")
        return ctx.inputs + 1

    @g.step
    async def second(ctx: Ctx) -> int:
        _visit(ctx, "second")
        return ctx.inputs * 2

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(first),
        g.edge_from(first).to(second),
        g.edge_from(second).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g.build()


# -- nesting, decisions, End from a branch, state, deps ----------------------------------------------


def nested_forks() -> Graph[Any, Any, Any, Any]:
    """A broadcast inside a map: fork stacks two deep, a join at each level."""
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=list[list[int]])

    @g.step
    async def fan(ctx: Ctx) -> int:
        _visit(ctx, "fan")
        return ctx.inputs

    @g.step
    async def plus(ctx: Ctx) -> int:
        _visit(ctx, "plus")
        return ctx.inputs + 1

    @g.step
    async def minus(ctx: Ctx) -> int:
        _visit(ctx, "minus")
        await asyncio.sleep(0.001)
        return ctx.inputs - 1

    @g.step
    async def pair(ctx: StepContext[Log, None, list[int]]) -> list[int]:
        _visit(ctx, "pair")
        return sorted(ctx.inputs)

    inner = g.join(reduce_list_append, initial_factory=list[int], node_id="inner")
    outer = g.join(reduce_list_append, initial_factory=list[list[int]], node_id="outer")
    g.add(
        g.edge_from(g.start_node).map().to(fan),
        g.edge_from(fan).to(plus, minus),
        g.edge_from(plus, minus).to(inner),
        g.edge_from(inner).to(pair),
        g.edge_from(pair).to(outer),
        g.edge_from(outer).to(g.end_node),
    )
    return g.build()


def decisions_in_branches() -> Graph[Any, Any, Any, Any]:
    """Each mapped item goes through a decision: evens, odds and a literal each take their path."""
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=list[str])

    @g.step
    async def classify(ctx: Ctx) -> int:
        _visit(ctx, "classify")
        return ctx.inputs

    @g.step
    async def even(ctx: Ctx) -> str:
        _visit(ctx, "even")
        return f"{ctx.inputs} even"

    @g.step
    async def odd(ctx: Ctx) -> str:
        _visit(ctx, "odd")
        return f"{ctx.inputs} odd"

    @g.step
    async def zero(ctx: StepContext[Log, None, Literal[0]]) -> str:
        _visit(ctx, "zero")
        return "zero"

    collect = g.join(reduce_list_append, initial_factory=list[str], node_id="collect")
    g.add(
        g.edge_from(g.start_node).map().to(classify),
        g.edge_from(classify).to(
            g.decision()
            .branch(g.match(Literal[0]).to(zero))
            .branch(g.match(int, matches=lambda x: x % 2 == 0).label("even").to(even))
            .branch(g.match(int).transform(lambda ctx: ctx.inputs * 10).to(odd))
        ),
        g.edge_from(even, odd, zero).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g.build()


def end_from_branch() -> Graph[Any, Any, Any, Any]:
    """One branch reaches End while its sibling is still running: the sibling is cancelled."""
    g = GraphBuilder(state_type=Log, input_type=int, output_type=str)

    @g.step
    async def quick(ctx: Ctx) -> str:
        _visit(ctx, "quick")
        return f"quick {ctx.inputs}"

    @g.step
    async def slow(ctx: Ctx) -> str:
        await asyncio.sleep(0.5)
        _visit(ctx, "slow")
        return "slow"

    g.add(
        g.edge_from(g.start_node).to(quick, slow),
        g.edge_from(quick).to(g.end_node),
        g.edge_from(slow).to(g.end_node),
    )
    return g.build()


def shared_state() -> Graph[Any, Any, Any, Any]:
    """Parallel branches mutate the same state object; a later step reads what they left."""
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=int)

    @g.step
    async def add(ctx: Ctx) -> int:
        ctx.state.total += ctx.inputs
        await asyncio.sleep(0)
        ctx.state.seen[f"n{ctx.inputs}"] = ctx.state.total
        _visit(ctx, "add")
        return ctx.inputs

    @g.step
    async def report(ctx: StepContext[Log, None, None]) -> int:
        _visit(ctx, "report")
        return ctx.state.total

    done = g.join(reduce_null, initial=None, node_id="done")
    g.add(
        g.edge_from(g.start_node).map().to(add),
        g.edge_from(add).to(done),
        g.edge_from(done).to(report),
        g.edge_from(report).to(g.end_node),
    )
    return g.build()


def with_deps() -> Graph[Any, Any, Any, Any]:
    """Steps in parallel branches read the run's deps."""
    g = GraphBuilder(state_type=Log, deps_type=Scale, input_type=list[int], output_type=int)

    @g.step
    async def scaled(ctx: StepContext[Log, Scale, int]) -> int:
        _visit(ctx, "scaled")
        return ctx.inputs * ctx.deps.factor

    total = g.join(reduce_sum, initial=0, node_id="total")
    g.add(g.edge_from(g.start_node).map().to(scaled), g.edge_from(scaled).to(total), g.edge_from(total).to(g.end_node))
    return g.build()


def object_input() -> Graph[Any, Any, Any, Any]:
    """A step typed `object`, fed by a decision whose input is an `int`: the lab narrows it."""
    g = GraphBuilder(state_type=Log, input_type=int, output_type=list[Any])

    @g.step
    async def number(ctx: Ctx) -> int:
        _visit(ctx, "number")
        return ctx.inputs

    @g.step
    async def anything(ctx: StepContext[Log, None, object]) -> int:
        _visit(ctx, "anything")
        return ctx.inputs  # type: ignore[return-value]

    @g.step
    async def also(ctx: Ctx) -> int:
        _visit(ctx, "also")
        return -ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list[Any], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(number),
        g.edge_from(number).to(g.decision().branch(g.match(object).to(anything))),
        g.edge_from(g.start_node).to(also),
        g.edge_from(anything, also).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g.build()


def fan_out(width: int = 8) -> Graph[Any, Any, Any, Any]:
    """A step with `width` branches in flight, each slow enough to be killed mid-step.

    Even squares reach the join at once, odd ones one step later: the join is open in between.
    """
    g = GraphBuilder(state_type=Log, input_type=int, output_type=list[int])

    @g.step
    async def spread(ctx: Ctx) -> list[int]:
        _visit(ctx, "spread")
        return list(range(ctx.inputs))

    @g.step
    async def work(ctx: Ctx) -> int:
        await asyncio.sleep(0.02 + 0.01 * (ctx.inputs % 3))
        _visit(ctx, "work")
        return ctx.inputs * ctx.inputs

    @g.step
    async def again(ctx: Ctx) -> int:
        await asyncio.sleep(0.01)
        _visit(ctx, "again")
        return ctx.inputs + 1

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(spread),
        g.edge_from(spread).map().to(work),
        g.edge_from(work).to(
            g.decision()
            .branch(g.match(int, matches=lambda x: x % 2 == 0).to(collect))
            .branch(g.match(int).to(again))
        ),
        g.edge_from(again).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return g.build()


@dataclass(frozen=True)
class Case:
    build: Callable[[], Graph[Any, Any, Any, Any]]
    inputs: Any
    deps: Callable[[], Any] = lambda: None
    ordered: bool = True
    """False where native's output order depends on timing: outputs are compared sorted."""


CASES: dict[str, Case] = {
    "implicit-broadcast": Case(implicit_broadcast, 4),
    "broadcast": Case(broadcast, 3),
    "map": Case(squares, [1, 2, 3, 4]),
    "map-empty": Case(empty_map, []),
    "map-of-maps": Case(map_of_maps, [[1, 2], [], [3, 4, 5]]),
    "map-async-iterable": Case(async_map, 5),
    "join-append": Case(join_append, [3, 1, 2]),
    "join-extend": Case(join_extend, [1, 2, 3]),
    "join-dict": Case(join_dict, [1, 2, 3]),
    "join-sum": Case(join_sum, [1, 2, 3, 4]),
    "join-null": Case(join_null, [1, 2]),
    "join-custom": Case(join_custom, [1, 2, 3]),
    "join-first-value": Case(join_first, [1, 2, 3]),
    "join-without-fork": Case(join_without_fork, 5),
    "nested-forks": Case(nested_forks, [1, 5, 9]),
    "decisions-in-branches": Case(decisions_in_branches, [0, 1, 2, 3, 4]),
    "end-from-branch": Case(end_from_branch, 9),
    "shared-state": Case(shared_state, [1, 2, 3, 4]),
    "deps": Case(with_deps, [1, 2, 3], deps=lambda: Scale(7)),
    "object-input": Case(object_input, 6),
    "fan-out-8": Case(fan_out, 8, ordered=False),
}


# -- for the kill tests ---------------------------------------------------------------------------

STEP_SLEEP = 0.0
"""How long `laps`' work step sleeps (the kill worker sets it from GRAPHLAB_STEP_SLEEP)."""

LAPS = 10


@dataclass
class Lap:
    item: int
    lap: int = 0


def laps(width: int = 8) -> Graph[Any, Any, Any, Any]:
    """`width` branches in flight for `LAPS` super-steps, each lap a step; the join collects squares."""
    g = GraphBuilder(state_type=Log, input_type=int, output_type=list[int])

    @g.step
    async def spread(ctx: Ctx) -> list[Lap]:
        _visit(ctx, "spread")
        return [Lap(i) for i in range(ctx.inputs)]

    @g.step
    async def work(ctx: StepContext[Log, None, Lap]) -> Lap:
        await asyncio.sleep(STEP_SLEEP)
        _visit(ctx, "work")
        ctx.state.total += 1
        return Lap(ctx.inputs.item, ctx.inputs.lap + 1)

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(spread),
        g.edge_from(spread).map().to(work),
        g.edge_from(work).to(
            g.decision()
            .branch(g.match(Lap, matches=lambda lap: lap.lap < LAPS).label("again").to(work))
            .branch(g.match(Lap).transform(lambda ctx: ctx.inputs.item**2).to(collect))
        ),
        g.edge_from(collect).to(g.end_node),
    )
    return g.build()


# -- gates and interrupts in branches -------------------------------------------------------------


def asking(width: int = 3) -> Graph[Any, Any, Any, Any]:
    """Each odd item asks a person (`interrupt()`); even ones go straight on. Lab-only (it waits)."""
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=list[str])

    @g.step
    async def ask(ctx: Ctx) -> str:
        # ask first: the branches share one state, and what a branch changed before it parks is kept
        answer = interrupt({"item": ctx.inputs}) if ctx.inputs % 2 else "auto"
        _visit(ctx, "ask")
        return f"{ctx.inputs}:{answer}"

    collect = g.join(reduce_list_append, initial_factory=list[str], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(ask), g.edge_from(ask).to(collect), g.edge_from(collect).to(g.end_node))
    return g.build()


APPROVED = Join(id=JoinID("approved"), reducer=reduce_list_append, initial_factory=list[int])


@dataclass
class Approve(Gate[Log]):
    """A consent gate inside a mapped branch; its verdict decides what reaches the join."""

    item: int
    prompt = "Keep this item?"

    async def decide(self, ctx: GraphRunContext[Log, None], verdict: Verdict) -> Annotated[JoinNode[Log, None], APPROVED]:
        ctx.state.visits.append("Approve")
        return APPROVED.as_node(self.item if verdict.approved else -self.item)


def gated() -> Graph[Any, Any, Any, Any]:
    """Item 2 of a map needs a person's approval; its siblings settle while it waits."""
    g = GraphBuilder(state_type=Log, input_type=list[int], output_type=list[int])

    @g.step
    async def check(ctx: Ctx) -> Approve | int:
        _visit(ctx, "check")
        return Approve(ctx.inputs) if ctx.inputs == 2 else ctx.inputs

    g.add(
        g.node(Approve),
        g.edge_from(g.start_node).map().to(check),
        g.edge_from(check).to(g.decision().branch(g.match(Approve).to(Approve)).branch(g.match(int).to(APPROVED))),
        g.edge_from(APPROVED).to(g.end_node),
    )
    return g.build()
