"""The super-step model for declared graphs (issue 13 requirement 7, seeds 002/003).

`lab.graph(..., model="superstep", reducers=..., isolate_state=..., max_node_concurrency=...)`:
nodes return partial updates, folded through field reducers in the fixed node order; a step is
atomic. Each test's docstring quotes the seed sentence it holds the lab to.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import StepContext

from lab import ArgumentError, Lab, ReducerError, Retry, interrupt
from lab.reducers import add, append, last, union


@dataclass
class Notes:
    log: list[str] = field(default_factory=list)
    total: int = 0
    tags: set[str] = field(default_factory=set)
    note: str = ""


@dataclass
class Calls:
    """Counts what ran (shared by every node of a run: deps are not copied)."""

    counts: dict[str, int] = field(default_factory=dict)
    fail: set[str] = field(default_factory=set)
    cancelled: list[str] = field(default_factory=list)
    seen: dict[str, list[str]] = field(default_factory=dict)
    running: int = 0
    most: int = 0

    def enter(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1


REDUCERS = {"log": append, "total": add, "tags": union, "note": last}


def fan(lab: Lab, name: str = "fan", **opts: Any):
    """start -> a -> (b | c) -> d -> end; b is slower than c, so c finishes first."""
    g = lab.graph(name, state_type=Notes, deps_type=Calls, model="superstep", reducers=REDUCERS, **opts)

    @g.step
    async def a(ctx: StepContext[Notes, Calls, None]) -> dict[str, Any]:
        ctx.deps.enter("a")
        return {"log": ["a"], "note": "a"}

    @g.step
    async def b(ctx: StepContext[Notes, Calls, None]) -> dict[str, Any]:
        ctx.deps.enter("b")
        await asyncio.sleep(0.05)
        if "b" in ctx.deps.fail:
            raise ValueError("b broke")
        return {"log": ["b"], "total": 1, "tags": {"b"}, "note": "b"}

    @g.step
    async def c(ctx: StepContext[Notes, Calls, None]) -> dict[str, Any]:
        ctx.deps.enter("c")
        try:
            await asyncio.sleep(0 if "b" not in ctx.deps.fail else 10)
        except asyncio.CancelledError:
            ctx.deps.cancelled.append("c")
            raise
        return {"log": ["c"], "total": 2, "tags": {"c"}, "note": "c"}

    @g.step
    async def d(ctx: StepContext[Notes, Calls, None]) -> dict[str, Any]:
        ctx.deps.enter("d")
        return {"log": ["d"], "total": 10}

    g.add(
        g.edge_from(g.start_node).to(a),
        g.edge_from(a).to(b, c),
        g.edge_from(b).to(d),
        g.edge_from(c).to(d),
        g.edge_from(d).to(g.end_node),
    )
    return g


def test_updates_fold_through_field_reducers_in_the_fixed_node_order(lab: Lab) -> None:
    """Seed 002: "Updates within a step are folded in a deterministic node order, so non-commutative
    reducers (append, last) are well-defined — two nodes appending to the same channel always produce
    the same order. Commutative reducers (add, union) are order-independent regardless." """
    g = fan(lab)
    calls = Calls()
    run = g.start(inputs=None, state=Notes(), deps=calls)
    run.run()
    assert run.status == "done", run.error
    # c finished before b, yet b's update folds first: b was declared first
    assert run.state.log == ["a", "b", "c", "d"]
    assert run.state.note == "c" and run.state.total == 13 and run.state.tags == {"b", "c"}
    # one checkpoint per super-step: the start, a, {b, c}, d
    assert len(run.history()) == 5
    assert lab.resume(run.id).state == run.state  # what was stored reads back


def test_a_node_reached_by_several_branches_in_one_step_runs_once_and_the_run_ends_with_an_empty_frontier(lab: Lab) -> None:
    """Seed 002: "Resolve the outgoing edges of the nodes that ran to compute the next frontier ... The
    run ends when the frontier is empty (everything routed to END)." """
    g = fan(lab)
    calls = Calls()
    run = g.start(inputs=None, state=Notes(), deps=calls)
    steps = []
    while run.status not in ("done", "failed"):
        result = run.step()
        steps.append(result.tasks or (result.node_id,))
    assert calls.counts == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert [set(s) for s in steps] == [{"a"}, {"b", "c"}, {"d"}]  # the start routes, it is not a step (issue 24 item 10)
    assert run.next_stations == () and run.status == "done"


