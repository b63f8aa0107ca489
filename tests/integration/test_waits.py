"""Gates, interrupt(), breakpoints and capability waits, with their events and store rows.

Each wait kind is driven in-process against a DuckDB file and `:memory:`; the gate is also
parked in one real process and approved in another.
"""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import (
    GraphDefinitionError,
    Lab,
    RevisionMismatchError,
    RunStateError,
    WaitError,
    WaitOwnerError,
    interrupt,
)
from tests.conftest import Inc, declare_counter
from tests.integration.gate_graphs import (
    Draft,
    Hop,
    Mail,
    Probe,
    Work,
    declare_hops,
    declare_mail,
    declare_work,
    worker_command,
)

pytestmark = pytest.mark.filterwarnings("error")


def parked_at_gate(lab: Lab):
    g = declare_mail(lab)
    run = g.start(Draft(), state=Mail())
    run.run()
    run.resume_with("eu")
    run.run()
    assert run.status == "waiting" and run.wait.kind == "consent"
    return run


def wait_rows(lab: Lab, run_id: str) -> list[tuple]:
    return lab.sql(
        "select kind, node_id, checkpoint_seq, prompt, details, resolution->>'approved', resolution->>'note' "
        "from waits where run_id = ? order by checkpoint_seq",
        [run_id],
    ).fetchall()


# -- gates ----------------------------------------------------------------------------------


def test_gate_parks_with_a_waiting_checkpoint_and_a_wait_record(lab):
    run = parked_at_gate(lab)
    wait = run.wait
    assert (wait.node_id, wait.prompt, wait.details) == (
        "ConfirmSend",
        "Send the draft to the customer?",
        {"draft": "Hello from eu"},
    )
    assert wait.open and wait.checkpoint_seq == run.head
    head = run.checkpoint(run.head)
    assert head.status == "waiting" and head.next_stations == ("ConfirmSend",)
    assert lab.run(run.id).status == "waiting"
    ev = run.events()[-1]
    assert (ev.kind, ev.node_id, ev.checkpoint_seq) == ("waiting", "ConfirmSend", run.head)
    assert ev.payload == {
        "kind": "consent",
        "owner": wait.owner,
        "prompt": "Send the draft to the customer?",
        "details": {"draft": "Hello from eu"},
    }
    assert [w for w in lab.waiting() if w.run_id == run.id] == [wait]
    # a parked run holds nothing: no task, no lock
    assert run._task is None and not run._busy.locked()


def test_approve_records_one_verdict_then_decide_routes(lab):
    run = parked_at_gate(lab)
    gate_seq = run.head
    owner = run.wait.owner
    answered = run.approve(note="looks good")
    assert run.status == "queued" and answered.approved is True and answered.note == "looks good"
    verdict = run.events()[-1]
    assert (verdict.kind, verdict.checkpoint_seq) == ("verdict", gate_seq)
    assert verdict.payload == {"kind": "consent", "owner": owner, "approved": True, "note": "looks good"}
    run.run()
    assert run.status == "done" and run.output == "Hello from eu"
    assert run.state.log == ["verdict:True:looks good"] and run.state.sent
    assert wait_rows(lab, run.id)[-1] == (
        "consent", "ConfirmSend", gate_seq, "Send the draft to the customer?", '{"draft":"Hello from eu"}', "true", "looks good",
    )
    assert lab.sql("select count(*) from events where kind = 'verdict' and run_id = ?", [run.id]).fetchall() == [(2,)]


def test_an_answer_waits_for_the_drive_that_parked_to_let_go_of_the_run(lab, monkeypatch):
    """A view shows `waiting` (and enables Approve) from the park's write on, while the drive still
    holds the run for its last steps: a click then is answered once the drive lets go, not refused."""
    run = parked_at_gate(lab)
    run._busy.acquire()  # the drive that parked, not yet gone: it lets go half a second later
    finisher = threading.Timer(0.5, run._busy.release)
    finisher.start()
    answered = run.approve(note="clicked early")
    finisher.join(30)
    assert answered.approved is True and run.status == "queued"
    run.run()
    assert run.status == "done" and run.state.log == ["verdict:True:clicked early"]
    # a drive that never lets go: after the grace the answer is refused as before, and nothing is written
    other = parked_at_gate(lab)
    monkeypatch.setattr("lab.run_driver.PARK_GRACE", 0.05)
    other._busy.acquire()
    try:
        with pytest.raises(RunStateError, match="running in another task"):
            other.approve()
    finally:
        other._busy.release()
    assert other.status == "waiting" and other.wait.open


