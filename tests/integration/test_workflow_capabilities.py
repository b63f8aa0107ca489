"""A declarative workflow has every capability of a graph (issue 26, done-when 4: every kind has every capability).

Scenarios:
- a workflow runs as a `run_subgraph` child (with `inputs`, a whole `state`, or a station as its
  `node`); a consent checkpoint or an `interrupt()` inside the child parks the parent, and the
  parent's answer reaches the child, which continues where it parked
- a consent checkpoint (`consent: true`) parks at a consent wait: `run.approve()` / `run.deny()`
  (or `wf.choose(run, "approve")`) answer it, each option with its effects; its verdict is kept
  when a later checkpoint of the same activity parks
- an activity declares `retry:` (lab.Retry's arguments, `on` naming built-in exceptions) and
  `timeout:`; a wrong declaration is reported by path when the file loads
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, interrupt
from lab.errors import ArgumentError, GraphDefinitionError
from lab.subgraph import run_subgraph
from lab.workflow import WorkflowDefinitionError


@pytest.fixture
def lab(file_lab: Lab) -> Lab:
    return file_lab


def flow(
    name: str, *, confirm: dict[str, Any] | None = None, retry: Any = None, timeout: Any = None
) -> dict[str, Any]:
    """Two activities: `count` (n + 1, asking `interrupt()` when `ask` is set), then `close` (n * 10)."""
    count: dict[str, Any] = {
        "id": "count",
        "variables": {"writes": ["n"]},
        "exits": [{"id": "on", "isDefault": True}],
    }
    if retry is not None:
        count["retry"] = retry
    if timeout is not None:
        count["timeout"] = timeout
    close: dict[str, Any] = {
        "id": "close",
        "variables": {"writes": ["n"]},
        "exits": [{"id": "stop", "when": "n < 0"}, {"id": "done", "isDefault": True}],
    }
    if confirm is not None:
        close["checkpoints"] = [confirm]
    return {
        "name": name,
        "variables": [
            {"name": "n", "type": "number", "default": 0},
            {"name": "ask", "type": "boolean", "default": False},
            {"name": "mode", "type": "string", "default": "normal"},
        ],
        "activities": [count, close],
        "exit_destinations": {"count": {"on": "close"}, "close": {"stop": "end", "done": "end"}},
    }


def count(ctx: Any) -> dict[str, Any]:
    more = int(interrupt({"question": "how many?"})) if ctx.variables["ask"] else 1
    return {"variables": {"n": ctx.variables["n"] + more}}


def close(ctx: Any) -> dict[str, Any]:
    return {"variables": {"n": ctx.variables["n"] * 10}}


WORKERS = {"count": count, "close": close}
CONSENT = {"id": "sure", "prompt": "Close it?", "consent": True}


def parent_of(lab: Lab, child: Any, name: str, **call: Any) -> Any:
    p = lab.graph(name, state_type=None, output_type=object)

    @p.node
    @dataclass
    class Call(BaseNode[None, None, object]):
        async def run(self, ctx: GraphRunContext[None, None]) -> End[object]:
            return End(await run_subgraph(child, **call))

    return p.start(Call())


def test_a_workflow_is_a_subgraph_child_with_inputs_state_or_a_station(lab: Lab) -> None:
    """issue 26 done-when 4: WorkflowGraph.start took no inputs/state/node (TypeError), so run_subgraph could not start one."""
    wf = lab.workflow(flow("child"), workers=WORKERS)
    run = parent_of(lab, wf, "by_inputs", inputs={"n": 4})
    run.run()
    assert run.status == "done" and run.output == {"n": 50, "ask": False, "mode": "normal"}
    (child,) = [r for r in lab.lineage(run.id) if r.run_id != run.id]
    assert lab.resume(child.run_id).graph.name == "child"

    state = wf.state_type(variables={"n": 2, "ask": False, "mode": "normal"})
    run = parent_of(lab, wf, "by_state", state=state)
    run.run()
    assert run.output["n"] == 30

    run = parent_of(
        lab,
        wf,
        "by_node",
        node=wf.station("close")(),
        state={"variables": {"n": 7, "ask": False, "mode": "x"}},
    )
    run.run()
    assert run.output == {"n": 70, "ask": False, "mode": "x"}


def test_a_consent_checkpoint_or_interrupt_in_a_child_workflow_parks_the_parent(lab: Lab) -> None:
    """issue 26 done-when 4: the child's wait parks the parent, and the parent's answer reaches the child."""
    wf = lab.workflow(flow("asking", confirm=CONSENT), workers=WORKERS)
    run = parent_of(lab, wf, "outer", inputs={"ask": True})
    run.run()
    assert run.status == "waiting" and run.wait.kind == "interrupt"
    assert run.wait.details["details"] == {"question": "how many?"}
    run.resume_with(4)
    run.run()
    assert run.status == "waiting" and run.wait.kind == "consent" and run.wait.prompt == "Close it?"
    run.approve()
    run.run()
    assert run.status == "done" and run.output["n"] == 40
    (child,) = [r for r in lab.lineage(run.id) if r.run_id != run.id]
    child = lab.resume(child.run_id)
    assert [w.kind for w in child.waits()] == ["interrupt", "consent"]
    assert [t.activity for t in child.graph.trail(child)] == ["count", "close"]


def test_a_consent_checkpoint_waits_for_approve_or_deny_with_their_effects(lab: Lab) -> None:
    """issue 26 done-when 4: a workflow had no consent wait (its checkpoints were interrupts), so run.approve() refused."""
    confirm = {
        **CONSENT,
        "options": [{"id": "deny", "label": "No", "effects": {"setVariable": {"n": -1}, "exit": "stop"}}],
    }
    wf = lab.workflow(flow("consenting", confirm=confirm), workers=WORKERS)
    run = wf.start()
    run.run()
    assert run.wait.kind == "consent"
    assert [c["id"] for c in run.wait.details["choices"]] == ["approve", "deny"]
    run.approve()
    run.run()
    assert run.output["n"] == 10

    denied = wf.start()
    denied.run()
    wf.choose(denied, "deny")
    denied.run()
    assert denied.output["n"] == -1
    assert [(t.activity, t.exit, t.reason) for t in wf.trail(denied)][-1] == ("close", "stop", "checkpoint")

    chosen = wf.start()
    chosen.run()
    wf.choose(chosen, "approve")
    chosen.run()
    assert chosen.output["n"] == 10


def test_a_consent_verdict_is_kept_when_a_later_checkpoint_of_the_activity_parks(lab: Lab) -> None:
    """issue 26 done-when 4: the verdict rides in the station's answer log, so the consent is not asked twice."""
    d = flow("two_questions", confirm=CONSENT)
    d["activities"][1]["checkpoints"].append(
        {
            "id": "how",
            "prompt": "How?",
            "options": [{"id": "fast", "effects": {"setVariable": {"mode": "fast"}}}],
        }
    )
    wf = lab.workflow(d, workers=WORKERS)
    run = wf.start()
    run.run()
    run.approve()
    run.run()
    assert run.wait.kind == "interrupt" and run.wait.details["workflow_checkpoint"] == "how"
    wf.choose(run, "fast")
    run.run()
    assert run.status == "done" and run.output == {"n": 10, "ask": False, "mode": "fast"}
    assert [w.kind for w in run.waits()] == ["consent", "interrupt"]