def test_a_step_is_atomic_a_failure_discards_it_cancels_siblings_and_resume_reruns_it(db_path: str) -> None:
    """Seed 002: "A super-step is atomic over state. If any node in it raises, the whole step's updates
    are discarded and no checkpoint is written for that step — the last good checkpoint remains the
    previous step." Seed 003: "If a node fails, the other nodes of that step are cancelled." """
    lab = Lab(db_path)
    g = fan(lab)
    calls = Calls(fail={"b"})
    run = g.start(inputs=None, state=Notes(), deps=calls)
    run.run()
    assert run.status == "failed" and run.error["node_id"] == "b"
    assert calls.cancelled == ["c"]  # c was still running: cancelled, its update never applied
    head = run.head
    assert len(run.history()) == 3  # start, a: the failed step wrote nothing
    assert run.state == Notes(log=["a"], note="a")
    assert set(run.next_stations) == {"b", "c"}  # the whole step is still pending
    run_id = run.id
    lab.close()

    lab2 = Lab(db_path)  # resume after a restart re-runs the whole step
    fan(lab2)
    again_calls = Calls()
    again = lab2.resume(run_id, deps=again_calls)
    assert again.head == head
    again.retry()
    again.run()
    assert again.status == "done", again.error
    assert again_calls.counts == {"b": 1, "c": 1, "d": 1}
    assert again.state.log == ["a", "b", "c", "d"] and again.state.total == 13
    lab2.close()


def isolation_graph(lab: Lab, isolate: str):
    g = lab.graph(f"iso_{isolate}", state_type=Notes, deps_type=Calls, model="superstep", reducers=REDUCERS, isolate_state=isolate)

    @g.step
    async def writer(ctx: StepContext[Notes, Calls, None]) -> None:
        ctx.state.log.append("mutated in place")  # what seed 002 says not to do
        await asyncio.sleep(0.05)

    @g.step
    async def reader(ctx: StepContext[Notes, Calls, None]) -> dict[str, Any]:
        await asyncio.sleep(0.01)  # the writer has mutated by now
        ctx.deps.seen["reader"] = list(ctx.state.log)
        return {"note": "read"}

    g.add(g.edge_from(g.start_node).to(writer, reader), g.edge_from(writer).to(g.end_node), g.edge_from(reader).to(g.end_node))
    return g


@pytest.mark.parametrize("isolate", ["fanout", "always"])
def test_under_fanout_and_always_a_sibling_never_observes_an_in_place_mutation(lab: Lab, isolate: str) -> None:
    """Seed 002: ""fanout" (default) — deep-copies a node's input only when more than one node runs in
    the step, so a sibling can't observe an in-place mutation. "always" — copy on every node." """
    calls = Calls()
    run = isolation_graph(lab, isolate).start(inputs=None, state=Notes(), deps=calls)
    run.run()
    assert run.status == "done", run.error
    assert calls.seen["reader"] == []
    assert run.state.log == [] and run.state.note == "read"  # the in-place mutation was on a copy


@pytest.mark.parametrize("isolate", ["always", "fanout"])
def test_under_always_a_lone_node_gets_a_copy(lab: Lab, isolate: str) -> None:
    """Seed 002: ""always" — copy on every node. Safest, slowest." A step with one node in it gets a
    copy of the state under "always" (its in-place mutation reaches neither the run's state nor the
    next step); under "fanout" a lone node is not copied, so the same mutation shows."""
    g = lab.graph(f"lone_{isolate}", state_type=Notes, deps_type=Calls, model="superstep", reducers=REDUCERS, isolate_state=isolate)

    @g.step
    async def solo(ctx: StepContext[Notes, Calls, None]) -> dict[str, Any]:
        ctx.state.log.append("mutated in place")  # what seed 002 says not to do
        return {"total": 1}

    @g.step
    async def after(ctx: StepContext[Notes, Calls, None]) -> dict[str, Any]:
        ctx.deps.seen["after"] = list(ctx.state.log)
        return {"note": "after"}

    g.add(g.edge_from(g.start_node).to(solo), g.edge_from(solo).to(after), g.edge_from(after).to(g.end_node))
    calls = Calls()
    run = g.start(inputs=None, state=Notes(), deps=calls).run()
    assert run.status == "done", run.error
    assert run.state.total == 1 and run.state.note == "after"  # the returned updates are folded either way
    if isolate == "always":
        assert run.state.log == [] and calls.seen["after"] == []  # the mutation was on solo's copy
    else:
        assert run.state.log == ["mutated in place"] and calls.seen["after"] == ["mutated in place"]


def test_under_never_the_nodes_share_one_object(lab: Lab) -> None:
    """Seed 002: ""never" — never copy. Fastest; you promise nodes don't mutate shared input in place." """
    calls = Calls()
    run = isolation_graph(lab, "never").start(inputs=None, state=Notes(), deps=calls)
    run.run()
    assert calls.seen["reader"] == ["mutated in place"]


