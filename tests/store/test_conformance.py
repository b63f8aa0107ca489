"""One conformance suite, run against both backends (DuckDB file, PostgreSQL database).

Each test takes `location` (tests/store/conftest.py) and opens `Lab(location)`: the same
assertions hold on the embedded store and on the shared one. What differs by backend is said
where it is tested (and in docs/store.md / docs/scale.md).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from lab import ArgumentError, Lab, RunNotFoundError, StoreQueryError, StoreSchemaError
from lab.errors import StoreError, WaitAnsweredError, WaitError
from lab.records import CheckpointRecord, EventRecord
from lab.store import Store
from lab.store.journal import UnstorableValueError
from lab.store.schema import SCHEMA_VERSION, TABLES
from tests.conftest import Counter, Inc, declare_counter
from tests.store.graphs import Order, Prepare, declare_orders, declare_tally

REPO = Path(__file__).resolve().parents[2]


def _snapshot(lab: Lab) -> dict:
    return lab.store.table_snapshot()


# -- the interface ----------------------------------------------------------------------------


def test_both_backends_implement_the_interface(lab: Lab) -> None:
    assert isinstance(lab.store, Store)
    assert not [m for m in Store.__abstractmethods__ if getattr(type(lab.store), m) is getattr(Store, m)]


def test_postgres_migrations_keep_step_with_duckdb() -> None:
    from lab.store import postgres_schema, schema

    assert len(postgres_schema.MIGRATIONS) == len(schema.MIGRATIONS) == SCHEMA_VERSION


# -- runs ------------------------------------------------------------------------------------


def test_runs_are_stored_listed_and_filtered(lab: Lab) -> None:
    g = declare_counter(lab)
    a = g.start(Inc(by=2), state=Counter())
    b = g.start(Inc(by=5), state=Counter())
    a.run()
    assert [r.run_id for r in lab.runs()] == [a.id, b.id]
    assert [r.run_id for r in lab.runs(status="done")] == [a.id]
    assert [r.run_id for r in lab.runs(status="created")] == [b.id]
    assert lab.runs(graph="other") == []
    rec = lab.run(a.id)
    assert (rec.status, rec.output, rec.head_seq, rec.graph_key, rec.revision) == ("done", 6, 6, "counter", 1)
    assert rec.error is None and rec.parent_run_id is None
    with pytest.raises(RunNotFoundError, match="lab.runs"):
        lab.run("run-nope")
    assert lab.store.manifest("counter", 1).digest == rec.digest


def test_a_run_resumes_from_its_head_in_a_new_lab(location: str) -> None:
    lab = Lab(location)
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    run.run(max_steps=3)
    run_id, head = run.id, run.head
    lab.close()
    lab = Lab(location)
    declare_counter(lab)
    again = lab.resume(run_id)
    assert again.head == head and again.state.count == 4
    again.run()
    assert (again.status, again.output) == ("done", 6)
    assert [k for k in (e.kind for e in again.events()) if k == "resumed"] == ["resumed"]
    lab.close()


# -- the checkpoint tree and time travel -------------------------------------------------------


def test_checkpoint_tree_rewind_fork_and_lineage(lab: Lab) -> None:
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    run.run()
    assert lab.store.seqs(run.id) == list(range(7))
    assert [cp.parent_seq for cp in lab.store.checkpoints(run.id)] == [None, 0, 1, 2, 3, 4, 5]
    run.rewind(2)
    run.run()
    parents = lab.store.parents(run.id)
    assert parents[7] == 2 and lab.store.seqs(run.id) == list(range(len(parents)))
    assert lab.store.branch(run.id, run.head) == [0, 1, 2, *range(7, run.head + 1)]
    assert [cp.seq for cp in lab.store.checkpoints_in(run.id, [5, 1, 99, 3])] == [5, 1, 3]
    assert [cp.state["count"] for cp in run.history()] == [0, 2, 2, 4, 4, 6, 6]
    fork = run.fork(1, state=Counter(count=3))
    fork.run()
    assert fork.output == 7
    assert [r.run_id for r in lab.lineage(fork.id)] == [run.id, fork.id]
    assert lab.run(fork.id).parent_seq == 1
    d = lab.diff((run, 1), (fork, 0))
    assert "count" in str(d)


def test_prune_and_delete_keep_the_tree_consistent(lab: Lab) -> None:
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    run.run()
    assert lab.prune(run.id, keep=2) == 5
    assert lab.store.seqs(run.id) == [5, 6]
    assert len(lab.events(run.id)) == 14  # events stay
    lab.delete_run(run.id)
    with pytest.raises(RunNotFoundError):
        lab.run(run.id)
    assert lab.store.events(run.id) == [] and lab.store.seqs(run.id) == []


# -- events ----------------------------------------------------------------------------------


def test_events_are_gap_free_and_attempts_pair_up(lab: Lab) -> None:
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    run.run()
    events = lab.events(run.id)
    assert [e.seq for e in events] == list(range(len(events)))
    kinds = [e.kind for e in events]
    assert kinds[0] == "started" and kinds[-1] == "done"
    entered = {e.attempt: e for e in events if e.kind == "entered"}
    settled = [e for e in events if e.kind == "settled"]
    assert len(settled) == 6 and all(e.attempt in entered for e in settled)
    assert all(entered[e.attempt].node_id == e.node_id for e in settled)
    assert lab.store.settled_stations(run.id) == {e.checkpoint_seq: e.node_id for e in settled}
    count, tail = lab.store.event_tail(run.id, 3)
    assert count == len(events) and [e.seq for e in tail] == [e.seq for e in events[-3:]]
    assert [e.kind for e in run.events(kind="settled")] == ["settled"] * 6
    # a checkpoint's own events, read by the database (run.checkpoint(seq) reads only these)
    for seq in {e.checkpoint_seq for e in events} | {999}:
        assert lab.store.events_at(run.id, seq) == [e for e in events if e.checkpoint_seq == seq]
    assert [e.kind for e in run.checkpoint(2).events] == [e.kind for e in events if e.checkpoint_seq == 2 and e.kind == "settled"]
    assert lab.store.next_seqs(run.id) == (7, len(events))
    payload = settled[0].payload
    assert payload["next"] == ["Check"] and payload["ms"] >= 0


# -- waits and verdicts ------------------------------------------------------------------------


def test_a_gate_parks_is_listed_approved_once_and_continues(lab: Lab) -> None:
    g = declare_orders(lab)
    run = g.start(Prepare(), state=Order(item="lamp"))
    run.run()
    assert run.status == "waiting"
    [w] = lab.waiting()
    assert (w.run_id, w.kind, w.node_id, w.prompt, w.details) == (run.id, "consent", "Approve", "Ship the order?", {"item": "lamp"})
    assert lab.run(run.id).status == "waiting"
    run.approve("ok", owner=w.owner)
    with pytest.raises(WaitError, match="already answered"):
        run.approve("twice")
    assert lab.waiting() == []
    run.run()
    assert (run.status, run.output) == ("done", "shipped lamp")
    [stored] = lab.store.waits(run.id)
    assert stored.resolution == {"approved": True, "note": "ok"} and stored.resolved_at is not None
    assert [e.payload["owner"] for e in run.events(kind="verdict")] == [w.owner]


def test_the_first_verdict_for_an_owner_wins_in_the_store(lab: Lab) -> None:
    g = declare_orders(lab)
    run = g.start(Prepare(), state=Order(item="lamp"))
    run.run()
    owner = run.wait.owner
    store = lab.store
    first = store.resolution_row(owner, {"approved": True, "note": "first"}, datetime.now(UTC))
    store.write([first, store.update_row(run.id, status="queued", head_seq=run.head)])
    second = store.resolution_row(owner, {"approved": False, "note": "second"}, datetime.now(UTC))
    try:
        store.write([second])
    except WaitAnsweredError as exc:  # PostgreSQL refuses the second answer outright
        assert "already answered" in str(exc)
    assert store.wait_at(run.id, run.head).resolution == {"approved": True, "note": "first"}
    assert run.refresh().resolution == {"approved": True, "note": "first"}
    run.run()
    assert run.status == "done" and "verdict True first" in run.state.log


# -- atomicity and bad input ---------------------------------------------------------------------


def test_a_value_the_store_cannot_hold_is_refused_whole(lab: Lab) -> None:
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    before = _snapshot(lab)
    bad = CheckpointRecord(run_id=run.id, seq=1, parent_seq=0, status="running", state={"name": "caf\udce9"}, next=())
    ev = EventRecord(run_id=run.id, seq=1, kind="settled", node_id="Inc", attempt=1, checkpoint_seq=1)
    with pytest.raises(UnstorableValueError, match="state.name"):
        lab.store.write([lab.store.event_row(ev), lab.store.checkpoint_row(bad)])
    assert _snapshot(lab) == before
    run.run()
    assert run.status == "done"


def test_sql_reads_on_both_and_never_writes(lab: Lab) -> None:
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    run.run()
    rel = lab.sql("select seq, state->>'count' as count from checkpoints where run_id = ? order by seq", [run.id])
    assert isinstance(rel, duckdb.DuckDBPyRelation)
    assert [(s, int(c)) for s, c in rel.fetchall()] == [(i, (i + 1) // 2 * 2) for i in range(7)]
    assert lab.sql("select kind, count(*) as n from events group by kind order by kind").fetchall() == [
        ("done", 1), ("entered", 6), ("settled", 6), ("started", 1)]  # fmt: skip
    assert lab.sql("select sum(seq) as total from checkpoints").fetchall() == [(21,)]
    before = _snapshot(lab)
    for bad in (
        "delete from runs",
        "with d as (delete from runs returning 1) select * from d",
        "select 1; delete from runs",
        "drop table events",
        "update runs set status = 'done'",
    ):
        with pytest.raises(StoreQueryError, match="read-only|one statement|SQL error"):
            lab.sql(bad)
    with pytest.raises(StoreQueryError, match="SQL error"):
        lab.sql("select nope from runs")
    with pytest.raises(StoreQueryError):
        lab.sql("")
    assert _snapshot(lab) == before
    rel = lab.sql("select run_id from runs")
    rel.query("r", "select * from r")  # the private copy: nothing of the store behind it
    with pytest.raises(duckdb.Error):
        rel.query("r", "select * from runs")


def test_bad_arguments_name_what_is_wrong(lab: Lab) -> None:
    with pytest.raises(ArgumentError, match="run_id"):
        lab.resume(123)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="status"):
        lab.runs(status="finished")
    with pytest.raises(RunNotFoundError, match="lab.runs"):
        lab.resume("run-000000000000-000000")


# -- schema versioning ---------------------------------------------------------------------------


def _set_schema_version(location: str, value: str) -> None:
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as con:
            con.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", [value])
    else:
        con = duckdb.connect(location)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [value])
        con.close()


def test_a_newer_schema_is_refused_and_left_untouched(location: str) -> None:
    lab = Lab(location)
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    run.run()
    lab.close()
    _set_schema_version(location, str(SCHEMA_VERSION + 1))
    with pytest.raises(StoreSchemaError, match=f"newer Graph Lab \\(schema {SCHEMA_VERSION + 1}.*upgrade graph-lab"):
        Lab(location)
    _set_schema_version(location, "two")
    with pytest.raises(StoreSchemaError, match="'two', not a number"):
        Lab(location)
    _set_schema_version(location, str(SCHEMA_VERSION))
    lab = Lab(location)
    assert lab.run(run.id).status == "done" and set(_snapshot(lab)) == set(TABLES)
    lab.close()


# -- kill ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_killed_writer_leaves_an_interrupted_run_that_resumes(location: str, tmp_path: Path) -> None:
    marker = tmp_path / "in-flight"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.worker", "tally", location, "5", str(marker)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        run_id = proc.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the worker never reached its third station"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    lab = Lab(location)
    declare_tally(lab)
    rec = lab.run(run_id)
    assert rec.status == "interrupted" and rec.head_seq == 2
    assert [cp.state["n"] for cp in lab.store.checkpoints(run_id)] == [0, 1, 2]
    [ev] = lab.events(run_id)[-1:]
    assert ev.kind == "interrupted" and ev.node_id == "Count"
    run = lab.resume(run_id)
    run._state.marker = ""  # the in-flight station runs again, without blocking this time
    run.run()
    assert (run.status, run.output) == ("done", 5)
    events = lab.events(run_id)
    assert [e.seq for e in events] == list(range(len(events)))
    lab.close()


def test_the_store_is_closed_for_every_lab_sharing_it(location: str) -> None:
    a = Lab(location)
    b = Lab(location)
    assert a.store is b.store
    a.close()
    with pytest.raises(StoreError, match="closed"):
        b.runs()

