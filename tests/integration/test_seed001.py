"""Seed 001, sentence by sentence: the places the lab once departed from it (issue 20)."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pytest
from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext, StepContext
from pydantic_graph.join import reduce_list_append

from lab import Budgets, Lab
from lab.errors import ArgumentError, CheckpointError, WaitReentryError
from lab.records import PendingStation
from tests.conftest import Counter, Inc, declare_counter
from tests.integration.gate_graphs import (
    Draft,
    Hop,
    Mail,
    Probe,
    Work,
    declare_hops,
    declare_mail,
    declare_work,
)


def test_a_different_checkpoint_under_a_taken_id_fails_explicitly(db_path):
    """Seed 001: "Unknown nodes or node fields, duplicate snapshot ids, and multiple created cursors
    fail explicitly." The same journal line replayed twice stays one checkpoint; a different one
    under an id already stored is a CheckpointError naming both, and nothing is folded."""
    lab = Lab(db_path)
    run = declare_counter(lab).start(Inc(by=2), state=Counter()).run()
    store = lab.store
    stored = store.checkpoint(run.id, 2)
    assert stored is not None
    same = store.checkpoint_row(stored)
    store.write([same])
    store.write([same])
    store.fold()  # replaying the same checkpoint twice changes nothing
    assert store.checkpoint(run.id, 2) == stored
    assert len(store.checkpoints(run.id)) == 7

    other = dict(same, state={"count": 999, "seen": []})
    store.write([other])
    with pytest.raises(CheckpointError) as caught:
        store.fold()
    message = str(caught.value)
    assert f"run {run.id} checkpoint 2" in message
    assert '"count":999' in message and '"count":2' in message  # both checkpoints named
    assert "stored" in message and "journal line" in message
    with pytest.raises(CheckpointError, match="checkpoint 2"):
        store.checkpoint(run.id, 2)  # a read folds first: it refuses too, never shows either silently
    with pytest.raises(CheckpointError):
        lab.close()  # the journal is kept, the file released
    with pytest.raises(CheckpointError, match="checkpoint 2"):
        Lab(db_path)


def test_two_different_journal_lines_under_one_id_fail_on_open(db_path):
    """Seed 001: "duplicate snapshot ids ... fail explicitly": two journal lines that disagree
    about one new checkpoint are refused when the store is opened, naming both lines."""
    lab = Lab(db_path)
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    store = lab.store
    cp = store.checkpoint(run.id, 0)
    assert cp is not None
    row = dict(store.checkpoint_row(cp), seq=50)
    store.write([row])
    store.write([dict(row, state={"count": 7, "seen": []})])
    with pytest.raises(CheckpointError, match=r"checkpoint 50: .*journal line \d+ .*journal line \d+"):
        store.fold()
    with pytest.raises(CheckpointError):
        lab.close()  # the journal is kept, the file released
    with pytest.raises(CheckpointError, match="checkpoint 50"):
        Lab(db_path)

def test_more_than_one_created_cursor_in_a_serial_snapshot_fails_explicitly(db_path):
    """Seed 001: "Unknown nodes or node fields, duplicate snapshot ids, and multiple created cursors
    fail explicitly." A serial checkpoint naming two next stations (two cursors) is refused where it
    is decoded: rewind, fork, checkpoint(), peek's next, and resume in a new process; the store is
    unchanged (no `resumed` event), and the error says what to do."""
    lab = Lab(db_path)
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    run.step()
    run.step()
    store = lab.store
    head = store.checkpoint(run.id, 2)
    assert head is not None and len(head.next) == 1  # one cursor: the serial form
    two = dataclasses.replace(head, seq=3, parent_seq=2, next=(head.next[0], PendingStation("Check", {"limit": 6})))
    store.write([store.checkpoint_row(two), store.update_row(run.id, status="running", head_seq=3)], sync=True)
    for refused in (lambda: run.rewind(3), lambda: run.fork(3), lambda: run.checkpoint(3), lambda: lab.peek(run.id).next):
        with pytest.raises(CheckpointError, match=r"checkpoint 3: it names 2 next stations \(Inc, Check\).*created cursor"):
            refused()
    assert lab.peek(run.id).next_stations == ("Inc", "Check")  # reading the ids still works
    events = lab.events(run.id)
    lab.close()
    again = Lab(db_path)
    declare_counter(again)
    with pytest.raises(CheckpointError, match=r"lab\.fork\(.*, seq\)\) or rewind"):
        again.resume(run.id)
    assert again.events(run.id) == events  # refused before anything was written or claimed
    assert again.fork(run.id, 2).run().output == 6  # the earlier checkpoints stay forkable
    again.close()


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# -- nodes run in the caller's context ---------------------------------------------------------

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


@dataclass
class Seen:
    ids: list[str] = field(default_factory=list)


@dataclass
class First(BaseNode[Seen, None, list[str]]):
    async def run(self, ctx: GraphRunContext[Seen, None]) -> Second:
        ctx.state.ids.append(request_id.get())
        request_id.set("set-in-a-node")  # a copy: never leaks back to the caller
        return Second()


@dataclass
class Second(BaseNode[Seen, None, list[str]]):
    async def run(self, ctx: GraphRunContext[Seen, None]) -> End[list[str]]:
        ctx.state.ids.append(request_id.get())
        return End(list(ctx.state.ids))


def _context_graph(lab: Lab) -> Any:
    g = lab.graph("ctx", state_type=Seen, output_type=list[str])
    g.node(First)
    g.node(Second)
    return g


def _mapped_context_graph() -> Any:
    g = GraphBuilder(state_type=Seen, input_type=list[int], output_type=list[str])

    @g.step
    async def look(ctx: StepContext[Seen, None, int]) -> str:
        return f"{ctx.inputs}:{request_id.get()}"

    collect = g.join(reduce_list_append, initial_factory=list[str], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(look), g.edge_from(look).to(collect), g.edge_from(collect).to(g.end_node))
    return g.build()


def test_nodes_see_the_callers_context_in_step_and_run(lab):
    """Seed 003: "Nodes run in the coroutine context of the caller." A ContextVar set in the cell is
    what every node sees, with run.step(), run.run() and their async forms; a node's own set()
    does not leak back to the caller."""
    g = _context_graph(lab)
    token = request_id.set("req-step")
    try:
        run = g.start(First(), state=Seen())
        run.step()
        run.step()
        assert run.status == "done" and run.output == ["req-step", "req-step"]
        request_id.set("req-run")
        assert g.start(First(), state=Seen()).run().output == ["req-run", "req-run"]
        assert request_id.get() == "req-run"

        async def in_a_coroutine() -> list[str]:
            request_id.set("req-async")
            run = g.start(First(), state=Seen())
            await run.astep()
            await run.arun()
            return run.output

        assert asyncio.run(in_a_coroutine()) == ["req-async", "req-async"]
    finally:
        request_id.reset(token)


def test_parallel_tasks_see_the_callers_context(lab):
    """Seed 003: "Nodes run in the coroutine context of the caller": every task of a mapped
    super-step sees the caller's ContextVar, stepped or run."""
    lg = lab.adopt(_mapped_context_graph(), name="ctx-map")
    token = request_id.set("req-map")
    try:
        stepped = lg.start(inputs=[1, 2, 3], state=Seen())
        stepped.step()  # the start routes (not a step), then the mapped super-step
        run = lg.start(inputs=[1, 2, 3], state=Seen())
        run.run()
        for r in (stepped, run):
            assert r.status == "done" and sorted(r.output) == ["1:req-map", "2:req-map", "3:req-map"]
    finally:
        request_id.reset(token)


