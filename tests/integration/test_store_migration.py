"""A store written by schema 1 (before waits) opens, migrates in place and keeps its runs."""

from __future__ import annotations

import duckdb

from lab import Lab
from lab.store.schema import MIGRATIONS, SCHEMA_VERSION
from tests.conftest import Inc, declare_counter


def test_a_schema_1_store_migrates_and_its_runs_resume(tmp_path):
    path = str(tmp_path / "old.duckdb")
    con = duckdb.connect(path)
    for stmt in MIGRATIONS[0]:
        con.execute(stmt)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.close()

    with Lab(path) as lab:  # an empty v1 store: migrate, then use it as v1 would have
        version = lab.sql("select value from meta where key = 'schema_version'").fetchall()
        assert version == [(str(SCHEMA_VERSION),)]
        run = declare_counter(lab).start(Inc(by=2), state=None)
        run.step()
        run_id = run.id

    # downgrade the file to what schema 1 had (no waits table, no new columns), rows kept
    con = duckdb.connect(path)
    con.execute("DROP TABLE waits")
    con.execute("DROP TABLE jobs")
    con.execute("DROP TABLE job_events")
    con.execute("DROP TABLE writers")  # schema 4
    con.execute("DROP TABLE journal_marks")
    con.execute("DROP TABLE effects")  # schema 5
    con.execute("DROP TABLE calls")  # schema 6
    con.execute("ALTER TABLE runs DROP COLUMN breakpoints")
    con.execute("ALTER TABLE checkpoints DROP COLUMN counters")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    before = con.execute("SELECT run_id, seq, state FROM checkpoints ORDER BY ALL").fetchall()
    con.close()

    with Lab(path) as lab:
        assert lab.sql("select value from meta where key = 'schema_version'").fetchall() == [(str(SCHEMA_VERSION),)]
        assert lab.sql("select run_id, seq, state from checkpoints order by all").fetchall() == before
        assert lab.sql("select count(*) from waits").fetchall() == [(0,)]
        declare_counter(lab)
        run = lab.resume(run_id)
        assert run.breakpoints == {"before": set(), "after": set()}
        assert run.run().output == 6
        assert run.history()[1].counters is None  # a pre-budget checkpoint reads as zero counters
