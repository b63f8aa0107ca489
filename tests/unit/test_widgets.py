"""The run widget and the graph view, driven through their buttons outside a browser.

Scenarios:
- Step, Run, scrub, Rewind here and Fork here act on the run; the graph lights the station
- a long Run returns at once, updates the view while it goes, and Pause stops it at a boundary
- at a gate the consent panel shows the (escaped) prompt; Approve with a note resumes the run
- errors from actions and from stations show in the widget; impossible actions are disabled
  with a tooltip saying why
- a GraphView follows a graph whose node is redefined
(tests/browser/ shows the same in a real JupyterLab and Chromium.)
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, Verdict
from lab.widgets import GraphView, RunWidget
from tests.conftest import Counter, Inc, declare_counter

EVIL = "<img src=x onerror=alert(1)>"


@pytest.fixture
def mem_lab():
    lab = Lab(":memory:")
    yield lab
    lab.close()


def lit(w: RunWidget) -> list[str]:
    return re.findall(r'<g class="node [^"]*gl-current[^"]*" data-station="([^"]*)"', w.graph.value)


def test_step_run_scrub_rewind_fork(mem_lab):
    run = declare_counter(mem_lab).start(Inc(), state=Counter())
    w = RunWidget(run)
    assert lit(w) == ["Inc"] and w.slider.max == 0
    assert w.retry_btn.disabled and "nothing failed" in w.retry_btn.tooltip
    assert w.rewind_btn.disabled and "already the head" in w.rewind_btn.tooltip
    w.step_btn.click()
    assert w.wait(10)
    assert lit(w) == ["Check"] and w.slider.max == 1 and w.selected_seq == 1
    assert "State at checkpoint 1 (head)" in w.state_panel.value
    w.run_btn.click()
    assert w.wait(10)
    assert run.status == "done" and lit(w) == ["__end__"] and w.slider.max == 8
    assert w.step_btn.disabled and "the run is done" in w.step_btn.tooltip
    w.slider.value = 2  # scrub back
    assert w.selected_seq == 2 and lit(w) == ["Inc"]
    assert '<span class="gl-k">count</span>: <span class="gl-n">1</span>' in w.state_panel.value
    assert "Changes from checkpoint 1 to 2" in w.diff_panel.value
    assert not w.rewind_btn.disabled
    w.rewind_btn.click()
    assert run.head == 2 and run.status == "running" and w.slider.max == 2 and w.selected_seq == 2
    w.fork_btn.click()
    assert len(w.forks.children) == 1 and "Forked checkpoint 2 into" in w.message.value
    child = w.forks.children[0]
    assert isinstance(child, RunWidget) and child.run.id != run.id and lit(child) == ["Inc"]
    assert RunWidget.for_run(run) is RunWidget.for_run(run)


@dataclass
class Slow:
    n: int = 0


@dataclass
class Tick(BaseNode[Slow, None, int]):
    async def run(self, ctx: GraphRunContext[Slow, None]) -> Tick | End[int]:
        await asyncio.sleep(0.02)
        ctx.state.n += 1
        return End(ctx.state.n) if ctx.state.n >= 500 else Tick()


def test_long_run_returns_at_once_updates_live_and_pauses(mem_lab):
    g = mem_lab.graph("slow", state_type=Slow, output_type=int)
    g.node(Tick)
    run = g.start(Tick(), state=Slow())
    w = RunWidget(run)
    w.interval = 0.05
    w.run_btn.click()
    assert run.status != "done" and (run.head or 0) < 500  # the handler did not wait for the run (>= 10 s)
    assert w.busy and not w.pause_btn.disabled and w.step_btn.disabled
    deadline = time.monotonic() + 10
    while w.slider.max < 5 and time.monotonic() < deadline:  # the view moves while the run goes
        time.sleep(0.02)
    assert w.busy and w.slider.max >= 5 and "run in progress" in w.header.value
    w.pause_btn.click()
    assert w.wait(10)
    assert run.status == "running" and 5 <= run.head < 500
    assert run.events()[-1].kind == "settled"  # stopped at a boundary
    assert w.slider.max == len(run.history()) - 1 and w.pause_btn.disabled


@dataclass
class Mail:
    draft: str = EVIL
    notes: list[str] = field(default_factory=list)


@dataclass
class Send(BaseNode[Mail, None, str]):
    async def run(self, ctx: GraphRunContext[Mail, None]) -> End[str]:
        return End(ctx.state.draft)


@dataclass
class Confirm(Gate[Mail]):
    prompt = "Send <script>alert(2)</script>?"

    def details(self, ctx):  # type: ignore[no-untyped-def]
        return {"draft": ctx.state.draft}

    async def decide(self, ctx: GraphRunContext[Mail, None], verdict: Verdict) -> Send | End[str]:
        return Send() if verdict.approved else End("denied")


def test_consent_panel_approve_with_note(mem_lab):
    g = mem_lab.graph("mail", state_type=Mail, output_type=str)
    g.node(Confirm)
    g.node(Send)
    run = g.start(Confirm(), state=Mail())
    w = RunWidget(run)
    assert w.consent.layout.display == "none"
    w.step_btn.click()
    assert w.wait(10)
    assert run.status == "waiting" and w.consent.layout.display is None
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in w.wait_info.value and "<script" not in w.wait_info.value
    assert "&lt;img src=x onerror=alert(1)&gt;" in w.wait_info.value and "<img" not in w.wait_info.value
    assert "<img" not in w.state_panel.value and "<img" not in w.graph.value
    assert 'gl-parked" data-station="Confirm"' in w.graph.value
    assert w.step_btn.disabled and w.step_btn.tooltip == "Confirm waits for a verdict: Approve or Deny below"
    w.note.value = "ok <b>go</b>"
    w.approve_btn.click()
    assert w.wait(10)
    assert run.status == "done" and run.output == EVIL and w.consent.layout.display == "none"
    assert "approved · note: ok &lt;b&gt;go&lt;/b&gt;" in w.events_panel.value
    assert [e.payload["note"] for e in run.events("verdict")] == ["ok <b>go</b>"]
    assert w.note.value == ""


@dataclass
class Boom(BaseNode[None, None, int]):
    async def run(self, ctx: GraphRunContext[None, None]) -> End[int]:
        raise ValueError("no <b>luck</b>")


def test_errors_show_in_the_widget(mem_lab):
    g = mem_lab.graph("boom", output_type=int)
    g.node(Boom)
    run = g.start(Boom())
    w = RunWidget(run)
    w.approve_btn.click()  # nothing to approve: the error is shown, not only logged
    assert "Approve failed:" in w.message.value and "WaitError" in w.message.value
    w.step_btn.click()
    assert w.wait(10)
    assert run.status == "failed"
    assert "station Boom failed:" in w.message.value and "no &lt;b&gt;luck&lt;/b&gt;" in w.message.value
    assert 'gl-failed" data-station="Boom"' in w.graph.value and "✖ failed" in w.graph.value
    assert w.retry_btn.layout.display is None and not w.retry_btn.disabled
    assert w.step_btn.disabled and "press Retry" in w.step_btn.tooltip
    w.retry_btn.click()
    assert w.wait(10)
    assert run.status == "failed" and [e.kind for e in run.events()].count("retry") == 1


@dataclass
class A(BaseNode[None, None, int]):
    async def run(self, ctx: GraphRunContext[None, None]) -> End[int]:
        return End(1)


def test_graph_view_follows_redefinition(mem_lab):
    g = mem_lab.graph("live", output_type=int)
    g.node(A)
    view = GraphView(g)
    assert 'data-station="A"' in view.value and 'data-station="B"' not in view.value

    @dataclass
    class B(BaseNode[None, None, int]):
        async def run(self, ctx: GraphRunContext[None, None]) -> End[int]:
            return End(2)

    g.node(B)
    assert 'data-station="B"' in view.value and view.spec.revision == 2


def test_state_tree_truncates_long_values_with_a_way_to_expand():
    from lab.widgets.html import LONG, json_tree

    long = "x" * (LONG + 50) + "<script>alert(3)</script>"
    html = json_tree({"short": "<b>hi</b>", "long": long, "n": [1, 2, {"deep": None}]})
    assert "&quot;&lt;b&gt;hi&lt;/b&gt;&quot;" in html and "<b>hi" not in html
    assert '<details class="gl-long"><summary>' in html and f"({len(long)} chars, show all)" in html
    assert (
        f"<pre>{'x' * (LONG + 50)}&lt;script&gt;alert(3)&lt;/script&gt;</pre>" in html
    )  # all of it, escaped
    assert "<script" not in html
    assert (
        html.count("<details open>") == 2 and "<details><summary>{…} 1 key" in html
    )  # deeper levels start folded


@dataclass
class Ask(BaseNode[None, None, str]):
    async def run(self, ctx: GraphRunContext[None, None]) -> End[str]:
        from lab import interrupt

        return End(f"region {interrupt({'question': 'Which <region>?'})}")


def test_interrupt_wait_takes_an_answer(mem_lab):
    g = mem_lab.graph("ask", output_type=str)
    g.node(Ask)
    run = g.start(Ask())
    w = RunWidget(run)
    w.step_btn.click()
    assert w.wait(10)
    assert run.status == "waiting" and w.asking.layout.display is None and w.consent.layout.display == "none"
    assert "Which &lt;region&gt;?" in w.asking.children[0].value
    assert w.run_btn.disabled and "waits for an answer" in w.run_btn.tooltip
    w.answer.value = "eu"
    w.answer_btn.click()
    assert w.wait(10)
    assert run.status == "done" and run.output == "region eu" and w.asking.layout.display == "none"


def test_adopted_gated_graph_in_the_widget(mem_lab):
    from tests.integration import native_graphs

    run = mem_lab.adopt(native_graphs.gated(), name="gated").start(inputs="hello")
    w = RunWidget(run)
    w.run_btn.click()
    assert w.wait(10)
    assert run.status == "waiting" and w.consent.layout.display is None
    assert 'gl-parked" data-station="Review"' in w.graph.value
    w.approve_btn.click()
    assert w.wait(10)
    assert run.status == "done" and lit(w) == ["__end__"]


def test_capability_wait_is_granted_from_the_widget(mem_lab):
    from tests.integration.gate_graphs import Probe, Work, declare_work

    run = declare_work(mem_lab).start(Probe(), state=Work())
    w = RunWidget(run)
    w.run_btn.click()
    assert w.wait(10)
    assert run.wait.kind == "capability" and w.asking.layout.display is None
    assert w.answer_btn.description == "Grant" and "grant it below" in w.run_btn.tooltip
    w.answer.value = '"gpu-0"'
    w.answer_btn.click()
    assert w.wait(10)
    assert run.status == "done" and run.output == "ran on gpu-0"
    assert run.waits()[-1].resolution == {"granted": "gpu", "value": "gpu-0", "by": "person"}


def test_a_stale_view_cannot_answer_a_newer_wait(mem_lab):
    from tests.integration.gate_graphs import Draft, Mail, declare_mail

    run = declare_mail(mem_lab).start(Draft(), state=Mail())
    run.run()
    w = RunWidget(run)  # shows the first interrupt
    shown = w.answers.shown_owner
    run.resume_with("eu")  # answered elsewhere (another cell); the run parks again at the gate
    run.run()
    assert run.wait.kind == "consent" and run.wait.owner != shown
    w.answers.shown_owner = shown  # the view has not refreshed yet
    w.note.value = "from the stale view"
    w.approve_btn.click()
    assert run.status == "waiting" and run.wait.open, "a stale view answered the newer wait"
    # issue 25 item 2: said as what happened, not as a failure; the view now shows the newer wait
    assert "answered elsewhere:" in w.message.value and "now waiting" in w.message.value
    assert "failed" not in w.message.value and w.answers.shown_owner == run.wait.owner
