"""`consent()` only from a gate, checked once where the kernel parks a wait (issue 26, consent kernel check).

`lab.consent(prompt, details)` parks with a consent wait, and only a gate station's consent wait
can be answered (`run.approve()` hands the verdict to a gate). Before, only the super-step model
refused consent() outside a `gate=True` step: in a plain `@g.step` graph, a node class, or a
parallel graph's branch, the run parked, and approving raised a misleading `WaitReentryError`
("the head was edited outside the lab"). Now the kernel's park path refuses a consent wait from
any station whose manifest kind is not "gate" (serial, parallel and model engines alike): the
station fails at once, naming itself and how to declare it a gate. A gate asks once per visit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_graph import BaseNode, End, GraphRunContext, StepContext
from pydantic_graph.join import reduce_list_append

from lab import Lab, consent
from lab.reducers import append


@dataclass
class Log:
    log: list[str] = field(default_factory=list)


def assert_refused(run: Any, node_id: str, noun: str, how: str) -> None:
    """The station failed naming itself and the fix; nothing parked, no wait stored."""
    assert run.status == "failed", (run.status, run.wait)
    assert run.error["node_id"] == node_id, run.error
    message = run.error["message"]
    assert f"{noun} {node_id} called consent() but is not declared a gate" in message, message
    assert how in message, message
    assert run.wait is None and run.waits() == []
    assert run.error["type"].endswith("GraphDefinitionError"), run.error


@dataclass
class Ask(BaseNode[Log, None, int]):
    """A plain node class (not a lab.Gate) that asks for consent."""

    async def run(self, ctx: GraphRunContext[Log, None]) -> End[int]:
        ctx.state.log.append("ask")
        verdict = consent("Go on?")
        return End(int(verdict.approved))


def test_serial_node_class_not_a_gate_is_refused_where_it_parks(lab: Lab) -> None:
    """Issue 26 consent kernel check (serial engine, node class): a plain node calling consent()
    fails at once (before: it parked, and run.approve() then run.run() raised WaitReentryError)."""
    g = lab.graph("nodes_ask", state_type=Log, output_type=int)
    g.node(Ask)
    run = g.start(Ask(), state=Log())
    run.run()
    assert_refused(run, "Ask", "node", "subclass lab.Gate")
    assert run.state == Log()  # the station's partial work is not saved


def test_serial_step_not_a_gate_is_refused_where_it_parks(lab: Lab) -> None:
    """Issue 26 consent kernel check (serial engine, @g.step graph): a step without gate=True that
    calls consent() fails at once, saying to declare it @g.step(gate=True)."""
    g = lab.graph("steps_ask", state_type=Log, input_type=int, output_type=int)

    @g.step
    async def check(ctx: StepContext[Log, None, int]) -> int:
        return ctx.inputs if consent("Keep it?", {"value": ctx.inputs}).approved else 0

    g.add(g.edge_from(g.start_node).to(check), g.edge_from(check).to(g.end_node))
    run = g.start(inputs=3, state=Log())
    run.run()
    assert_refused(run, "check", "step", "@g.step(gate=True)")


def test_parallel_branch_not_a_gate_is_refused_where_it_parks(lab: Lab) -> None:
    """Issue 26 consent kernel check (parallel super-step engine): a map's branch that calls consent()
    from a step not declared a gate fails the run, naming the step; no wait is stored."""
    g = lab.graph("map_ask", state_type=Log, input_type=list[int], output_type=list[int])

    @g.step
    async def check(ctx: StepContext[Log, None, int]) -> int:
        if ctx.inputs == 2:
            return ctx.inputs if consent("Keep item 2?").approved else 0
        return ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(check), g.edge_from(check).to(collect), g.edge_from(collect).to(g.end_node))
    assert g.build().manifest.engine == "superstep"
    run = g.start(inputs=[1, 2, 3], state=Log())
    run.run()
    assert_refused(run, "check", "step", "@g.step(gate=True)")


def test_parallel_gate_step_still_parks_and_resumes(lab: Lab) -> None:
    """The check lets a declared gate through: the same map with gate=True parks item 2's branch and
    the verdict reaches it (the output is what pydantic-graph's own run would give after approval)."""
    g = lab.graph("map_gate", state_type=Log, input_type=list[int], output_type=list[int])

    @g.step(gate=True)
    async def check(ctx: StepContext[Log, None, int]) -> int:
        return ctx.inputs if consent(f"Keep item {ctx.inputs}?").approved else 0

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(check), g.edge_from(check).to(collect), g.edge_from(collect).to(g.end_node))
    run = g.start(inputs=[1, 2], state=Log())
    run.run()
    assert run.status == "waiting" and [w.kind for w in run.head_waits] == ["consent", "consent"]
    for wait in run.head_waits:
        run.approve(owner=wait.owner)
    run.run()
    assert run.status == "done", run.error
    assert sorted(run.output) == [1, 2]


def test_model_step_not_a_gate_is_refused_by_the_kernel(lab: Lab) -> None:
    """Issue 26 consent kernel check (super-step model): the model's own check is gone; the kernel's
    refuses a non-gate step's consent() (the step before it keeps its update)."""
    g = lab.graph("model_ask", state_type=Log, model="superstep", reducers={"log": append})

    async def fine(ctx: StepContext[Log, None, None]) -> dict[str, Any]:
        return {"log": ["fine"]}

    async def asks(ctx: StepContext[Log, None, None]) -> dict[str, Any]:
        return {"log": [f"asked:{consent('Go?').approved}"]}

    f, a = g.step(fine), g.step(asks)
    g.add(g.edge_from(g.start_node).to(f), g.edge_from(f).to(a), g.edge_from(a).to(g.end_node))
    run = g.start(inputs=None, state=Log())
    run.run()
    assert_refused(run, "asks", "step", "@g.step(gate=True)")
    assert run.state == Log(log=["fine"])


def test_a_gate_asks_consent_once_per_visit(lab: Lab) -> None:
    """Issue 26 consent kernel check: a second consent() in one visit of a gate is refused (before, it
    returned the first question's verdict again, answering a question nobody was shown)."""
    g = lab.graph("twice", state_type=Log, input_type=int, output_type=int)

    @g.step(gate=True)
    async def check(ctx: StepContext[Log, None, int]) -> int:
        first = consent("Send the draft?")
        second = consent("Also send the invoice?")
        return int(first.approved) + int(second.approved)

    g.add(g.edge_from(g.start_node).to(check), g.edge_from(check).to(g.end_node))
    run = g.start(inputs=1, state=Log())
    run.run()
    assert run.status == "waiting" and run.wait.prompt == "Send the draft?"
    run.approve()
    run.run()
    assert run.status == "failed" and run.error["node_id"] == "check", (run.status, run.output)
    assert "gate check called consent() twice in one visit" in run.error["message"]
