"""Retry policies (issue 13 requirement 3, seed 003 "Failures and retries").

Scenarios: a flaky station is tried again inside the same step on the same state until it
succeeds, each failed try a `retry` event with its error; the tries are not checkpointed and do
not count toward the step limit; exhausted tries fail the run; only the exceptions named in
`on` are retried; a station gets all its tries again after `run.retry()` and after a resume;
adopted graphs take policies per station by name, also for parallel branches; a station's own
timeout fails a try with `NodeTimeout`, which a policy retries; a wait is never retried.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from lab import ArgumentError, GraphDefinitionError, Lab, NodeExecutionError, Retry
from tests.integration.control_graphs import Asker, Laps, Prep, Script, flaky


def retries(run: Any) -> list[dict[str, Any]]:
    return [e.payload for e in run.events("retry") if e.payload.get("by") == "policy"]


def test_a_flaky_station_is_tried_again_inside_the_same_step_on_the_same_state() -> None:
    """Seed 003: "A node that was added with a Retry is first tried again, inside the same step and
    on the same state." and "a try of a node that failed and is followed by another" is a
    NodeRetry event."""
    lab = Lab(":memory:")
    g = flaky(lab, retry=Retry(max_attempts=3))
    script = Script([ValueError("flaky 1"), ValueError("flaky 2"), None])
    run = g.start(Prep(), state=Laps(), deps=script)
    run.run()
    assert run.status == "done" and script.tries == 3
    # the same state each try: only the successful try's change is kept
    assert run.state.count == 1 and run.state.log == ["prep", "try 3"] and run.output == 1
    got = retries(run)
    assert [(r["try"], r["of"], r["error"]["message"]) for r in got] == [(1, 3, "flaky 1"), (2, 3, "flaky 2")]
    assert all(r["error"]["type"] == "builtins.ValueError" for r in got)
    assert not run.events("failed")


def test_tries_are_not_checkpointed_and_do_not_count_toward_the_step_limit() -> None:
    """Seed 003: "The tries of a node with a Retry are not saved either. They do not count for
    GraphConfig.maxIterations"."""
    lab = Lab(":memory:")
    g = flaky(lab, retry=Retry(max_attempts=4))
    run = g.start(Prep(), state=Laps(), deps=Script([KeyError("a"), KeyError("b"), KeyError("c")]), step_limit=2)
    run.run()
    assert run.status == "done"  # two steps (Prep, Flaky) although Flaky ran four times
    assert [cp.seq for cp in run.history()] == [0, 1, 2]
    entered = [e for e in run.events("entered") if e.node_id == "Flaky"]
    assert len(entered) == 4  # every try is recorded before it runs (seed 001), as an event only
    assert [e.attempt for e in run.events("retry")] == [e.attempt for e in entered[:3]]


def test_exhausted_tries_fail_the_run_and_raise_with_the_last_attempt() -> None:
    lab = Lab(":memory:")
    g = flaky(lab, retry=Retry(max_attempts=2))
    run = g.start(Prep(), state=Laps(), deps=Script([ValueError("one"), ValueError("two"), None]))
    with pytest.raises(NodeExecutionError) as info:
        run.run(raise_on_failure=True)
    assert run.status == "failed" and run.head == 1 and run.state.log == ["prep"]
    assert [r["try"] for r in retries(run)] == [1]
    last = [e for e in run.events("entered") if e.node_id == "Flaky"][-1]
    assert info.value.entered_seq == last.attempt and str(info.value.__cause__) == "two"
    assert info.value.attempt == 2  # the second of max_attempts=2 (issue 25 item 6)


def test_only_the_named_exceptions_are_retried() -> None:
    lab = Lab(":memory:")
    g = flaky(lab, retry=Retry(max_attempts=3, on=(ValueError,)))
    run = g.start(Prep(), state=Laps(), deps=Script([KeyError("not this"), None]))
    run.run()
    assert run.status == "failed" and retries(run) == []


def test_every_station_gets_all_its_tries_again_after_retry_and_after_a_resume(db_path: str) -> None:
    """Seed 003: "a step that runs again after resume gives each of its nodes all of its tries again"."""
    lab = Lab(db_path)
    g = flaky(lab, retry=Retry(max_attempts=2))
    script = Script([ValueError("1"), ValueError("2"), ValueError("3"), ValueError("4"), ValueError("5"), None])
    run = g.start(Prep(), state=Laps(), deps=script)
    run.run()
    assert run.status == "failed" and script.tries == 2
    run.retry()  # the person's retry: two more tries
    assert run.status == "failed" and script.tries == 4
    run_id = run.id
    lab.close()
    lab2 = Lab(db_path)
    flaky(lab2, retry=Retry(max_attempts=2))
    again = lab2.resume(run_id, deps=script)
    again.retry()  # after a restart: two more tries, the second succeeds
    assert again.status == "done" and script.tries == 6
    assert [r["try"] for r in retries(again)] == [1, 1, 1]
    assert [e.payload.get("by") for e in again.events("retry")] == ["policy", "person", "policy", "person", "policy"]
    lab2.close()


