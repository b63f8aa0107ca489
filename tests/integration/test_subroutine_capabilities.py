"""Subroutines get every capability of a lab graph (issue 26, done-when 4: "Every kind has every capability").

- issue 26 item "a subroutine cannot be a run_subgraph child": `run_subgraph(sub, inputs=...)` (and
  the input given positionally) starts the subroutine as a child with lineage; an `interrupt()` or a
  consent gate inside the child parks the parent, and the parent's answer reaches the child's visit
- issue 26 item "a subroutine has no consent gate": `@sub.node(gate=True)` / `@sub.feature_node(gate=True)`
  and `context.consent(prompt, details)` park the run on a consent wait; approve / deny with a note
  reach the visit, which routes on the verdict; a non-gate node or a second question is refused clearly
- a `Retry` policy and a time limit per try declared beside the node (`@sub.node(retry=..., timeout=...)`)
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, Retry, interrupt, run_subgraph
from lab.errors import ArgumentError
from lab.subroutine import FeatureState, FeatureSuccess, SubroutineDefinitionError, Success


@pytest.fixture
def lab(tmp_path):
    lab = Lab(os.fspath(tmp_path / "caps.duckdb"))
    yield lab
    if not lab.store.closed:
        lab.close()


@dataclass(frozen=True, slots=True)
class Seen:
    visits: int = 0
    notes: tuple[str, ...] = ()


# -- a subroutine as a run_subgraph child -------------------------------------------------------

CHILD: dict[str, tuple[Any, dict[str, Any]]] = {}


@dataclass
class Host:
    key: str = ""


@dataclass
class Call(BaseNode[Host, None, Any]):
    async def run(self, ctx: GraphRunContext[Host, None]) -> Done:
        graph, kwargs = CHILD[ctx.state.key]
        return Done(await run_subgraph(graph, **kwargs))


@dataclass
class Done(BaseNode[Host, None, Any]):
    value: Any = None

    async def run(self, ctx: GraphRunContext[Host, None]) -> End[Any]:
        return End(self.value)


def _host(lab: Lab, key: str, child: Any, **kwargs: Any) -> Any:
    CHILD[key] = (child, kwargs)
    g = lab.graph(f"host_{key}", state_type=Host, output_type=object)
    g.node(Call)
    g.node(Done)
    return g.start(Call(), state=Host(key=key))


def _shout(lab: Lab, name: str) -> Any:
    sub = lab.subroutine(name, input=str, output=str)

    @sub.node(state=Seen)
    async def upper(text: str, state: Seen, context) -> Success:
        return Success(output=text.upper(), state=Seen(state.visits + 1))

    @sub.node
    async def bang(text: str, state, context) -> Success:
        return Success(output=text + "!")

    sub.edge(sub.input, upper)
    sub.edge(upper, bang)
    sub.edge(bang, sub.output)
    return sub


@pytest.mark.parametrize("how", ["inputs", "positional"])
def test_a_subroutine_is_a_run_subgraph_child_with_lineage(lab, how):
    """issue 26 item "a subroutine cannot be a run_subgraph child": it raised SubroutineDefinitionError
    (inputs=, or the state=None every child start passes); now its output is the call's value."""
    sub = _shout(lab, f"shout_{how}")
    call = {"inputs": "hey"} if how == "inputs" else {"node": "hey"}
    parent = _host(lab, f"lineage_{how}", sub, **call)
    parent.run()
    assert (parent.status, parent.output, parent.error) == ("done", "HEY!", None)
    [child] = [r for r in lab.lineage(parent.id) if r.run_id != parent.id]
    assert child.status == "done" and child.graph_key == sub.name and child.parent_run_id == parent.id
    assert lab.resume(child.run_id).state.nodes["upper"] == Seen(1)
    assert [e.payload["child_run"] for e in parent.events("subgraph")] == [child.run_id]