def test_a_consent_checkpoint_refuses_other_options(lab: Lab) -> None:
    """issue 26 done-when 4: a consent checkpoint's options are approve and deny, said when the file loads."""
    with pytest.raises(WorkflowDefinitionError) as err:
        lab.workflow(flow("bad_consent", confirm={**CONSENT, "options": [{"id": "maybe"}], "consent": "yes"}))
    messages = [(p.path, p.message) for p in err.value.problems]
    assert ("activities[1].checkpoints[0].consent", "expected true or false, got a string") in messages
    with pytest.raises(WorkflowDefinitionError) as err:
        lab.workflow(flow("bad_consent", confirm={**CONSENT, "options": [{"id": "maybe"}]}))
    (problem,) = err.value.problems
    assert (
        problem.path == "activities[1].checkpoints[0].options[0].id" and "approve and deny" in problem.message
    )


def test_an_activity_declares_a_retry_policy(lab: Lab) -> None:
    """issue 26 done-when 4: a workflow activity could not declare a Retry policy in its definition."""
    tries: list[int] = []

    def flaky(ctx: Any) -> dict[str, Any]:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionError(f"try {len(tries)} fails")
        return {"variables": {"n": 1}}

    wf = lab.workflow(
        flow("flaky", retry={"max_attempts": 3, "on": ["ConnectionError"]}),
        workers={"count": flaky, "close": close},
    )
    run = wf.start()
    run.run()
    assert run.status == "done" and run.output["n"] == 10
    assert [e.payload["try"] for e in run.events("retry")] == [1, 2]
    assert wf.retry_policies["count"].on == (ConnectionError,)

    tries.clear()
    wf = lab.workflow(flow("flaky", retry={"max_attempts": 2}), workers={"count": flaky, "close": close})
    run = wf.start()
    run.run()
    assert run.status == "failed" and len(tries) == 2

    lab.workflow(flow("flaky"), workers={"count": flaky, "close": close})
    assert "count" not in wf.retry_policies  # a redefinition without `retry:` takes the policy away