def test_an_opentelemetry_span_set_in_the_cell_is_current_in_the_node(lab):
    """Seed 003: "Nodes run in the coroutine context of the caller": a tracing span opened in the
    cell is the current span inside the node (only when OpenTelemetry is installed)."""
    trace = pytest.importorskip("opentelemetry.trace")
    seen: list[Any] = []

    @dataclass
    class Look(BaseNode[Seen, None, int]):
        async def run(self, ctx: GraphRunContext[Seen, None]) -> End[int]:
            seen.append(trace.get_current_span())
            return End(1)

    g = lab.graph("otel", state_type=Seen, output_type=int)
    g.node(Look)
    span = trace.NonRecordingSpan(trace.SpanContext(trace_id=7, span_id=9, is_remote=False))
    with trace.use_span(span):
        g.start(Look(), state=Seen()).run()
    assert seen == [span]


# -- consent re-entry checks the station and owner before the first node -----------------------


def test_an_answered_gate_re_enters_only_its_own_station(db_path):
    """Seed 001: "before the first node executes, its Gate/delegated station kind and retained owner
    id must match the Run's single current wait owner." An approved gate whose head checkpoint was
    edited by hand to enter another station is refused with a named error; nothing changes."""
    lab = Lab(db_path)
    run = declare_mail(lab).start(Draft(), state=Mail())
    run.run()
    run.resume_with("EU")
    run.run()
    assert run.status == "waiting" and run.wait is not None and run.wait.node_id == "ConfirmSend"
    head, owner = run.head, run.wait.owner
    run.approve(note="ok")
    lab.close()

    con = duckdb.connect(db_path)
    con.execute(
        "UPDATE checkpoints SET next = ? WHERE run_id = ? AND seq = ?",
        [json.dumps([{"node_id": "Send", "fields": {}}]), run.id, head],
    )
    con.close()

    lab = Lab(db_path)
    declare_mail(lab)
    resumed = lab.resume(run.id)
    events = len(resumed.events())
    with pytest.raises(WaitReentryError, match=rf"{owner} belongs to station ConfirmSend.*would enter Send"):
        resumed.run()
    assert resumed.status == "queued" and resumed.head == head
    assert len(resumed.events()) == events and lab.store.checkpoint(run.id, head + 1) is None
    assert [w.owner for w in resumed.waits()][-1] == owner
    assert resumed.state.sent is False
    lab.close()