def test_max_node_concurrency_bounds_how_many_nodes_run_at_once(lab: Lab) -> None:
    """Seed 002: "compile(max_node_concurrency=...) bounds how many nodes run at once within a step." """
    g = lab.graph("wide", state_type=Notes, deps_type=Calls, model="superstep", reducers=REDUCERS, max_node_concurrency=2)
    names = ["w1", "w2", "w3", "w4", "w5"]
    for name in names:

        async def work(ctx: StepContext[Notes, Calls, None], name: str = name) -> dict[str, Any]:
            ctx.deps.running += 1
            ctx.deps.most = max(ctx.deps.most, ctx.deps.running)
            await asyncio.sleep(0.01)
            ctx.deps.running -= 1
            return {"log": [name], "total": 1}

        g.step(work, node_id=name)
    g.add(g.edge_from(g.start_node).to(*[g.steps[n] for n in names]))
    for name in names:
        g.add_edge(g.steps[name], g.end_node)
    calls = Calls()
    run = g.start(inputs=None, state=Notes(), deps=calls)
    run.run()
    assert run.status == "done", run.error
    assert calls.most == 2 and run.state.total == 5
    assert run.state.log == names  # still folded in node order


def test_whole_state_returns_merge_through_the_graphs_reducer_before_partial_updates(lab: Lab) -> None:
    """Seed 003: "the Reducer merges the nodes that returned a whole state, and the updates of the
    nodes that were added with a work and an update are then applied one after another, in the order
    those nodes were added to the graph." """

    def merge(x: Notes, y: Notes) -> Notes:
        return Notes(log=x.log + y.log, total=x.total + y.total, tags=x.tags | y.tags, note=y.note)

    g = lab.graph("whole", state_type=Notes, model="superstep", reducers={**REDUCERS, "*": merge})

    @g.step
    async def partial(ctx: StepContext[Notes, None, None]) -> dict[str, Any]:
        return {"log": ["partial"], "total": 100}

    @g.step
    async def whole1(ctx: StepContext[Notes, None, None]) -> Notes:
        return Notes(log=["w1"], total=1, note="w1")

    @g.step
    async def whole2(ctx: StepContext[Notes, None, None]) -> Notes:
        return Notes(log=["w2"], total=2, note="w2")

    g.add(g.edge_from(g.start_node).to(partial, whole1, whole2))
    for s in (partial, whole1, whole2):
        g.add_edge(s, g.end_node)
    run = g.start(inputs=None, state=Notes())
    run.run()
    assert run.status == "done", run.error
    # partial was declared first, yet the whole states merge first and its update folds on top
    assert run.state.log == ["w1", "w2", "partial"] and run.state.total == 103 and run.state.note == "w2"


def test_a_decision_reads_the_folded_state_and_loops_until_it_routes_to_end(lab: Lab) -> None:
    """Seed 003: "The outgoing edges of the nodes then decide which nodes are active in the next step.
    A branch that routes to END simply stops; the run completes when no nodes are active." """
    g = lab.graph("loop", state_type=Notes, model="superstep", reducers=REDUCERS)

    @g.step
    async def tick(ctx: StepContext[Notes, None, None]) -> dict[str, Any]:
        return {"total": 1, "log": [f"tick{ctx.state.total}"]}

    g.add(
        g.edge_from(g.start_node).to(tick),
        g.edge_from(tick).to(
            g.decision()
            .branch(g.match(Notes, matches=lambda s: s.total < 3).to(tick))
            .branch(g.match(Notes).transform(lambda ctx: ctx.inputs.total).to(g.end_node))
        ),
    )
    run = g.start(inputs=None, state=Notes())
    run.run()
    assert run.status == "done", run.error
    assert run.state.log == ["tick0", "tick1", "tick2"] and run.output == 3


def test_a_raising_reducer_is_a_reducer_error_naming_the_field_and_nothing_is_checkpointed(lab: Lab) -> None:
    """Seed 003: "A failure of the reducer or of the condition of an edge is rethrown as ReducerException
    or EdgeConditionException." """

    def strict(current: int, update: int) -> int:
        if update < 0:
            raise ValueError("negative")
        return current + update

    g = lab.graph("strict", state_type=Notes, model="superstep", reducers={"total": strict})

    @g.step
    async def minus(ctx: StepContext[Notes, None, None]) -> dict[str, Any]:
        return {"total": -1}

    g.add(g.edge_from(g.start_node).to(minus), g.edge_from(minus).to(g.end_node))
    run = g.start(inputs=None, state=Notes())
    with pytest.raises(ReducerError, match=r"reducer .*strict of field 'total' raised ValueError: negative") as info:
        run.run(raise_on_failure=True)
    assert isinstance(info.value.__cause__, ValueError) or isinstance(info.value.original, (ValueError, ReducerError))
    assert run.status == "failed" and len(run.history()) == 2 and run.state.total == 0


