"""Every kind × every in-process capability (issue 26, done-when 4).

One test per capability, parametrized over every kind in `cases.KINDS`: the same code takes a
run of node classes, steps, an adopted graph, a parallel map+join, the super-step model, a
subroutine, a workflow and a delegated agent through it. The heavier columns live beside this
file: SIGKILL and resume (test_matrix_kill.py), lab.map on Ray (test_matrix_map.py), the
PostgreSQL store (test_matrix_postgres.py), the widget, drawing and %lab magics
(test_matrix_views.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, run_subgraph
from lab.events import Completed, NodeFinished, NodeStarted

from .cases import ANSWER, FAILS_BEFORE_SUCCESS, KINDS, Slow, case_named

pytestmark = pytest.mark.parametrize("kind", KINDS)


@pytest.fixture
def lab(tmp_path):
    lab = Lab(os.fspath(tmp_path / "matrix.duckdb"))
    yield lab
    if not lab.store.closed:
        lab.close()


def _settled(run: Any) -> list[Any]:
    return [c for c in run.history() if c.status != "waiting"]


def test_step_and_run(lab, kind):
    """step() advances the head by one boundary and leaves the run unfinished; run() ends it."""
    case = case_named(kind)
    run = case.start(case.build(lab, "plain"))
    run.step()
    assert run.status in ("running", "created", "paused"), (kind, run.status, run.error)
    first = run.head
    assert first is not None and first >= 1
    run.run()
    assert (run.status, run.output) == ("done", case.expected("plain")), (kind, run.error)
    assert run.head > first


def test_history_and_state_at(lab, kind):
    """The history lists every checkpoint oldest first, and state_at reads each of them."""
    case = case_named(kind)
    run = case.start(case.build(lab, "plain"))
    run.run()
    history = run.history()
    assert len(history) >= 3, (kind, [c.seq for c in history])
    seqs = [c.seq for c in history]
    assert seqs == sorted(seqs) and seqs[-1] == run.head
    assert history[-1].status == "done"
    for seq in seqs:
        run.state_at(seq)  # each checkpoint's state decodes under the declared type
    assert run.state_at(run.head) == run.state


def test_rewind_and_step_a_new_branch(lab, kind):
    """A rewind to an earlier checkpoint and a step write a new branch; the old one stays."""
    case = case_named(kind)
    run = case.start(case.build(lab, "plain"))
    run.run()
    old = [c.seq for c in run.history()]
    back = old[1]
    run.rewind(back)
    assert run.head == back and run.status != "done"
    run.step()
    assert run.head not in old, (kind, run.head, old)
    run.run()
    assert (run.status, run.output) == ("done", case.expected("plain")), (kind, run.error)
    every = {c.seq for c in run.history(all_branches=True)}
    assert set(old) <= every and len(every) > len(old)


def test_fork(lab, kind):
    """A fork from a checkpoint is a new run that reaches the same end; the original is untouched."""
    case = case_named(kind)
    run = case.start(case.build(lab, "plain"))
    run.run()
    seqs = [c.seq for c in run.history()]
    fork = run.fork(seqs[1])
    assert fork.id != run.id
    fork.run()
    assert (fork.status, fork.output) == ("done", case.expected("plain")), (kind, fork.error)
    assert [c.seq for c in run.history()] == seqs and run.status == "done"


def test_consent_gate(lab, kind):
    """The gate variant parks waiting for consent; approve() lets it finish."""
    case = case_named(kind)
    run = case.start(case.build(lab, "gate"))
    run.run()
    assert run.status == "waiting" and run.wait is not None, (kind, run.status, run.error)
    assert run.wait.kind == "consent"
    run.approve(note="fine")
    run.run()
    assert (run.status, run.output) == ("done", case.expected("gate")), (kind, run.error)
    assert [e for e in run.events() if e.kind == "verdict"]


def test_interrupt_and_resume_with(lab, kind):
    """interrupt() parks the run; resume_with(answer) hands the answer to the node that asked."""
    case = case_named(kind)
    run = case.start(case.build(lab, "interrupt"))
    run.run()
    assert run.status == "waiting" and run.wait is not None, (kind, run.status, run.error)
    assert run.wait.kind == "interrupt"
    run.resume_with(ANSWER)
    run.run()
    assert (run.status, run.output) == ("done", case.expected("interrupt")), (kind, run.error)


def test_stream(lab, kind):
    """run.stream() drives the run and yields its stations' starts and finishes, then Completed."""
    case = case_named(kind)
    run = case.start(case.build(lab, "plain"))
    events = list(run.stream())
    assert isinstance(events[-1], Completed), (kind, events[-3:])
    assert any(isinstance(e, NodeStarted) for e in events)
    assert sum(isinstance(e, NodeFinished) for e in events) >= 2
    assert (run.status, run.output) == ("done", case.expected("plain"))