def test_an_answered_gate_re_enters_its_station_after_a_restart(db_path):
    """Seed 001: "one guarded verdict edge admits QUEUED and the next worker resumes the same Graph":
    the unedited head re-enters the gate with the verdict."""
    lab = Lab(db_path)
    run = declare_mail(lab).start(Draft(), state=Mail())
    run.run()
    run.resume_with("EU")
    run.run()
    run.approve(note="ok")
    lab.close()
    lab = Lab(db_path)
    declare_mail(lab)
    resumed = lab.resume(run.id).run()
    assert resumed.status == "done" and resumed.state.log == ["verdict:True:ok"]
    lab.close()


# -- capability budgets are defaults, recorded with the run ---------------------------------------


def test_capability_budgets_are_settable_per_lab_and_per_graph(lab):
    """Seed 001: "Default limits are eight hardware resumes per Run and three consecutive requests
    for one capability; exceeding either fails." Defaults: a lab and a graph set their own."""
    lab.budgets = Budgets(resumes=2)
    lab.provide("gpu", lambda wait: "gpu-0")
    run = declare_hops(lab).start(Hop(), state=Work())
    assert run.budgets == Budgets(resumes=2, consecutive=3)
    run.run()
    assert run.status == "failed" and "used its 2 capability resumes" in run.error["message"]

    g = lab.graph("hops", state_type=Work, output_type=str, budgets=Budgets(resumes=4))
    run = g.start(Hop(), state=Work()).run()
    assert run.status == "failed" and "used its 4 capability resumes" in run.error["message"]
    assert run.events("started")[0].payload["budgets"] == {"resumes": 4, "consecutive": 3}

    lab.provide("gpu", lambda wait: "the wrong device")
    g = declare_work(lab)
    g.budgets = Budgets(consecutive=1)
    run = g.start(Probe(), state=Work()).run()
    assert run.status == "failed" and "2 times in a row (the budget is 1)" in run.error["message"]

    with pytest.raises(ArgumentError, match="Budgets\\(resumes=0\\)"):
        Budgets(resumes=0)
    with pytest.raises(ArgumentError, match="budgets"):
        lab.graph("hops", state_type=Work, output_type=str, budgets={"resumes": 3})