def test_a_retry_policy_tries_a_node_again_inside_its_step(lab: Lab) -> None:
    """Seed 003: "A node that was added with a Retry is first tried again, inside the same step and on the same state." """
    g = lab.graph("flaky_model", state_type=Notes, deps_type=Calls, model="superstep", reducers=REDUCERS)

    @g.step(retry=Retry(max_attempts=2))
    async def once_bad(ctx: StepContext[Notes, Calls, None]) -> dict[str, Any]:
        ctx.deps.enter("once_bad")
        if ctx.deps.counts["once_bad"] == 1:
            raise ValueError("first try")
        return {"total": 1}

    g.add(g.edge_from(g.start_node).to(once_bad), g.edge_from(once_bad).to(g.end_node))
    run = g.start(inputs=None, state=Notes(), deps=Calls())
    run.run()
    assert run.status == "done" and run.state.total == 1 and len(run.events("retry")) == 1


def test_bad_declarations_get_clear_errors(lab: Lab) -> None:
    with pytest.raises(ArgumentError, match="model='quantum'"):
        lab.graph("bad", state_type=Notes, model="quantum")
    with pytest.raises(ArgumentError, match="does not have; its fields are"):
        lab.graph("bad", state_type=Notes, model="superstep", reducers={"nope": add})
    with pytest.raises(ArgumentError, match=r"reducers\['log'\] = 'prepend' is not a reducer"):
        lab.graph("bad", state_type=Notes, model="superstep", reducers={"log": "prepend"})
    with pytest.raises(ArgumentError, match="is not callable"):
        lab.graph("bad", state_type=Notes, model="superstep", reducers={"log": 3})
    with pytest.raises(ArgumentError, match="isolate_state='sometimes'"):
        lab.graph("bad", state_type=Notes, model="superstep", isolate_state="sometimes")
    with pytest.raises(ArgumentError, match="max_node_concurrency=0"):
        lab.graph("bad", state_type=Notes, model="superstep", max_node_concurrency=0)
    with pytest.raises(ArgumentError, match="add model='superstep'"):
        lab.graph("bad", state_type=Notes, reducers={"log": append})
    g = lab.graph("bad", state_type=Notes, model="superstep", reducers={"log": "append"})
    assert g.reducers == {"log": append}

    @g.step
    async def wrong(ctx: StepContext[Notes, None, None]) -> Any:
        return {"missing": 1}

    g.add(g.edge_from(g.start_node).to(wrong), g.edge_from(wrong).to(g.end_node))
    run = g.start(inputs=None, state=Notes())
    run.run()
    assert run.status == "failed" and "'missing', which is not a field of Notes" in run.error["message"]


def test_the_named_reducers() -> None:
    assert append([1], [2, 3]) == [1, 2, 3] and append([1], 2) == [1, 2] and append(None, "x") == ["x"]
    assert last(1, 2) == 2 and add(1, 2) == 3 and add([1], [2]) == [1, 2]
    assert union({1}, [2]) == {1, 2} and union(frozenset({1}), 3) == frozenset({1, 3})


def test_an_interrupt_parks_a_step_of_its_own_and_a_wait_among_siblings_is_refused(lab: Lab) -> None:
    """A node that waits (a gate, `interrupt()`) parks its step; the answer re-runs it (issue 13:
    "an interrupt or gate ... parks"). Among siblings the model refuses it, naming the station."""
    g = lab.graph("asks", state_type=Notes, model="superstep", reducers=REDUCERS)

    @g.step
    async def ask(ctx: StepContext[Notes, None, None]) -> dict[str, Any]:
        return {"note": f"answer {interrupt('ok?')}", "log": ["ask"]}

    g.add(g.edge_from(g.start_node).to(ask), g.edge_from(ask).to(g.end_node))
    run = g.start(inputs=None, state=Notes())
    run.run()
    assert run.status == "waiting" and run.state == Notes()
    run.resume_with("yes")
    run.run()
    assert run.status == "done" and run.state.note == "answer yes" and run.state.log == ["ask"]

    h = lab.graph("asks2", state_type=Notes, model="superstep", reducers=REDUCERS)

    @h.step
    async def other(ctx: StepContext[Notes, None, None]) -> dict[str, Any]:
        return {"log": ["other"]}

    @h.step
    async def ask2(ctx: StepContext[Notes, None, None]) -> dict[str, Any]:
        return {"note": interrupt("ok?")}

    h.add(h.edge_from(h.start_node).to(other, ask2), h.edge_from(other).to(h.end_node), h.edge_from(ask2).to(h.end_node))
    run = h.start(inputs=None, state=Notes())
    run.run()
    assert run.status == "failed" and "station ask2 asked to wait" in run.error["message"]
    assert run.state == Notes()