def test_retry_policy(lab, kind):
    """A station with Retry(max_attempts=3) that fails twice succeeds on its third try."""
    case = case_named(kind)
    run = case.start(case.build(lab, "retry"))
    run.run()
    assert (run.status, run.output) == ("done", case.expected("retry")), (kind, run.status, run.error)
    assert len(run.events("retry")) == FAILS_BEFORE_SUCCESS


def test_run_timeout(lab, kind, tmp_path):
    """A run timeout cancels the station in flight and fails the run; run() after that finishes it."""
    case = case_named(kind)
    release = tmp_path / "release"
    run = case.start(case.build(lab, "slow", slow=Slow(release=os.fspath(release))))
    run.run(timeout=0.5)
    assert run.status == "failed", (kind, run.status)
    assert (run.error or {}).get("type", "").endswith("RunTimeout"), (kind, run.error)
    release.write_text("go")
    run.run()
    assert (run.status, run.output) == ("done", case.expected("slow")), (kind, run.error)


def test_step_limit(lab, kind):
    """A run that never ends stops at the step limit, failed with StepLimitError at its last checkpoint."""
    case = case_named(kind)
    run = case.start(case.build(lab, "loop"))
    run.run(step_limit=4)
    assert run.status == "failed", (kind, run.status)
    assert (run.error or {}).get("type", "").endswith("StepLimitError"), (kind, run.error)
    head = run.head
    run.run(step_limit=2)
    assert run.status == "failed" and run.head > head


CHILDREN: dict[str, tuple[Any, dict[str, Any]]] = {}
"""The child graph and its run_subgraph arguments, by parent graph name."""


@dataclass
class Calls:
    note: str = ""


@dataclass
class CallChild(BaseNode[Calls, None, Any]):
    async def run(self, ctx: GraphRunContext[Calls, None]) -> Report:
        graph, kwargs = CHILDREN[ctx.state.note]
        return Report(result=await run_subgraph(graph, **kwargs))


@dataclass
class Report(BaseNode[Calls, None, Any]):
    result: Any = None

    async def run(self, ctx: GraphRunContext[Calls, None]) -> End[Any]:
        return End(self.result)


def _parent(lab: Lab, kind: str, variant: str) -> Any:
    case = case_named(kind)
    child = case.build(lab, variant)
    name = f"parent_of_{kind}_{variant}"
    CHILDREN[name] = (child, case.subgraph_call(child))
    parent = lab.graph(name, state_type=Calls, output_type=object)
    parent.node(CallChild)
    parent.node(Report)
    return parent.start(CallChild(), state=Calls(note=name))


def test_subgraph_child(lab, kind):
    """A run of this kind is a run_subgraph child: its output is the call's value, with lineage."""
    parent = _parent(lab, kind, "plain")
    parent.run()
    assert (parent.status, parent.output) == ("done", case_named(kind).expected("plain")), (kind, parent.error)
    children = [r for r in lab.lineage(parent.id) if r.run_id != parent.id]
    assert children and children[0].status == "done"


def test_subgraph_child_gate_parks_the_parent(lab, kind):
    """A consent gate inside the child parks the parent; approving the parent finishes both."""
    parent = _parent(lab, kind, "gate")
    parent.run()
    assert parent.status == "waiting" and parent.wait is not None, (kind, parent.status, parent.error)
    assert parent.wait.kind == "consent"
    parent.approve()
    parent.run()
    assert (parent.status, parent.output) == ("done", case_named(kind).expected("gate")), (kind, parent.error)