def test_a_resume_after_a_restart_keeps_the_runs_budgets(db_path):
    """Seed 001: "The counters live in checkpointed Run state, so a durable park or replacement
    GraphRunner cannot reset the budget." The limits a run started with are recorded with it:
    reopened under a lab with other defaults, and forked, it keeps them."""
    lab = Lab(db_path, budgets=Budgets(resumes=3))
    run = declare_hops(lab).start(Hop(), state=Work())
    run.run()
    run.grant("gpu", "gpu-0")
    run.run()
    assert run.status == "waiting" and run.history()[-1].counters["capability_resumes"] == 2
    lab.close()

    lab = Lab(db_path)  # the defaults (8) here
    declare_hops(lab)
    resumed = lab.resume(run.id)
    assert resumed.budgets == Budgets(resumes=3)
    resumed.grant("gpu", "gpu-0")
    resumed.run()
    assert resumed.status == "waiting"
    resumed.grant("gpu", "gpu-0")
    resumed.run()
    assert resumed.status == "failed" and "used its 3 capability resumes" in resumed.error["message"]
    child = resumed.fork(0)
    assert child.budgets == Budgets(resumes=3)
    assert lab.graph("hops", state_type=Work, output_type=str).start(Hop(), state=Work()).budgets == Budgets()
    lab.close()


# -- batch durability records the attempt before the call ----------------------------------------

KILLED_MID_STATION = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from dataclasses import dataclass
from pydantic_graph import BaseNode, End, GraphRunContext
from lab import Lab

@dataclass
class Ticks:
    n: int = 0

@dataclass
class Tick(BaseNode[Ticks, None, int]):
    async def run(self, ctx: GraphRunContext[Ticks, None]) -> "Tick | End[int]":
        ctx.state.n += 1
        if ctx.state.n == 5:
            os.kill(os.getpid(), signal.SIGKILL)  # killed mid-station, by the station itself
        return Tick()

lab = Lab({db!r}, durability="batch", batch_size=100)
g = lab.graph("ticks", state_type=Ticks, output_type=int)
g.node(Tick)
run = g.start(Tick(), state=Ticks())
print(run.id, flush=True)
run.run()
"""


def test_a_batch_run_killed_mid_station_is_interrupted_not_replayed_blind(db_path):
    """Seed 001: "process death in RUNNING ... otherwise startup contains correlated effects and
    records failure. It never guesses a replay." With durability="batch" the station in flight is
    recorded before it runs: after a SIGKILL mid-station the run is `interrupted` at that station,
    and the settled boundaries before it are all there."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_MID_STATION.format(repo=REPO, db=db_path)], capture_output=True, text=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    run_id = proc.stdout.split()[0]
    lab = Lab(db_path)
    try:
        rec = lab.run(run_id)
        assert rec.status == "interrupted" and rec.head_seq == 4
        assert [c.seq for c in lab.store.checkpoints(run_id)] == [0, 1, 2, 3, 4]
        entered = lab.store.events(run_id, kind="entered")
        settled = lab.store.events(run_id, kind="settled")
        assert len(entered) == 5 and len(settled) == 4
        assert entered[-1].checkpoint_seq == 4  # the attempt from the head, never settled
        assert {e.attempt for e in settled} == {e.attempt for e in entered[:4]}
        interrupted = lab.store.events(run_id, kind="interrupted")  # the history names the lost attempt
        assert [(e.node_id, e.attempt) for e in interrupted] == [("Tick", entered[-1].attempt)]
    finally:
        lab.close()