def test_an_activity_declares_a_time_limit(lab: Lab) -> None:
    """issue 26 done-when 4: `timeout:` gives the activity's station a time limit per try (NodeTimeout)."""

    async def stuck(ctx: Any) -> None:
        await asyncio.sleep(30)

    wf = lab.workflow(flow("stuck", timeout=0.05), workers={"count": stuck})
    run = wf.start()
    run.run()
    assert run.status == "failed" and run.error["type"] == "lab.errors.NodeTimeout"


@pytest.mark.parametrize(
    "retry, path, words",
    [
        ({"max_attempts": 0}, "activities[0].retry", "at least 1"),
        ({"tries": 3}, "activities[0].retry.tries", "unknown key"),
        ({"on": ["NoSuchError"]}, "activities[0].retry.on[0]", "not a built-in exception class"),
        ({"on": []}, "activities[0].retry.on", "exception class names"),
        ({"backoff": -1}, "activities[0].retry", "finite number >= 0"),
        ([3], "activities[0].retry", "expected a mapping"),
    ],
)
def test_a_wrong_retry_declaration_is_reported_by_path(lab: Lab, retry: Any, path: str, words: str) -> None:
    """issue 26 done-when 4: a bad `retry:` is a definition problem with its path, not a failure at the first step."""
    with pytest.raises(WorkflowDefinitionError) as err:
        lab.workflow(flow("bad_retry", retry=retry))
    (problem,) = err.value.problems
    assert problem.path == path and words in problem.message


def test_start_refuses_mixed_or_wrong_arguments(lab: Lab) -> None:
    """issue 26 done-when 4: what run_subgraph may pass is checked, with what to do instead."""
    wf = lab.workflow(flow("args"), workers=WORKERS)
    with pytest.raises(ArgumentError, match="inputs are its variables"):
        wf.start(inputs=[1])
    with pytest.raises(ArgumentError, match="both inputs= and variables="):
        wf.start(inputs={"n": 1}, variables={"n": 2})
    with pytest.raises(ArgumentError, match="state= and user_request"):
        wf.start(state={"variables": {}}, user_request="x")
    with pytest.raises(ArgumentError, match="node count and at='close'"):
        wf.start(wf.station("count")(), at="close")
    with pytest.raises(GraphDefinitionError, match="a workflow starts at an activity"):
        wf.start(object())
    with pytest.raises(Exception, match="'n'"):
        wf.start(state={"variables": {"n": "many"}})