def test_deny_routes_back_and_the_gate_parks_again_with_a_new_owner(lab):
    run = parked_at_gate(lab)
    first = run.wait.owner
    run.deny(note="too short")
    run.run()  # decide -> Draft(note=...) -> interrupt again
    assert run.wait.kind == "interrupt"
    run.resume_with("us")
    run.run()
    assert run.wait.kind == "consent" and run.wait.owner != first
    assert run.wait.details == {"draft": "Hello from us (too short)"}
    run.approve()
    assert run.run().output == "Hello from us (too short)"
    approved = [r[5] for r in wait_rows(lab, run.id) if r[0] == "consent"]
    assert approved == ["false", "true"]


def test_stepping_an_unanswered_gate_is_refused_with_what_to_do(lab):
    run = parked_at_gate(lab)
    before = lab.store.table_snapshot()
    with pytest.raises(WaitError, match=r"waiting on a consent at ConfirmSend .*run\.approve"):
        run.run()
    with pytest.raises(WaitError):
        run.step()
    assert lab.store.table_snapshot() == before


def test_bad_verdicts_are_refused_and_change_nothing(lab):
    run = parked_at_gate(lab)
    before = lab.store.table_snapshot()
    with pytest.raises(WaitError, match="note must be a string or None, got int"):
        run.deny(note=5)
    with pytest.raises(WaitError, match=r"waits on a consent .*resume_with\(\) does not answer; use run\.approve"):
        run.resume_with("x")
    with pytest.raises(WaitOwnerError, match="current wait is"):
        run.approve(owner="wait-someone-else")
    assert lab.store.table_snapshot() == before
    run.approve(owner=run.wait.owner)
    after_first = lab.store.table_snapshot()
    with pytest.raises(WaitError, match="already answered \\(approved\\); a wait takes one answer"):
        run.approve()
    with pytest.raises(WaitError, match="already answered"):
        run.deny(note="changed my mind")
    assert lab.store.table_snapshot() == after_first


def test_approving_a_run_that_is_not_waiting_is_refused(lab):
    g = declare_counter(lab)
    run = g.start(Inc(), state=None)
    with pytest.raises(WaitError, match=r"is created, not waiting; there is nothing to approve"):
        run.approve()
    run.run()
    with pytest.raises(WaitError, match="is done, not waiting"):
        run.deny()


def test_a_verdict_after_the_graph_revision_changed_is_refused(lab):
    run = parked_at_gate(lab)
    before = lab.store.table_snapshot()

    @dataclass
    class Send(BaseNode[Mail, None, str]):  # the cell re-run with a new body
        async def run(self, ctx: GraphRunContext[Mail, None]) -> End[str]:
            return End("changed")

    run.graph.node(Send)
    run.graph.build()  # registers the new revision: the graphs table grows, nothing else may
    before["graphs"] = lab.store.table_snapshot()["graphs"]
    with pytest.raises(RevisionMismatchError, match=r"fork"):
        run.approve()
    assert lab.store.table_snapshot() == before


def test_rewinding_onto_a_gate_parks_it_again(lab):
    run = parked_at_gate(lab)
    run.approve(note="ok")
    run.run()
    gate_cp = next(c.seq for c in run.history() if c.status == "waiting" and c.next[0].node_id == "ConfirmSend")
    run.rewind(gate_cp - 1)  # the boundary before the gate
    run.run()
    assert run.status == "waiting" and run.wait.kind == "consent" and run.wait.checkpoint_seq > gate_cp
    run.deny(note="no")
    run.step()
    assert run.next_stations == ("Draft",)


# -- interrupt() -----------------------------------------------------------------------------


def test_interrupt_saves_the_state_the_node_received_and_reruns_it(lab):
    g = declare_mail(lab)
    run = g.start(Draft(), state=Mail())
    result = run.step()
    assert result.outcome == "waiting" and run.status == "waiting"
    assert run.wait.kind == "interrupt" and run.wait.details == {"question": "Which region?"}
    assert run.state.attempts == 0  # the node's partial work is not saved
    assert run.state_at(run.head).attempts == 0
    run.resume_with("eu")
    result = run.step()
    assert result.outcome == "settled" and run.state.region == "eu" and run.state.attempts == 1


