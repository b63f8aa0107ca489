"""The run view's answer panel and the words it uses, driven through its buttons (issue 25).

Scenarios:
- item 1: Approve disables the answer buttons in its click handler, before the answer is
  stored; a second click (during the Run the verdict started, and after it finished) does
  nothing and shows no failure; the outcome is reported once
- item 2: a wait answered elsewhere (another cell; another process on the same file) is said
  so and its buttons go; a view whose lab closed says so and offers nothing
- item 4: the header, the state panel and the timeline use the same words (paused, End)
- item 5: the event log shows an `interrupt()`'s question, which is stored under `details`
(tests/browser/test_views_never_lie.py shows the same in a real JupyterLab and Chromium.)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Gate, Lab, Verdict
from lab.widgets import RunWidget
from tests.conftest import Counter, Inc, declare_counter

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def mem_lab():
    lab = Lab(":memory:")
    yield lab
    if not lab.store.closed:
        lab.close()


@dataclass
class Doc:
    text: str = "ship it"


@dataclass
class Ship(BaseNode[Doc, None, str]):
    async def run(self, ctx: GraphRunContext[Doc, None]) -> End[str]:
        await asyncio.sleep(0.3)  # long enough for a second click to land while it runs
        return End(ctx.state.text)


@dataclass
class Ok(Gate[Doc]):
    prompt = "Ship?"

    async def decide(self, ctx: GraphRunContext[Doc, None], verdict: Verdict) -> Ship | End[str]:
        return Ship() if verdict.approved else End("no")


def _parked(lab: Lab, name: str = "ship"):  # type: ignore[no-untyped-def]
    g = lab.graph(name, state_type=Doc, output_type=str)
    g.node(Ok)
    g.node(Ship)
    run = g.start(Ok(), state=Doc())
    run.run()
    assert run.status == "waiting"
    return run


def _until(what, timeout: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_double_click_on_approve_answers_once_and_reports_no_failure(mem_lab):
    """issue 25 item 1: buttons off before any work; a second click or Enter does nothing."""
    run = _parked(mem_lab)
    w = RunWidget(run)
    assert not w.approve_btn.disabled
    seen = {}
    approve = run.approve

    def spy(note, *, owner):  # type: ignore[no-untyped-def]
        seen["disabled"] = (w.approve_btn.disabled, w.deny_btn.disabled)
        return approve(note, owner=owner)

    run.approve = spy  # type: ignore[method-assign]
    w.approve_btn.click()
    assert seen["disabled"] == (True, True), "the buttons were live while the answer was stored"
    assert w.busy and w.approve_btn.disabled and w.deny_btn.disabled
    w.approve_btn.click()  # a stray Enter on the focused button while the Run goes on
    assert w.wait(30)
    assert run.status == "done"
    w.approve_btn.click()  # a double-click's second half, landing after the run finished
    w.deny_btn.click()
    assert len(run.events("verdict")) == 1
    message = w.message.value
    assert "failed" not in message and "Error" not in message, message
    assert message.count("Approved") == 1 and "the run goes on" in message


def test_a_late_click_while_the_answers_run_goes_on_does_nothing_whatever_wait_is_shown(mem_lab):
    """A full suite's browser run (ci2, 2026-12-06) ended "Approve failed: RunStateError: ... running in
    another task ... answered elsewhere: now done": a late click went through while the Run the
    verdict started held the run. However the panel's shown wait reads at that moment (here: another
    owner, as a refresh could show), the panel answers nothing until its Run is over."""
    run = _parked(mem_lab, "ship4")
    w = RunWidget(run)
    w.approve_btn.click()
    assert w.busy
    w.answers.shown_owner = "another-wait"  # what a refresh during the Run might show
    w.approve_btn.click()
    w.deny_btn.click()
    message = w.message.value
    assert "failed" not in message and "answered elsewhere" not in message, message
    assert w.wait(30)
    assert run.status == "done" and len(run.events("verdict")) == 1
    w.refresh()
    message = w.message.value
    assert "failed" not in message and "answered elsewhere" not in message, message


def test_a_wait_answered_in_another_cell_is_said_so(mem_lab):
    """issue 25 item 2: the view shows that its wait moved on elsewhere, and its buttons go."""
    run = _parked(mem_lab, "ship2")
    w = RunWidget(run)
    assert w.consent.layout.display is None
    run.approve("from a cell")  # not from the view
    w.refresh()
    assert w.consent.layout.display == "none"
    assert "answered elsewhere:" in w.message.value and "now queued" in w.message.value
    w.approve_btn.click()  # the hidden button, were a click to land: no failure
    assert "failed" not in w.message.value and len(run.events("verdict")) == 1


def test_a_view_of_a_closed_lab_says_so_and_offers_nothing(tmp_path):
    """issue 25 item 2: workflow.ipynb closes its lab and opens another; the first view must not
    offer live buttons whose click says "StoreError: the store ... is closed"."""
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    run = _parked(lab, "ship3")
    w = RunWidget(run)
    lab.close()
    assert _until(lambda: "this lab is closed" in w.message.value), w.message.value  # the view's watch says so
    assert "reopen with Lab() and display the run again" in w.message.value
    assert 'data-label="lab closed"' in w.header.value
    buttons = [w.step_btn, w.run_btn, w.cancel_btn, w.rewind_btn, w.fork_btn, w.approve_btn, w.deny_btn]
    assert all(b.disabled for b in buttons) and "the lab is closed" in w.step_btn.tooltip
    assert w.consent.layout.display == "none"
    w.approve_btn.click()
    w.step_btn.click()
    assert "StoreError" not in w.message.value and "failed" not in w.message.value
    again = Lab(os.fspath(tmp_path / "lab.duckdb"))
    try:
        assert again.run(run.id).status == "waiting"  # nothing was answered from the closed view
    finally:
        again.close()


_ANSWER_ELSEWHERE = """
import sys
from lab import Lab
from tests.unit.test_widgets_answers import Doc, Ok, Ship
lab = Lab(sys.argv[1])
g = lab.graph("ship4", state_type=Doc, output_type=str)
g.node(Ok)
g.node(Ship)
lab.resume(sys.argv[2]).approve("from another kernel")
lab.close()
"""


def test_a_wait_answered_in_another_process_is_said_so(tmp_path):
    """issue 25 item 2: another kernel answers the wait a view shows; the view follows and says so."""
    path = os.fspath(tmp_path / "lab.duckdb")
    lab = Lab(path)
    try:
        run = _parked(lab, "ship4")
        w = RunWidget(run)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
        done = subprocess.run(
            [sys.executable, "-c", _ANSWER_ELSEWHERE, path, run.id], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert _until(lambda: "answered elsewhere:" in w.message.value, 60), w.message.value
        assert "now queued" in w.message.value and w.consent.layout.display == "none"
        w.approve_btn.click()
        assert "failed" not in w.message.value
        w.run_btn.click()  # the run goes on from the other kernel's verdict
        assert w.wait(30) and run.status == "done"
    finally:
        lab.close()


def test_header_state_panel_and_timeline_use_the_same_words(mem_lab):
    """issue 25 item 4: `paused` in the header is `paused` in the state panel; End is End."""
    run = declare_counter(mem_lab).start(Inc(), state=Counter())
    w = RunWidget(run)
    w.step_btn.click()
    assert w.wait(30)
    assert 'data-label="paused"' in w.header.value
    assert "(head) · paused</h4>" in w.state_panel.value and "· paused · next" in w.timeline_label.value
    assert "running" not in w.state_panel.value
    w.run_btn.click()
    assert w.wait(30) and run.status == "done"
    assert "next End" in w.header.value and "next End" in w.timeline_label.value and "next —" not in w.header.value


@dataclass
class Where(BaseNode[None, None, str]):
    async def run(self, ctx: GraphRunContext[None, None]) -> End[str]:
        from lab import interrupt

        return End(interrupt({"question": "Which region?"}))


def test_the_event_log_shows_an_interrupts_question(mem_lab):
    """issue 25 item 5: the question is stored under `details` (`prompt` is null); the log shows it."""
    g = mem_lab.graph("where", output_type=str)
    g.node(Where)
    run = g.start(Where())
    run.run()
    ev = run.events("waiting")[-1]
    assert ev.payload.get("prompt") is None and ev.payload["details"] == {"question": "Which region?"}
    w = RunWidget(run)
    assert "interrupt: Which region?" in w.events_panel.value


def test_the_views_own_step_past_a_breakpoint_is_not_answered_elsewhere(mem_lab):
    """issue 25 item 2: only a wait the panel offers to answer can be "answered elsewhere"; the
    view's own Step past a breakpoint is not news from elsewhere."""
    run = declare_counter(mem_lab, "bp").start(Inc(), state=Counter(), breakpoints={"before": ["Check"]})
    w = RunWidget(run)
    w.step_btn.click()
    assert w.wait(30)
    w.step_btn.click()  # parks before Check
    assert w.wait(30)
    assert run.status == "waiting" and run.wait.kind == "breakpoint"
    w.step_btn.click()  # continues past the breakpoint, from this view
    assert w.wait(30)
    assert run.status == "running" and run.next_stations == ("Inc",)  # Check ran
    assert "answered elsewhere" not in w.message.value, w.message.value


def test_a_rewind_or_cancel_from_a_gate_is_not_answered_elsewhere(mem_lab):
    """issue 25 item 2: a wait that goes away unanswered (the view's Rewind, a Cancel) is no answer."""
    run = _parked(mem_lab, "ship5")
    w = RunWidget(run)
    w.slider.value = 0
    w.rewind_btn.click()
    assert run.head == 0 and run.status != "waiting"
    assert "answered elsewhere" not in w.message.value, w.message.value
    run2 = _parked(mem_lab, "ship6")
    w2 = RunWidget(run2)
    w2.cancel_btn.click()
    assert run2.status == "cancelled" and "answered elsewhere" not in w2.message.value
