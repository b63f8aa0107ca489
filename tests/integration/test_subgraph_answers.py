"""Answers reach the wait that asked, in order, through subgraphs (issue 24 item 7).

A parent station runs a child graph with `run_subgraph`; the child asks twice (`interrupt("q1")`,
then `interrupt("q2")`, in one node or in two). Answering the parent "ONE" then "TWO" must give
the child ONE for q1 and TWO for q2 (issue 24 found `a1=ONE,a2=ONE`), for a grandchild too, with
the parent's own `interrupt()` calls before and after the subgraph, with a gate in the child, and
across a closed and reopened store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, LabGraph, Verdict, interrupt, run_subgraph

CHOICE: dict[str, Any] = {}
"""What the graphs below run: which child node starts the child, and whether a middle graph nests it."""


@dataclass
class Asked:
    a1: str = ""
    log: list[str] = field(default_factory=list)


@dataclass
class AskBoth(BaseNode[Asked, None, str]):
    """Both questions in one node: the node runs again from the top after each answer."""

    async def run(self, ctx: GraphRunContext[Asked, None]) -> End[str]:
        a1 = interrupt("q1")
        a2 = interrupt("q2")
        return End(f"a1={a1},a2={a2}")


@dataclass
class AskFirst(BaseNode[Asked, None, str]):
    async def run(self, ctx: GraphRunContext[Asked, None]) -> AskSecond:
        ctx.state.a1 = interrupt("q1")
        ctx.state.log.append("AskFirst")
        return AskSecond()


@dataclass
class AskSecond(BaseNode[Asked, None, str]):
    async def run(self, ctx: GraphRunContext[Asked, None]) -> End[str]:
        ctx.state.log.append("AskSecond")
        return End(f"a1={ctx.state.a1},a2={interrupt('q2')}")


@dataclass
class Ship(Gate[Asked]):
    """A gate before the questions: the parent parks on consent, then on the interrupts."""

    prompt = "ship?"

    async def decide(self, ctx: GraphRunContext[Asked, None], verdict: Verdict) -> AskFirst:
        ctx.state.log.append(f"ship:{verdict.approved}")
        return AskFirst()


def asking_child(lab: Lab) -> LabGraph:
    g = lab.graph("asking", state_type=Asked, output_type=str)
    for node in (AskBoth, AskFirst, AskSecond, Ship, AskThenCheck):
        g.node(node)
    return g


@dataclass
class Relay(BaseNode[Asked, None, str]):
    """The middle graph's station: it runs the asking child, so the asking run is a grandchild."""

    async def run(self, ctx: GraphRunContext[Asked, None]) -> End[str]:
        return End(await run_subgraph(CHOICE["asking"], CHOICE["first"](), state=Asked()))


def middle_graph(lab: Lab) -> LabGraph:
    g = lab.graph("middle", state_type=Asked, output_type=str)
    g.node(Relay)
    return g


def _child_call() -> Any:
    if CHOICE["depth"] == 2:
        return run_subgraph(CHOICE["middle"], Relay(), state=Asked())
    return run_subgraph(CHOICE["asking"], CHOICE["first"](), state=Asked())


@dataclass
class Outer(BaseNode[Asked, None, str]):
    async def run(self, ctx: GraphRunContext[Asked, None]) -> End[str]:
        return End(await _child_call())


@dataclass
class Framed(BaseNode[Asked, None, str]):
    """The parent asks a question of its own before the subgraph and another after it."""

    async def run(self, ctx: GraphRunContext[Asked, None]) -> End[str]:
        before = interrupt("p1")
        inner = await _child_call()
        after = interrupt("p2")
        return End(f"{before}|{inner}|{after}")


def outer_graph(lab: Lab) -> LabGraph:
    g = lab.graph("outer", state_type=Asked, output_type=str)
    g.node(Outer)
    g.node(Framed)
    return g


def declare(lab: Lab, first: type, depth: int) -> LabGraph:
    CHOICE.update(asking=asking_child(lab), middle=middle_graph(lab), first=first, depth=depth)
    return outer_graph(lab)


def asked(run: Any) -> Any:
    """The question the innermost waiting run asks, read through the parent's mirrored waits."""
    details = run.wait.details
    while isinstance(details, dict) and "subgraph" in details:
        details = details["details"]
    return details


@pytest.mark.parametrize("depth", [1, 2], ids=["child", "grandchild"])
@pytest.mark.parametrize("first", [AskBoth, AskFirst], ids=["same-node", "later-node"])
def test_each_answer_reaches_the_interrupt_that_asked_it(first: type, depth: int) -> None:
    """Issue 24 item 7: answering "ONE" then "TWO" gives a1=ONE,a2=TWO, not a1=ONE,a2=ONE."""
    lab = Lab(":memory:")
    parent = declare(lab, first, depth).start(Outer(), state=Asked())
    parent.run()
    assert parent.status == "waiting" and asked(parent) == "q1"
    parent.resume_with("ONE")
    parent.run()
    assert parent.status == "waiting" and asked(parent) == "q2"
    parent.resume_with("TWO")
    parent.run()
    assert parent.status == "done", parent.error
    assert parent.output == "a1=ONE,a2=TWO"
    assert len(parent.events("subgraph")) == 1  # one child, continued each time
    if first is AskFirst:  # the child's first node settled once: it was not run again for q2
        (child_id,) = [e.payload["child_run"] for e in parent.events("subgraph")]
        runs = [lab.resume(child_id)]
        if depth == 2:
            (grand,) = [e.payload["child_run"] for e in runs[0].events("subgraph")]
            runs = [lab.resume(grand)]
        assert runs[0].state.log == ["AskFirst", "AskSecond"]