def test_backoff_waits_grow_by_the_factor_and_a_function_can_set_them() -> None:
    policy = Retry(max_attempts=4, backoff=0.01, factor=3.0)
    assert [policy.delay(n) for n in (1, 2, 3)] == pytest.approx([0.01, 0.03, 0.09])
    assert Retry(backoff=1.0, max_backoff=1.5).delay(3) == 1.5
    assert Retry(backoff=lambda n: n / 100).delay(2) == 0.02
    lab = Lab(":memory:")
    g = flaky(lab, retry=policy)
    run = g.start(Prep(), state=Laps(), deps=Script([ValueError(), ValueError(), None]))
    run.run()
    assert [r["delay"] for r in retries(run)] == pytest.approx([0.01, 0.03])


def test_a_station_timeout_fails_the_try_and_a_policy_tries_again() -> None:
    """Issue 13 requirement 2: "a per-node timeout"; a timed-out try is a NodeTimeout, which a Retry retries."""
    lab = Lab(":memory:")
    g = flaky(lab, retry=Retry(max_attempts=2), timeout=0.2)
    run = g.start(Prep(), state=Laps(), deps=Script(["sleep", None]))
    run.run()
    assert run.status == "done"
    (r,) = retries(run)
    assert r["error"]["type"] == "lab.errors.NodeTimeout" and "timeout of 0.2 s" in r["error"]["message"]
    g.set_policy("Flaky", timeout=0.2)  # no retry policy now: the timeout fails the run
    run = g.start(Prep(), state=Laps(), deps=Script(["sleep"]))
    run.run()
    assert run.status == "failed" and run.error["type"] == "lab.errors.NodeTimeout"  # type: ignore[index]


def test_a_wait_is_never_retried() -> None:
    lab = Lab(":memory:")
    g = lab.graph("asks", state_type=Laps, output_type=int)
    g.node(retry=Retry(max_attempts=5))(Asker)
    run = g.start(Asker(), state=Laps())
    run.run()
    assert run.status == "waiting" and not run.events("retry")
    run.resume_with("yes")
    run.run()
    assert run.status == "done" and run.state.log == ["yes"]


# -- adopted graphs: policies per station by name ---------------------------------------------------


def _flaky_steps(script: Script) -> Any:
    g = GraphBuilder(state_type=Laps, input_type=int, output_type=int)

    @g.step
    async def double(ctx: StepContext[Laps, None, int]) -> int:
        return ctx.inputs * 2

    @g.step
    async def call_tool(ctx: StepContext[Laps, None, int]) -> int:
        script.tries += 1
        if script.tries <= len(script.plan) and isinstance(script.plan[script.tries - 1], BaseException):
            raise script.plan[script.tries - 1]  # type: ignore[misc]
        return ctx.inputs + 1

    g.add(g.edge_from(g.start_node).to(double), g.edge_from(double).to(call_tool), g.edge_from(call_tool).to(g.end_node))
    return g.build()


def test_an_adopted_graph_takes_policies_per_station_by_name() -> None:
    """Issue 13: "(and for adopted graphs, per station by name)"."""
    lab = Lab(":memory:")
    script = Script([TimeoutError("slow api")])
    lg = lab.adopt(_flaky_steps(script), name="tool", retry={"call_tool": Retry(max_attempts=2)})
    run = lg.start(inputs=20, state=Laps())
    run.run()
    assert run.status == "done" and run.output == 41
    assert [(r["try"], r["error"]["message"]) for r in retries(run)] == [(1, "slow api")]
    with pytest.raises(GraphDefinitionError, match="no_such_step"):
        lab.adopt(_flaky_steps(script), name="tool2", retry={"no_such_step": Retry()})
    with pytest.raises(GraphDefinitionError, match="no_such_step"):
        lg.set_policy("no_such_step", retry=Retry())


def _flaky_map(failures: dict[str, int]) -> Any:
    g = GraphBuilder(state_type=Laps, input_type=list[int], output_type=list[int])

    @g.step
    async def work(ctx: StepContext[Laps, None, int]) -> int:
        if ctx.inputs == 2 and failures["left"]:
            failures["left"] -= 1
            raise ConnectionError("reset by peer")
        return ctx.inputs * 10

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(work), g.edge_from(work).to(collect), g.edge_from(collect).to(g.end_node))
    return g.build()


def test_a_parallel_branch_is_tried_again_inside_its_super_step() -> None:
    """Seed 003: tries happen "inside the same step": one flaky branch of a map does not fail the step."""
    lab = Lab(":memory:")
    lg = lab.adopt(_flaky_map({"left": 2}), name="fan", retry={"work": Retry(max_attempts=3)})
    run = lg.start(inputs=[1, 2, 3, 4], state=Laps())
    run.run()
    assert run.status == "done" and sorted(run.output) == [10, 20, 30, 40]
    got = retries(run)
    assert [r["try"] for r in got] == [1, 2] and len({r["task"] for r in got}) == 1
    assert not run.events("failed")
    assert len(run.history()) == 3  # start, the map's step, the join's step: no checkpoint per try


def test_a_bad_policy_is_refused_by_name() -> None:
    with pytest.raises(ArgumentError, match="max_attempts"):
        Retry(max_attempts=0)
    with pytest.raises(ArgumentError, match="backoff"):
        Retry(backoff=-1)
    with pytest.raises(ArgumentError, match="on="):
        Retry(on=(ValueError, "nope"))  # type: ignore[arg-type]
    lab = Lab(":memory:")
    with pytest.raises(ArgumentError, match="retry="):
        flaky(lab, retry=3)
    with pytest.raises(ArgumentError, match="timeout="):
        flaky(lab, name="f2", timeout=-1)
