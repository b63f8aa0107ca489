"""A consent gate in the super-step model (issue 26: "the super-step model has no consent gate").

A superstep-model graph runs `@g.step` functions only, so a `Gate` node class cannot be one of
its stations. Its gate is a step declared `@g.step(gate=True)` that asks
`verdict = consent(prompt, details)`: the run parks with a `consent` wait, `run.approve()` /
`run.deny()` (or the widget's consent panel) answer it, and the step runs again with the
verdict, as a `Gate`'s `decide` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import StepContext

from lab import ArgumentError, Lab, NodeExecutionError, Retry, consent
from lab.reducers import add, append
from lab.widgets import RunWidget


@dataclass
class Mail:
    log: list[str] = field(default_factory=list)
    sent: int = 0
    tries: int = 0


Ctx = StepContext[Mail, None, None]


async def draft(ctx: Ctx) -> dict[str, Any]:
    return {"log": ["draft"]}


async def confirm(ctx: Ctx) -> dict[str, Any]:
    verdict = consent("Send the draft?", {"lines": len(ctx.state.log)})
    return {"log": [f"{'approved' if verdict.approved else 'denied'}:{verdict.note}"], "sent": int(verdict.approved)}


async def send(ctx: Ctx) -> dict[str, Any]:
    return {"log": ["send"]}


def mail(lab: Lab, name: str = "mail", *, gate: bool = True, asking: Any = confirm, retry: Retry | None = None) -> Any:
    g = lab.graph(name, state_type=Mail, model="superstep", reducers={"log": append, "sent": add})
    d, c, s = g.step(draft), g.step(asking, gate=gate, retry=retry), g.step(send)
    g.add(g.edge_from(g.start_node).to(d), g.edge_from(d).to(c), g.edge_from(c).to(s), g.edge_from(s).to(g.end_node))
    return g


def test_a_gate_step_parks_for_consent_and_the_verdict_reaches_it(lab: Lab) -> None:
    """Issue 26: "the super-step model has no consent gate (a `Gate` is a node class, which the model
    refuses)". A step declared gate=True parks at consent() with a consent wait (no update applied,
    its manifest station a gate); run.approve(note) runs it again with the verdict; deny likewise."""
    g = mail(lab)
    assert {s.node_id: s.kind for s in g.build().manifest.stations}["confirm"] == "gate"
    run = g.start(inputs=None, state=Mail())
    run.run()
    assert run.status == "waiting" and run.wait.kind == "consent" and run.wait.node_id == "confirm"
    assert run.wait.prompt == "Send the draft?" and run.wait.details == {"lines": 1}
    assert run.state == Mail(log=["draft"])  # the parked step applied nothing
    run.approve("go")
    run.run()
    assert run.status == "done", run.error
    assert run.state == Mail(log=["draft", "approved:go", "send"], sent=1)
    assert [e.payload["note"] for e in run.events("verdict")] == ["go"]

    denied = g.start(inputs=None, state=Mail())
    denied.run()
    denied.deny("not now")
    denied.run()
    assert denied.status == "done" and denied.state == Mail(log=["draft", "denied:not now", "send"], sent=0)


def test_a_parked_gate_step_is_approved_after_a_restart_from_the_store_alone(db_path: str) -> None:
    """Seed 001 "Durable Stasis": the consent wait outlives the process; a new lab resumes the run,
    approves it and the gate step gets the verdict."""
    lab = Lab(db_path)
    run = mail(lab).start(inputs=None, state=Mail())
    run.run()
    assert run.status == "waiting"
    run_id = run.id
    lab.close()

    lab2 = Lab(db_path)
    try:
        mail(lab2)
        again = lab2.resume(run_id)
        assert again.wait is not None and again.wait.kind == "consent"
        again.approve("later")
        again.run()
        assert again.status == "done" and again.state.log == ["draft", "approved:later", "send"]
    finally:
        lab2.close()


def test_the_widget_consent_panel_approves_a_gate_step() -> None:
    """The run widget's consent panel shows a model gate's wait, and Approve resumes the run (issue 26)."""
    lab = Lab(":memory:")
    try:
        run = mail(lab).start(inputs=None, state=Mail())
        w = RunWidget(run)
        w.run_btn.click()
        assert w.wait(60)
        assert run.status == "waiting" and w.consent.layout.display is None
        assert "Send the draft?" in w.wait_info.value
        w.note.value = "from the panel"
        w.approve_btn.click()
        assert w.wait(60)
        assert run.status == "done" and run.state.log == ["draft", "approved:from the panel", "send"]
    finally:
        lab.close()


def test_consent_outside_a_declared_gate_and_a_gate_that_never_asks_are_refused(lab: Lab) -> None:
    """A step that calls consent() without gate=True would park a run no verdict can resume (the
    answer goes only to a gate); a gate step that returns without asking lets everything through.
    Both fail the step, naming the station and the fix, and apply nothing."""
    run = mail(lab, "undeclared", gate=False).start(inputs=None, state=Mail())
    run.run()
    assert run.status == "failed" and run.error["node_id"] == "confirm"
    assert "step confirm called consent() but is not declared a gate" in run.error["message"]
    assert "@g.step(gate=True)" in run.error["message"]
    assert run.state == Mail(log=["draft"]) and run.wait is None

    async def silent(ctx: Ctx) -> dict[str, Any]:
        return {"log": ["silent"]}

    run = mail(lab, "silent", asking=silent).start(inputs=None, state=Mail())
    run.run()
    assert run.status == "failed" and run.error["node_id"] == "silent"
    assert "gate step silent returned without calling consent()" in run.error["message"]
    assert run.state == Mail(log=["draft"])


def test_a_retried_gate_step_keeps_its_verdict(lab: Lab) -> None:
    """A gate step with a Retry policy that fails after the verdict is tried again with the same
    verdict (the answer is not asked twice; seed 003: tries happen inside the same step)."""

    async def flaky_confirm(ctx: Ctx) -> dict[str, Any]:
        verdict = consent("Send?")
        flaky_confirm.tries += 1  # type: ignore[attr-defined]
        if flaky_confirm.tries == 1:  # type: ignore[attr-defined]
            raise ConnectionError("the mail server blinked")
        return {"log": [f"approved:{verdict.approved}"]}

    flaky_confirm.tries = 0  # type: ignore[attr-defined]
    run = mail(lab, "flaky", asking=flaky_confirm, retry=Retry(max_attempts=2, on=(ConnectionError,))).start(
        inputs=None, state=Mail()
    )
    run.run()
    run.approve()
    run.run()
    assert run.status == "done", run.error
    assert run.state.log == ["draft", "approved:True", "send"] and len(run.events("retry")) == 1
    assert len(run.events("verdict")) == 1


def test_gate_is_a_declaration_of_a_step_and_can_be_taken_back(lab: Lab) -> None:
    """Re-declaring the step without gate=True makes it a plain step again (a new revision)."""
    g = mail(lab, "redeclared")
    first = g.build().manifest.revision
    g.step(confirm)
    assert g.gate_steps == frozenset()
    assert {s.node_id: s.kind for s in g.build().manifest.stations}["confirm"] == "step"
    assert g.build().manifest.revision != first
    with pytest.raises(ArgumentError, match=r"gate=\.\.\.\) takes True or False, got 'Send\?'"):
        g.step(confirm, gate="Send?")
    run = g.start(inputs=None, state=Mail())
    with pytest.raises(NodeExecutionError, match="step confirm called consent\\(\\) but is not declared a gate"):
        run.run(raise_on_failure=True)


def test_a_gate_step_works_in_a_graph_of_steps_outside_the_model_too(lab: Lab) -> None:
    """The same declaration in a plain `@g.step` graph (pydantic-graph's model): the step passes its
    input on, parks at consent(), and the verdict reaches it; the drawing marks it a gate."""
    g = lab.graph("steps_gate", state_type=Mail, input_type=int, output_type=int)

    @g.step
    async def double(ctx: StepContext[Mail, None, int]) -> int:
        return ctx.inputs * 2

    @g.step(gate=True)
    async def check(ctx: StepContext[Mail, None, int]) -> int:
        verdict = consent("Keep it?", {"value": ctx.inputs})
        return ctx.inputs if verdict.approved else 0

    g.add(g.edge_from(g.start_node).to(double), g.edge_from(double).to(check), g.edge_from(check).to(g.end_node))
    assert 'state "check (gate)"' in g.mermaid()
    run = g.start(inputs=4, state=Mail())
    run.run()
    assert run.status == "waiting" and run.wait.kind == "consent" and run.wait.details == {"value": 8}
    run.deny()
    run.run()
    assert run.status == "done" and run.output == 0