@pytest.mark.parametrize("depth", [1, 2], ids=["child", "grandchild"])
def test_the_parents_own_questions_before_and_after_the_subgraph_keep_their_answers(depth: int) -> None:
    """Issue 24 item 7: the parent's interrupts and the child's are answered in the order they asked,
    and a child that finished is not started again when the parent asks after it."""
    lab = Lab(":memory:")
    parent = declare(lab, AskBoth, depth).start(Framed(), state=Asked())
    for question, answer in (("p1", "P1"), ("q1", "ONE"), ("q2", "TWO"), ("p2", "P2")):
        parent.run()
        assert parent.status == "waiting" and asked(parent) == question, (question, parent.status, parent.error)
        parent.resume_with(answer)
    parent.run()
    assert parent.status == "done", parent.error
    assert parent.output == "P1|a1=ONE,a2=TWO|P2"
    assert len(parent.events("subgraph")) == 1


def test_a_gate_then_two_interrupts_in_the_child() -> None:
    """Issue 24 item 7: a consent in the child, answered on the parent, then its two interrupts."""
    lab = Lab(":memory:")
    parent = declare(lab, Ship, 1).start(Outer(), state=Asked())
    parent.run()
    assert parent.status == "waiting" and parent.wait.kind == "consent" and parent.wait.prompt == "ship?"
    parent.approve(note="go")
    parent.run()
    assert asked(parent) == "q1"
    parent.resume_with("ONE")
    parent.run()
    assert asked(parent) == "q2"
    parent.resume_with("TWO")
    parent.run()
    assert parent.status == "done" and parent.output == "a1=ONE,a2=TWO"
    (event,) = parent.events("subgraph")
    child = lab.resume(event.payload["child_run"])
    assert child.state.log == ["ship:True", "AskFirst", "AskSecond"]


@pytest.mark.parametrize("depth", [1, 2], ids=["child", "grandchild"])
def test_the_answers_survive_closing_and_reopening_the_store(tmp_path, depth: int) -> None:
    """Issue 24 item 7: answer, close the Lab, reopen, answer again: each answer still reaches its wait."""
    path = str(tmp_path / "lab.duckdb")
    lab = Lab(path)
    parent = declare(lab, AskFirst, depth).start(Framed(), state=Asked())
    run_id = parent.id
    for question, answer in (("p1", "P1"), ("q1", "ONE"), ("q2", "TWO"), ("p2", "P2")):
        parent.run()
        assert parent.status == "waiting" and asked(parent) == question, (question, parent.status, parent.error)
        parent.resume_with(answer)
        lab.close()  # a kernel restart between the answer and the run that continues it
        lab = Lab(path)
        declare(lab, AskFirst, depth)
        parent = lab.resume(run_id)
    parent.run()
    assert parent.status == "done", parent.error
    assert parent.output == "P1|a1=ONE,a2=TWO|P2"
    assert len(parent.events("subgraph")) == 1
    lab.close()


FLIP = {"calls": 0}


@dataclass
class Fickle(BaseNode[Asked, None, str]):
    """Runs the subgraph first the first time, asks first the next time: its calls change order."""

    async def run(self, ctx: GraphRunContext[Asked, None]) -> End[str]:
        FLIP["calls"] += 1
        if FLIP["calls"] == 1:
            return End(await _child_call())
        return End(f"{interrupt('p1')}{await _child_call()}")


def test_a_node_whose_calls_change_order_is_stopped_with_a_clear_error() -> None:
    """Issue 24 item 7: an answer never goes to a call that did not ask it; the run fails saying why."""
    lab = Lab(":memory:")
    g = declare(lab, AskBoth, 1)
    g.node(Fickle)
    FLIP["calls"] = 0
    parent = g.start(Fickle(), state=Asked())
    parent.run()
    assert asked(parent) == "q1"
    parent.resume_with("ONE")
    parent.run(raise_on_failure=False)
    assert parent.status == "failed" and parent.error["type"] == "lab.errors.RunStateError"
    assert "calls interrupt() where it called run_subgraph()" in parent.error["message"]


@dataclass
class AskThenCheck(BaseNode[Asked, None, str]):
    async def run(self, ctx: GraphRunContext[Asked, None]) -> End[str]:
        answer = interrupt("q1")
        if answer == "BOOM":
            raise ValueError("the child refuses BOOM")
        return End(f"a1={answer}")


def test_a_retry_after_the_child_failed_on_its_answer_starts_a_fresh_child() -> None:
    """Issue 24 item 7 with docs/run-control.md: the answer went to the child that asked; the child
    failed on it; retrying the parent starts a fresh child, which asks again and takes the new answer."""
    lab = Lab(":memory:")
    g = declare(lab, AskThenCheck, 1)
    parent = g.start(Outer(), state=Asked())
    parent.run()
    parent.resume_with("BOOM")
    parent.run(raise_on_failure=False)
    assert parent.status == "failed" and parent.error["type"] == "lab.subgraph.SubgraphError"
    first = parent.events("subgraph")[0].payload["child_run"]
    assert lab.run(first).status == "failed"
    parent.retry(raise_on_failure=False)
    assert parent.status == "waiting" and asked(parent) == "q1"
    parent.resume_with("fine")
    parent.run()
    assert parent.status == "done" and parent.output == "a1=fine"
    ids = [e.payload["child_run"] for e in parent.events("subgraph")]
    assert len(ids) == 2 and ids[0] == first and lab.run(first).status == "failed"