def test_an_interrupt_inside_a_subroutine_child_parks_the_parent(lab):
    """issue 26: an interrupt() in the child's visit parks the parent; the parent's answer reaches that
    visit, and the child's step before it does not run again."""
    sub = lab.subroutine("ask_child", input=int, output=int)

    @sub.node(state=Seen)
    async def first(n: int, state: Seen, context) -> Success:
        return Success(output=n + 1, state=Seen(state.visits + 1))

    @sub.node(state=Seen)
    async def ask(n: int, state: Seen, context) -> Success:
        more = interrupt({"question": "how many more?", "so_far": n})
        return Success(output=n + int(more), state=Seen(state.visits + 1))

    sub.edge(sub.input, first)
    sub.edge(first, ask)
    sub.edge(ask, sub.output)
    parent = _host(lab, "interrupt", sub, inputs=1)
    parent.run()
    assert parent.status == "waiting" and parent.wait.kind == "interrupt", (parent.status, parent.error)
    assert parent.wait.details["subgraph"]["node"] == "ask"
    assert parent.wait.details["details"] == {"question": "how many more?", "so_far": 2}
    parent.resume_with(40)
    parent.run()
    assert (parent.status, parent.output) == ("done", 42), parent.error
    [child] = [r for r in lab.lineage(parent.id) if r.run_id != parent.id]
    done = lab.resume(child.run_id)
    assert done.state.nodes == {"first": Seen(1), "ask": Seen(1)}
    assert [e.node_id for e in done.events("settled")].count("first") == 1


@pytest.mark.parametrize("approved", [True, False])
def test_a_consent_gate_inside_a_subroutine_child_parks_the_parent(lab, approved):
    """issue 26: a subroutine gate in a run_subgraph child parks the parent on consent; the parent's
    verdict (and its note) is the one the child's visit receives."""
    sub = lab.subroutine(f"gated_child_{approved}", input=str, output=str)

    @sub.node(gate=True, state=Seen)
    async def review(text: str, state: Seen, context) -> Success:
        verdict = context.consent(f"Send {text!r}?", {"text": text})
        word = "sent" if verdict.approved else "held"
        return Success(
            output=f"{word}: {text} ({verdict.note})", state=Seen(state.visits + 1, (verdict.note or "",))
        )

    sub.edge(sub.input, review)
    sub.edge(review, sub.output)
    parent = _host(lab, f"gate_{approved}", sub, inputs="draft")
    parent.run()
    assert parent.status == "waiting" and parent.wait.kind == "consent", (parent.status, parent.error)
    assert parent.wait.prompt == "Send 'draft'?"
    (parent.approve if approved else parent.deny)("ok by me")
    parent.run()
    word = "sent" if approved else "held"
    assert (parent.status, parent.output) == ("done", f"{word}: draft (ok by me)"), parent.error


# -- the consent gate ---------------------------------------------------------------------------


def _review(lab: Lab, name: str) -> Any:
    sub = lab.subroutine(name, input=str, output=str)
    decision = sub.feature("decision", ("send", "revise"))

    @sub.node(state=Seen)
    async def draft(text: str, state: Seen, context) -> Success:
        return Success(output=text + "+", state=Seen(state.visits + 1))

    @sub.feature_node(gate=True)
    async def review(text: str, context) -> FeatureSuccess:
        verdict = context.consent("Send the draft?", {"draft": text})
        FeatureState.replace(decision, "send" if verdict.approved else "revise")
        return FeatureSuccess()

    @sub.node
    async def send(text: str, state, context) -> Success:
        return Success(output=f"sent {text}")

    sub.edge(sub.input, draft)
    sub.edge(draft, review)
    sub.edge(review, send, effect=decision.assign("send"))
    sub.edge(review, draft, effect=decision.assign("revise"))
    sub.edge(send, sub.output)
    return sub


def test_a_feature_gate_parks_for_consent_and_routes_on_the_verdict(lab):
    """issue 26 item "a subroutine has no consent gate": a gate node's context.consent() parks the run on
    a consent wait with its prompt and details; a denial routes back through the feature, an approval on."""
    sub = _review(lab, "review")
    assert sub.manifest.station("review").kind == "gate"
    run = sub.start("hi").run()
    assert (run.status, run.wait.kind, run.wait.node_id) == ("waiting", "consent", "review")
    assert (run.wait.prompt, run.wait.details) == ("Send the draft?", {"draft": "hi+"})
    run.deny("too short")
    run.run()
    assert run.status == "waiting" and run.wait.details == {"draft": "hi++"}, run.error
    assert run.state.features == {"decision": "revise"}
    run.approve("fine")
    run.run()
    assert (run.status, run.output) == ("done", "sent hi++"), run.error
    assert [e.payload.get("approved") for e in run.events("verdict")] == [False, True]
    assert run.state.nodes["draft"] == Seen(2)


