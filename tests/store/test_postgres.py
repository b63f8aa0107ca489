"""What only a shared PostgreSQL store does: several processes on one store.

A team: one process parks a run at a gate, another lists and approves it, the first continues
it; 10 approvers race and exactly one verdict is recorded; several writers step different runs
at once with no lost or duplicate rows; a live writer's run is not taken for dead; bad URLs and
an absent server say what to do. Every process here is a real one on a real server.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import Lab
from lab.errors import CheckpointError, StoreError
from lab.records import CheckpointRecord, EventRecord, PendingStation
from lab.store.journal import UnstorableValueError
from tests.conftest import Counter, Inc, declare_counter
from tests.store.graphs import Order, Prepare, declare_orders, declare_tally

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.worker", *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_one_process_parks_another_approves_the_first_continues(pg_url: str) -> None:
    lab = Lab(pg_url)
    g = declare_orders(lab)
    run = g.start(Prepare(), state=Order(item="lamp"))
    run.run()
    assert run.status == "waiting"
    script = (
        "import sys; from lab import Lab; from tests.store.graphs import declare_orders\n"
        "lab = Lab(sys.argv[1]); declare_orders(lab)\n"
        "[w] = lab.waiting(); run = lab.resume(w.run_id); run.approve('from B', owner=w.owner); print(w.owner)\n"
        "lab.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script, pg_url], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == run.wait.owner
    run.run()  # the verdict given in the other process is read from the store
    assert (run.status, run.output) == ("done", "shipped lamp")
    assert "verdict True from B" in run.state.log
    events = lab.events(run.id)
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.kind for e in events].count("verdict") == 1
    lab.close()


def test_ten_racing_approvers_exactly_one_wins(pg_url: str, tmp_path: Path) -> None:
    lab = Lab(pg_url)
    run = declare_orders(lab).start(Prepare(), state=Order(item="lamp"))
    run.run()
    owner = run.wait.owner
    barrier = tmp_path / "go"
    procs = [_worker("approve", pg_url, run.id, str(barrier), f"approver {i}") for i in range(10)]
    try:
        time.sleep(0.5)
        deadline = time.monotonic() + 90
        while sum(1 for p in procs if p.poll() is None) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        # every approver has resumed the run before the barrier opens (each wrote its `resumed` event)
        while len(lab.store.events(run.id, kind="resumed")) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        barrier.touch()
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    lines = [o.strip() for o, _ in outs]
    assert all(p.returncode == 0 for p in procs), [e[-500:] for _, e in outs]
    assert lines.count("won") == 1, lines
    assert all(line.startswith("lost: WaitAnsweredError") and "already answered" in line for line in lines if line != "won")
    [wait] = lab.store.waits(run.id)
    assert wait.owner == owner and wait.resolution["approved"] is True
    verdicts = lab.store.events(run.id, kind="verdict")
    assert len(verdicts) == 1 and verdicts[0].payload["note"] == wait.resolution["note"]
    events = lab.events(run.id)
    assert [e.seq for e in events] == list(range(len(events)))
    assert lab.run(run.id).status == "queued"
    run.run()
    assert run.status == "done" and f"verdict True {wait.resolution['note']}" in run.state.log
    lab.close()


def test_several_writers_step_different_runs_with_no_lost_or_duplicate_rows(pg_url: str) -> None:
    Lab(pg_url).close()  # the schema, once
    procs = [_worker("steps", pg_url, "4") for _ in range(3)]
    outs = [p.communicate(timeout=180) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-800:] for _, e in outs]
    ids = [i for o, _ in outs for i in o.split()]
    assert len(ids) == len(set(ids)) == 12
    lab = Lab(pg_url)
    assert sorted(r.run_id for r in lab.runs(status="done")) == sorted(ids)
    for run_id in ids:
        assert lab.store.seqs(run_id) == list(range(21))
        events = lab.events(run_id)
        assert [e.seq for e in events] == list(range(42))  # started, 20 x (entered, settled), done
        assert lab.run(run_id).output == 20
    counts = lab.sql("select count(*), count(distinct (run_id, seq)) from checkpoints").fetchall()
    assert counts == [(12 * 21, 12 * 21)]
    lab.close()


@pytest.mark.parametrize("sync", ["server", "nosync"])
def test_a_live_writer_is_not_taken_for_dead_a_killed_one_is(pg_url: str, tmp_path: Path, sync: str) -> None:
    """...and every boundary it settled before the kill is stored, with `synchronous_commit=off` too
    (`fsync=False`): a settlement rides with the next station's `entered`, committed before that station runs."""
    marker = tmp_path / "in-flight"
    proc = _worker("tally", pg_url, "5", str(marker), *([sync] if sync == "nosync" else []))
    try:
        run_id = proc.stdout.readline().strip()
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        lab = Lab(pg_url)  # opens while the writer is mid-station
        assert lab.run(run_id).status == "running"
        assert lab.events(run_id)[-1].kind == "entered"
        lab.close()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    for _ in range(50):  # the server ends the dead session (and its locks) as soon as it reads EOF
        lab = Lab(pg_url)
        if lab.run(run_id).status == "interrupted":
            break
        lab.close()
        time.sleep(0.1)
    assert lab.run(run_id).status == "interrupted"
    assert lab.store.seqs(run_id) == [0, 1, 2]  # created, then the two stations settled before the kill
    assert [e.kind for e in lab.events(run_id)][-3:] == ["settled", "entered", "interrupted"]
    assert [c.state["n"] for c in lab.store.checkpoints(run_id)] == [0, 1, 2]
    declare_tally(lab)
    run = lab.resume(run_id)
    run._state.marker = ""
    run.run()
    assert run.output == 5
    lab.close()


