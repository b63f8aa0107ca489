"""The store seen from outside: read-only SQL, the terminal entry point, exit without close."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lab import Lab, StoreQueryError
from lab.cli import main as cli_main
from tests.conftest import Counter, Inc, declare_counter

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_sql_is_read_only_and_errors_are_readable(lab):
    run = declare_counter(lab).start(Inc(by=2), state=Counter()).run()
    before = lab.store.table_snapshot()
    for statement in (
        "insert into runs select * from runs",
        "delete from events",
        "drop table checkpoints",
        "update runs set status = 'done'",
        "create table x (a int)",
    ):
        with pytest.raises(StoreQueryError, match="read-only"):
            lab.sql(statement)
    with pytest.raises(StoreQueryError, match="one statement"):
        lab.sql("select 1; select 2")
    with pytest.raises(StoreQueryError, match="SQL error: .*nosuchtable"):
        lab.sql("select * from nosuchtable")
    assert lab.store.table_snapshot() == before
    rel = lab.sql("select kind, count(*) as n from events where run_id = ? group by kind order by kind", [run.id])
    assert dict(rel.fetchall())["settled"] == 6
    assert "kind" in str(rel)  # a relation prints as a table


def test_state_json_is_queryable(lab):
    run = declare_counter(lab).start(Inc(by=2), state=Counter()).run()
    rows = lab.sql(
        "select seq, json_extract(state, '$.seen') from checkpoints where run_id = ? and seq = 6", [run.id]
    ).fetchall()
    assert rows[0][0] == 6 and '"inc2"' in rows[0][1]


def test_cli_lists_and_shows_runs(db_path, capsys):
    lab = Lab(db_path)
    run = declare_counter(lab).start(Inc(by=2), state=Counter()).run()
    lab.close()
    assert cli_main(["--store", db_path, "runs"]) == 0
    out = capsys.readouterr().out
    assert run.id in out and "counter@1" in out and "done" in out
    assert cli_main(["show", run.id, "--store", db_path, "--events"]) == 0
    out = capsys.readouterr().out
    assert "checkpoints" in out and '{"count":6,"seen":["inc2","inc2","inc2"]}' in out and "settled" in out
    assert cli_main(["show", "run-nope", "--store", db_path]) == 2
    assert "no run 'run-nope'" in capsys.readouterr().err
    assert cli_main(["runs", "--store", db_path + ".missing"]) == 2


def test_python_dash_m_lab_runs_in_a_terminal(db_path):
    lab = Lab(db_path)
    declare_counter(lab).start(Inc(by=2), state=Counter()).run()
    lab.close()
    out = subprocess.run(
        [sys.executable, "-m", "lab", "runs", "--store", db_path], capture_output=True, text=True, check=True
    ).stdout
    assert "1 run(s)" in out


def test_a_script_that_never_closes_keeps_its_batched_boundaries(db_path):
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {REPO!r})
        from lab import Lab
        from tests.conftest import Counter, Inc, declare_counter
        lab = Lab({db_path!r}, durability="batch", batch_size=1000)
        run = declare_counter(lab).start(Inc(by=2), state=Counter())
        run.run(max_steps=4)
        print(run.id)
        """
    )
    run_id = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    lab = Lab(db_path)
    try:
        assert [c.seq for c in lab.store.checkpoints(run_id)] == [0, 1, 2, 3, 4]
        assert lab.run(run_id).head_seq == 4
    finally:
        lab.close()


def test_event_tail_and_settled_stations_read_only_what_a_view_shows(lab):
    from tests.conftest import Inc, declare_counter

    run = declare_counter(lab).start(Inc(by=2), state=None)
    run.run()
    events = run.events()
    count, tail = run.event_tail(3)
    assert count == len(events) and tail == events[-3:]
    assert run.event_tail(10_000) == (len(events), events)
    settled = {e.checkpoint_seq: e.node_id for e in events if e.kind == "settled"}
    assert run.settled_stations() == settled and len(settled) == len(run.history()) - 1