def test_several_interrupts_in_one_node_resume_in_order(lab):
    @dataclass
    class Ask(BaseNode[Mail, None, str]):
        async def run(self, ctx: GraphRunContext[Mail, None]) -> End[str]:
            name = interrupt("name?")
            city = interrupt({"q": "city?", "name": name})
            return End(f"{name}/{city}")

    g = lab.graph("ask", state_type=Mail, output_type=str)
    g.node(Ask)
    run = g.start(Ask(), state=Mail())
    run.run()
    assert run.wait.details == "name?" and run.wait.prior == []
    run.resume_with("ada")
    run.run()
    assert run.wait.details == {"q": "city?", "name": "ada"} and run.wait.prior == ["ada"]
    run.resume_with("paris")
    assert run.run().output == "ada/paris"
    assert [w.resolution for w in run.waits()] == [{"answer": "ada"}, {"answer": "paris"}]


def test_interrupt_outside_a_run_is_a_clear_error():
    with pytest.raises(RunStateError, match=r"interrupt\(\) was called outside a running station"):
        interrupt("hello")


def test_resume_with_needs_json_and_an_interrupt_wait(lab):
    g = declare_mail(lab)
    run = g.start(Draft(), state=Mail())
    run.run()
    before = lab.store.table_snapshot()
    with pytest.raises(TypeError, match="JSON-serialisable"):
        run.resume_with(object())
    with pytest.raises(WaitError, match=r"approve\(\) does not answer; use run\.resume_with"):
        run.approve()
    assert lab.store.table_snapshot() == before


# -- breakpoints -----------------------------------------------------------------------------


def test_breakpoints_before_and_after_park_and_continue(lab):
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=None, breakpoints={"before": ["Check"], "after": ["Inc"]})
    assert run.breakpoints == {"before": {"Check"}, "after": {"Inc"}}
    run.run()
    assert run.status == "waiting" and run.wait.kind == "breakpoint"
    assert run.wait.details == {"when": "after", "station": "Inc"} and run.next_stations == ("Check",)
    run.run()  # one stop per boundary: the before-breakpoint on Check is this same boundary
    assert run.status == "waiting" and run.wait.details == {"when": "after", "station": "Inc"}
    assert run.state.count == 4
    run.clear_breakpoint("Inc")
    run.run()
    assert run.wait.details == {"when": "before", "station": "Check"} and run.state.count == 6
    run.clear_breakpoint("Check", when="before")
    assert run.run().status == "done" and run.output == 6
    kinds = [(e.kind, e.payload.get("action"), e.payload.get("kind")) for e in run.events() if e.kind in ("breakpoint", "waiting", "verdict")]
    assert ("breakpoint", "clear", None) in kinds and ("waiting", None, "breakpoint") in kinds
    assert ("verdict", None, "breakpoint") in kinds
    assert lab.run(run.id).breakpoints == {"before": [], "after": []}


def test_set_breakpoint_while_parked_and_unknown_stations(lab):
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=None)
    run.step()
    run.set_breakpoint("Inc", when="before")
    assert lab.run(run.id).breakpoints == {"before": ["Inc"], "after": []}
    run.run()
    assert run.wait.kind == "breakpoint" and run.next_stations == ("Inc",)
    with pytest.raises(GraphDefinitionError, match="has no station 'Nope'"):
        run.set_breakpoint("Nope")
    with pytest.raises(ValueError, match="'before' or 'after'"):
        run.set_breakpoint("Inc", when="during")  # type: ignore[arg-type]
    with pytest.raises(GraphDefinitionError, match=r"breakpoints before \['Nope'\]"):
        g.start(Inc(), state=None, breakpoints={"before": ["Nope"]})
    with pytest.raises(WaitError, match=r"approve\(\) does not answer; use run\.run\(\)"):
        run.approve()


# -- capabilities ----------------------------------------------------------------------------


def test_capability_wait_then_grant_resumes_the_node(lab):
    g = declare_work(lab)
    run = g.start(Probe(), state=Work())
    run.run()
    assert run.status == "waiting" and run.wait.kind == "capability"
    assert run.wait.details == {"capability": "gpu", "details": {"need": "one CUDA device"}}
    with pytest.raises(WaitError, match="waits for capability 'gpu', not 'tpu'"):
        run.grant("tpu")
    with pytest.raises(WaitError, match=r"waiting on a capability .*run\.grant"):
        run.run()
    run.grant("gpu", "gpu-0")
    assert run.run().output == "ran on gpu-0"
    assert run.history()[-1].counters == {"capability_resumes": 1, "consecutive": {}}