def test_consent_outside_a_gate_node_or_twice_in_a_visit_fails_the_station_saying_what_to_do(lab):
    """issue 26: context.consent() in a node not declared gate=True fails the station naming the fix
    (instead of parking on a wait the run could never re-enter); a second question in one visit too."""
    sub = lab.subroutine("not_a_gate", input=int, output=int)

    @sub.node
    async def plain(n: int, state, context) -> Success:
        context.consent("May I?")
        return Success(output=n)

    sub.edge(sub.input, plain)
    sub.edge(plain, sub.output)
    run = sub.start(1).run()
    assert run.status == "failed" and "gate=True" in run.error["message"], run.error

    twice = lab.subroutine("asks_twice", input=int, output=int)

    @twice.node(gate=True)
    async def greedy(n: int, state, context) -> Success:
        context.consent("First?")
        context.consent("Second?")
        return Success(output=n)

    twice.edge(twice.input, greedy)
    twice.edge(greedy, twice.output)
    run = twice.start(1).run()
    assert run.status == "waiting"
    run.approve()
    run.run()
    assert run.status == "failed" and "asked for consent twice" in run.error["message"], run.error


def test_the_gate_flag_is_part_of_the_revision(lab):
    """A node re-declared as a gate (or back) is another revision: the manifest's station kind changes."""
    sub = lab.subroutine("flagged", input=int, output=int)

    async def step(n: int, state, context) -> Success:
        return Success(output=n)

    sub.node(step)
    sub.edge(sub.input, step)
    sub.edge(step, sub.output)
    first = sub.revision
    assert sub.manifest.station("step").kind == "node"
    sub.node(step, gate=True)
    assert sub.revision != first and sub.manifest.station("step").kind == "gate"
    with pytest.raises(SubroutineDefinitionError, match="gate=True"):
        sub.node(step, gate="yes")


# -- retry policy and time limit per try --------------------------------------------------------


def test_a_retry_policy_declared_beside_the_node(lab):
    """issue 26: `@sub.node(retry=Retry(...))` tries a flaky visit again inside the step (two retry
    events); re-declaring the node without it drops the policy; a wrong policy is refused."""
    tries: list[int] = []
    sub = lab.subroutine("flaky_sub", input=int, output=int)

    async def flaky(n: int, state: Seen, context) -> Success:
        tries.append(n)
        if len(tries) % 3:
            raise ConnectionError(f"try {len(tries)} fails")
        return Success(output=n * 2, state=Seen(state.visits + 1))

    sub.node(flaky, state=Seen, retry=Retry(max_attempts=3, on=(ConnectionError,)))
    sub.edge(sub.input, flaky)
    sub.edge(flaky, sub.output)
    assert isinstance(sub.retry_policies["flaky"], Retry)
    run = sub.start(5).run()
    assert (run.status, run.output, len(tries), len(run.events("retry"))) == ("done", 10, 3, 2), run.error
    assert run.state.nodes["flaky"] == Seen(1)  # the failed tries committed nothing

    sub.node(flaky, state=Seen)  # the cell re-run without retry=
    assert "flaky" not in sub.retry_policies
    run = sub.start(5).run()
    assert run.status == "failed" and run.error["type"].endswith("ConnectionError")
    with pytest.raises(SubroutineDefinitionError, match="retry="):
        sub.node(flaky, state=Seen, retry=3)
    with pytest.raises(ArgumentError, match="timeout"):
        sub.node(flaky, state=Seen, timeout=-1)


def test_a_time_limit_per_try_declared_beside_the_node(lab):
    """issue 26: `@sub.node(timeout=...)` fails a visit that runs too long with NodeTimeout."""
    sub = lab.subroutine("sleepy_sub", input=int, output=int)

    @sub.node(timeout=0.2)
    async def sleepy(n: int, state, context) -> Success:
        await asyncio.sleep(60)
        return Success(output=n)

    sub.edge(sub.input, sleepy)
    sub.edge(sleepy, sub.output)
    run = sub.start(1).run()
    assert run.status == "failed" and run.error["type"].endswith("NodeTimeout"), run.error


def test_start_refuses_a_state_or_the_input_twice(lab):
    """A subroutine's state is the runtime's; `inputs=` is the input, so both at once is refused."""
    sub = _shout(lab, "shout_refusals")
    with pytest.raises(SubroutineDefinitionError, match="initialised by the runtime"):
        sub.start("a", state={"params": None})
    with pytest.raises(SubroutineDefinitionError, match="input twice"):
        sub.start("a", inputs="b")
    assert sub.start(inputs="b").run().output == "B!"
