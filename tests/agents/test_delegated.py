"""Delegated agent stations in the lab's process: one test per sentence of seed 001 "Delegated Agent
Macro-Nodes" (and the Stasis sentences it points to), each quoted in its docstring.

Every agent is a pydantic-ai `Agent` on `FunctionModel` (tests/agents/agent_defs.py): no network.
"""

from __future__ import annotations

import threading
import time

import pytest

from lab.agents import AgentJobStateError, AgentRequestConflict, AgentRuntimeError, DelegatedJobFailed

from .graphs import Essay, declare


def _until(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def test_one_typed_opaque_station(lab):
    """ "DelegatedAgentNode is one typed opaque station." The manifest lists it as delegated, the drawing
    marks it, and its route gets the agent's result typed (a Plan, not a dict)."""
    g = declare(lab)
    kinds = {s.node_id: s.kind for s in g.manifest.stations}
    assert kinds == {"Outline": "delegated", "Publish": "node"}
    assert 'Outline [label="Outline\\nagent"' in g.render() and "shape=component" in g.render()
    assert "class Outline delegated" in g.mermaid()
    run = g.start(g.nodes["Outline"]())
    run.run()
    assert run.status == "done" and run.output == "Durable agents: park, adopt"
    assert run.state.points == ["park", "adopt"]


def test_graph_owns_routing_not_the_agents_loop(lab):
    """ "Graph owns purpose and result routing, not the foreign planner, subagents, tool loop, or events."
    The agent's tool call and text are the job's messages; the run's events are only the station's
    (its job's two model requests are recorded calls of the station: docs/replay.md)."""
    declare(lab)
    run = lab.graphs["essay"].start(_outline(lab))
    run.run()
    assert [e.kind for e in run.events()] == [
        "started", "entered", "waiting", "verdict", "entered", "recorded", "recorded", "settled", "entered", "settled", "done"
    ]
    messages = run.job.messages()
    calls = [p for m in messages for p in m["parts"] if p["kind"] == "tool-call"]
    assert [c["tool"] for c in calls] == ["lookup", "final_result"]
    assert any(p.get("content") == "Looking up the topic." for m in messages for p in m["parts"])
    assert run.job.usage["total_tokens"] > 0 and run.job.usage["tool_calls"] == 1
    assert run.history()[-1].state["title"] == "Durable agents"  # the graph routed the result


def _outline(lab, name: str = "essay"):
    return lab.graphs[name].nodes["Outline"]()


def test_request_names_request_run_step_runtime_containment_prompt_inputs(lab):
    """ "DelegatedAgentRequest names request/run/step, exact runtime adapter, read/candidate/verify
    containment, bounded prompt, and immutable input ArtifactRefs." and "Runtime selection is exact-name
    only, not Dispatcher grant or Orchestrator capacity" """
    g = declare(lab)
    run = g.start(_outline(lab), state=Essay(topic="kites"))
    run.run()
    job = run.job.record
    wait = run.waits()[0]
    assert job.request_id == f"job-{run.id.removeprefix('run-')}-{wait.checkpoint_seq}"
    assert (job.run_id, job.node_id, job.wait_owner, job.checkpoint_seq) == (run.id, "Outline", wait.owner, 1)
    assert job.runtime == "planner" and job.request["containment"] == "read"
    assert job.request["prompt"] == "Outline an essay about kites" and job.request["inputs"] == {"topic": "kites"}
    assert job.request["result_type"] == "Plan"
    rows = lab.sql("select runtime, request->>'prompt' from jobs where run_id = ?", [run.id]).fetchall()
    assert rows == [("planner", "Outline an essay about kites")]

    # exact runtime: an unknown name fails the station before anything is submitted (no fallback)
    other = declare(lab, runtime="plannr", name="typo")
    bad = other.start(_outline(lab, "typo"))
    bad.run()
    assert bad.status == "failed" and "no agent runtime is registered as 'plannr'" in bad.error["message"]
    assert lab.agents.jobs(run_id=bad.id) == []
    # bounded prompt
    long = g.start(_outline(lab), state=Essay(topic="x" * 30_000))
    long.run()
    assert long.status == "failed" and "bounded to 20000" in long.error["message"]


def test_lifecycle_every_transition_is_an_event_and_a_row(lab):
    """ "AgentJob follows: QUEUED → ADMITTED → PREPARING → RUNNING → terminal" """
    run = declare(lab).start(_outline(lab))
    run.run()
    assert run.job.transitions() == ["QUEUED", "ADMITTED", "PREPARING", "RUNNING", "SUCCEEDED"]
    rows = lab.sql(
        "select from_status, to_status from job_events where request_id = ? and kind = 'transition' order by seq",
        [run.job.request_id],
    ).fetchall()
    assert rows == [(None, "QUEUED"), ("QUEUED", "ADMITTED"), ("ADMITTED", "PREPARING"), ("PREPARING", "RUNNING"),
                    ("RUNNING", "SUCCEEDED")]  # fmt: skip
    assert lab.sql("select status from jobs").fetchall() == [("SUCCEEDED",)]


def test_failure_terminals_fail_the_station_naming_them(lab):
    """ "Terminals are SUCCEEDED, FAILED, CANCELLED, TIMED_OUT, LOST." A failure terminal fails the
    station with that terminal named; run.retry() submits the request again as a new job."""
    failed = declare(lab, runtime="broken", name="broken").start(_outline(lab, "broken"))
    failed.run()
    assert failed.status == "failed" and failed.error["type"].endswith("DelegatedJobFailed")
    assert "ended FAILED: the model service answered 500" in failed.error["message"]
    first = failed.job.request_id
    failed.retry()  # the station parks again at a new checkpoint: a new request id
    assert failed.status == "failed" and failed.job.request_id != first
    assert [j.status for j in lab.agents.jobs(run_id=failed.id)] == ["FAILED", "FAILED"]

    timed = declare(lab, runtime="slow", name="timed", timeout=0.3).start(_outline(lab, "timed"))
    timed.run()
    assert timed.job.status == "TIMED_OUT" and "ended TIMED_OUT" in timed.error["message"]


def test_request_id_is_the_idempotency_key(lab):
    """ "Request id is idempotency key: different reuse fails." The same request returns the existing job."""
    first = lab.agents.submit("req-1", "planner", {"prompt": "Outline kites"})
    first.wait()
    again = lab.agents.submit("req-1", "planner", {"prompt": "Outline kites"})
    assert again.request_id == "req-1" and again.status == "SUCCEEDED"
    assert len(lab.agents.jobs()) == 1 and again.transitions().count("RUNNING") == 1  # not run twice
    with pytest.raises(AgentRequestConflict, match="already names another request"):
        lab.agents.submit("req-1", "planner", {"prompt": "Outline boats"})
    with pytest.raises(AgentRuntimeError, match="no agent runtime is registered as 'nobody'"):
        lab.agents.submit("req-2", "nobody", {"prompt": "x"})


def test_first_terminal_wins_late_results_are_inert(lab):
    """ "For result adoption and ordinary polling, the first admitted terminal wins and late results are
    inert." A result delivered after the adopted one is recorded as an inert event, never applied."""
    run = declare(lab).start(_outline(lab))
    run.run()
    rid = run.job.request_id
    late = lab.agents.deliver(rid, "SUCCEEDED", output={"title": "Late", "points": ["x"]}, by="late worker")
    assert late is False
    assert run.job.output == {"title": "Durable agents", "points": ["park", "adopt"]}
    inert = [e for e in run.job.events() if e.kind == "inert"]
    assert len(inert) == 1 and inert[0].payload["output"]["title"] == "Late"
    assert run.output == "Durable agents: park, adopt" and run.waits()[0].resolution["status"] == "SUCCEEDED"
    assert lab.sql("select count(*) from job_events where kind = 'inert'").fetchall() == [(1,)]


def test_parks_durably_before_the_job_runs(lab, release):
    """ "Gate or DelegatedAgentNode automatically selects the durable tier." and "the owning station persists
    ServiceJobAttempt@1 before first submit, checkpoints the same owner, then parks." """
    run = declare(lab, runtime="slow").start(_outline(lab))
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    cp = lab.store.checkpoint(run.id, 1)
    wait = lab.store.waits(run.id)[0]
    job = run.job.record
    assert cp.status == "waiting" and [p.node_id for p in cp.next] == ["Outline"]
    assert wait.kind == "delegate" and job.wait_owner == wait.owner and job.checkpoint_seq == cp.seq
    assert wait.details["request_id"] == job.request_id
    parked = run.events("waiting")[0]
    release.touch()
    t.join(120)
    assert job.created_at <= parked.created_at  # the job is stored before the park that waits on it
    assert run.status == "done"


def test_explicit_cancel_contains_the_runtime_then_records_cancelled(lab, release):
    """ "Explicit cancellation still contains the owning runtime" (an in-process job's task is cancelled
    before CANCELLED is recorded); the station then fails naming CANCELLED."""
    run = declare(lab, runtime="slow").start(_outline(lab))
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    job = run.job
    job.cancel()
    t.join(120)
    assert job.status == "CANCELLED" and not lab.agents._tasks
    assert run.status == "failed" and "ended CANCELLED" in run.error["message"]
    with pytest.raises(AgentJobStateError, match="already ended CANCELLED"):
        job.cancel()
    with pytest.raises(DelegatedJobFailed):
        raise DelegatedJobFailed("x", request_id=job.request_id, status="CANCELLED")


def test_cancelling_the_run_contains_its_job(lab, release):
    """Cancelling the run while its station's job runs stops the job first (seed 001 "API cancellation
    follows Workers")."""
    run = declare(lab, runtime="slow").start(_outline(lab))
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    run.cancel()
    t.join(120)
    assert run.status == "cancelled" and run.job.status == "CANCELLED"


def test_admitted_runtime_binding_is_not_redirected(lab, release):
    """ "Optional delegated_rite@2 retains the configured exact runtime/profile in admitted Run intent and
    state. Its checkpoint must match that binding; current Settings cannot redirect resumed work." The
    waiting checkpoint's wait and the job name the runtime; registering another agent under that name
    while the job runs does not change the job's work."""
    from .agent_defs import planner

    run = declare(lab, runtime="slow").start(_outline(lab))
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    assert run.wait.details["runtime"] == "slow" and run.job.record.runtime == "slow"
    lab.agents.register("slow", planner)  # the "settings" change under the running job
    release.touch()
    t.join(120)
    assert run.status == "done" and run.output == "Slow: done"  # the admitted agent's result


def test_a_result_type_set_on_the_class_later_is_the_one_the_next_station_validates_against(lab):
    """The station's result type and its validator are made once per class (issue 27 item 4), and made
    again when the class's `result_type` (or `route`) is replaced: the next run validates against it."""
    g = declare(lab)
    outline = g.nodes["Outline"]
    first = g.start(outline())
    first.run()
    assert first.status == "done"
    outline.result_type = int  # the agent's Plan does not fit an int
    try:
        second = g.start(outline())
        second.run()
        assert second.status == "failed" and "does not fit" in second.error["message"]
        assert second.job.status == "SUCCEEDED" and second.job.record.request["result_type"] == "int"
    finally:
        outline.result_type = None