def test_a_registered_provider_grants_without_a_person(lab):
    g = declare_work(lab)
    calls = []

    def provider(wait):
        calls.append(wait.details["capability"])
        return "gpu-0"

    lab.provide("gpu", provider)
    run = g.start(Probe(), state=Work())
    assert run.run().output == "ran on gpu-0"
    assert calls == ["gpu"]
    assert [w.resolution["by"] for w in run.waits()] == ["provider"]


def test_consecutive_capability_requests_exhaust_the_budget(lab):
    g = declare_work(lab)
    lab.provide("gpu", lambda wait: "the wrong device")
    run = g.start(Probe(), state=Work())
    run.run()
    assert run.status == "failed"
    assert run.error["type"].endswith("CapabilityBudgetError")
    assert "asked for capability 'gpu' 4 times in a row (the budget is 3)" in run.error["message"]
    assert len(run.waits()) == 3


def test_capability_resumes_are_limited_per_run(lab):
    g = declare_hops(lab)
    lab.provide("gpu", lambda wait: "gpu-0")
    run = g.start(Hop(), state=Work())
    run.run()
    assert run.status == "failed"
    assert "used its 8 capability resumes" in run.error["message"]
    assert run.history()[-1].counters["capability_resumes"] == 8


def test_the_resume_budget_survives_a_reopened_store(tmp_path):
    path = str(tmp_path / "lab.duckdb")
    lab = Lab(path)
    run = declare_hops(lab).start(Hop(), state=Work())
    run_id = run.id
    for i in range(8):
        if i == 4:  # a new process would see the same: the counters come from the checkpoint
            lab.close()
            lab = Lab(path)
            declare_hops(lab)
            run = lab.resume(run_id)
        run.run()
        assert run.status == "waiting", (i, run.error)
        assert run.history()[-1].counters["capability_resumes"] == i + 1
        run.grant("gpu", "gpu-0")
    run.run()
    assert run.status == "failed" and "used its 8 capability resumes" in run.error["message"]
    lab.close()


# -- many parked runs and two real processes ----------------------------------------------------


def test_many_parked_runs_cost_only_store_rows(lab):
    """60 parked runs hold no thread each: no thread alive after parking them was not alive before.

    (Compared as a set, not a count: a thread an earlier test left may end meanwhile. The first
    park starts the lab's one event loop thread, so the threads are taken after it.)
    """
    g = declare_mail(lab)
    first = g.start(Draft(), state=Mail())
    first.run()
    before = set(threading.enumerate())
    runs = [first]
    for _ in range(59):
        r = g.start(Draft(), state=Mail())
        r.run()
        runs.append(r)
    assert set(threading.enumerate()) <= before, set(threading.enumerate()) - before
    assert all(r._task is None and not r._busy.locked() for r in runs)
    assert len([w for w in lab.waiting() if w.kind == "interrupt"]) == 60


def test_a_gate_parked_in_one_process_is_approved_in_another(tmp_path):
    db = tmp_path / "lab.duckdb"
    first = subprocess.run(worker_command(db, "park"), capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    parked = json.loads(first.stdout.strip().splitlines()[-1])
    assert parked["status"] == "waiting" and parked["prompt"] == "Send the draft to the customer?"
    second = subprocess.run(
        worker_command(db, "approve", parked["run_id"], "ship it"), capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr
    done = json.loads(second.stdout.strip().splitlines()[-1])
    assert done == {
        "status": "waiting",
        "wait": parked["wait"],
        "details": {"draft": "Hello from eu"},
        "final": "done",
        "output": "Hello from eu",
    }
    with Lab(str(db)) as lab:
        kinds = [e.kind for e in lab.events(parked["run_id"])]
        assert kinds.count("resumed") == 1 and kinds[-1] == "done"
        rows = lab.sql(
            "select kind, owner, resolution->>'note' from waits where run_id = ? order by checkpoint_seq",
            [parked["run_id"]],
        ).fetchall()
        assert rows[-1] == ("consent", parked["wait"], "ship it")
        assert lab.run(parked["run_id"]).status == "done"