def test_a_conflicting_checkpoint_keeps_nothing_of_its_write(pg_url: str) -> None:
    lab = Lab(pg_url)
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    before = lab.store.table_snapshot()
    other = CheckpointRecord(run_id=run.id, seq=0, parent_seq=None, status="created", state={"count": 99, "seen": []},
                             next=(PendingStation("Inc", {"by": 2}),))  # fmt: skip
    ev = EventRecord(run_id=run.id, seq=1, kind="entered", node_id="Inc", attempt=1, checkpoint_seq=0)
    with pytest.raises(CheckpointError, match="two different checkpoints claim this id"):
        lab.store.write([lab.store.event_row(ev), lab.store.checkpoint_row(other)])
    assert lab.store.table_snapshot() == before
    lab.close()


def test_jsonb_cannot_hold_nul_data_is_refused_observations_escaped(pg_url: str) -> None:
    lab = Lab(pg_url)
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    bad = CheckpointRecord(run_id=run.id, seq=1, parent_seq=0, status="running", state={"name": "a\x00b"}, next=())
    with pytest.raises(UnstorableValueError, match="NUL"):
        lab.store.write([lab.store.checkpoint_row(bad)])
    ev = EventRecord(run_id=run.id, seq=1, kind="warning", payload={"message": "a\x00b"})
    lab.store.write([lab.store.event_row(ev)])
    assert lab.events(run.id)[-1].payload == {"message": "a\\u0000b"}
    lab.close()


def test_sql_on_postgres_keeps_its_own_operators_and_types(pg_url: str) -> None:
    lab = Lab(pg_url)
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    run.run()
    assert lab.sql("select count(*) from checkpoints where state ? 'count'").fetchall() == [(7,)]
    assert lab.sql("select state->'seen'->>0 from checkpoints where seq = ? and run_id = ?", [1, run.id]).fetchall() == [("inc2",)]
    assert lab.sql("select avg(seq) as a from checkpoints").fetchall() == [(3.0,)]
    assert lab.sql("explain select * from runs").fetchall()
    lab.close()


EDGES = """
select x.*, '2024-01-02 03:04:05.123456'::timestamp + x.i * interval '1 day' as ts,
  '0999-01-01 00:00:00+05:30'::timestamptz as tz, '2024-02-29'::date as day, '01:02:03.000004'::time as tod
from (values
  (1, true, 7::int2, 9223372036854775807::int8, 170141183460469231731687303715884105727::numeric,
   1.25::numeric, 3.4028235e38::float4, 'NaN'::float8, 'it''s "q" ü ☃', '{"a": [1, {"b": null}]}'::jsonb,
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid),
  (2, false, -1::int2, -5::int8, 0::numeric, -0.5::numeric, -0.0::float4, '-Infinity'::float8, '', 'null'::jsonb, null),
  (3, null, null, null, null, null, null, 1e-310::float8, null, '"s"'::jsonb, null)
) as x(i, b, small, big, whole, frac, r, d, t, j, u) order by x.i
"""


def test_a_small_sql_result_on_postgres_lives_in_the_shared_instance_and_reads_as_a_private_one(pg_url: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`lab.sql` on PostgreSQL: a small result of plain columns is a database in the process's locked
    instance (no new instance per call), and gives back exactly what a private instance gives: values,
    NaN, infinities, -0.0, a HUGEINT, JSON, quotes, times and NULLs, and the same column types."""
    import math

    from lab.store import postgres_sql

    lab = Lab(pg_url)
    try:
        shared = lab.sql(EDGES)
        assert shared.query("r", "select current_database()").fetchall()[0][0].startswith("graphlab_sql_")
        monkeypatch.setattr(postgres_sql, "SMALL", 0)  # every result gets an instance of its own
        private = lab.sql(EDGES)
        assert private.query("r", "select current_database()").fetchall()[0][0] == "memory"
        assert shared.types == private.types and shared.columns == private.columns
        a, b = shared.fetchall(), private.fetchall()
        assert [str(v) for v in a[0][:7]] == [str(v) for v in b[0][:7]] and math.isnan(a[0][7]) and math.isnan(b[0][7])
        assert a[1:] == b[1:] and a[0][8:] == b[0][8:]
        assert math.copysign(1, a[1][6]) == -1.0 and a[0][4] == 170141183460469231731687303715884105727
        monkeypatch.undo()
        wide = lab.sql("select g, g::text as s from generate_series(1, 6000) as g")  # 12,000 values: its own instance
        assert wide.query("r", "select current_database()").fetchall()[0][0] == "memory"
        assert wide.aggregate("count(*), sum(g)").fetchall() == [(6000, 18003000)]
    finally:
        lab.close()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://postgres@127.0.0.1:1/graphlab", "no PostgreSQL server answered.*start the server"),
        ("postgresql://postgres@127.0.0.1:{port}/no_such_db", "does not exist.*createdb"),
        ("postgresql://postgres@127.0.0.1:{port}/x?sslmode=bogus", "not a PostgreSQL URL|invalid sslmode"),
    ],
)
def test_bad_urls_and_absent_servers_say_what_to_do(pg, url: str, says: str) -> None:
    with pytest.raises(StoreError, match=says):
        Lab(url.format(port=pg.port))
