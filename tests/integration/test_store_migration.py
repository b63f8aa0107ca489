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


def _schema(con: duckdb.DuckDBPyConnection, db: str) -> dict[str, list[tuple[object, ...]]]:
    """Everything DuckDB says about a database's tables: columns, types, defaults, constraints, indexes."""
    where = f"WHERE database_name = '{db}'"
    return {
        "tables": con.execute(f"SELECT table_name, sql, has_primary_key, column_count FROM duckdb_tables() {where} ORDER BY 1").fetchall(),
        "columns": con.execute(
            f"SELECT table_name, column_index, column_name, data_type, column_default, is_nullable FROM duckdb_columns() {where} ORDER BY 1, 2"
        ).fetchall(),
        "constraints": con.execute(
            f"SELECT table_name, constraint_type, constraint_text, constraint_column_names FROM duckdb_constraints() {where} ORDER BY ALL"
        ).fetchall(),
        "indexes": con.execute(f"SELECT table_name, index_name, sql FROM duckdb_indexes() {where} ORDER BY ALL").fetchall(),
        "meta": con.execute(f"SELECT * FROM {db}.meta ORDER BY ALL").fetchall(),
    }


def test_a_new_store_copied_from_the_template_has_the_schema_every_migration_makes(tmp_path):
    """A new store's tables are copied from an empty schema the migrations made once (one statement,
    duckdb_schema.py): a file and an in-memory store, the first and a later one, equal a store built
    statement by statement."""
    reference = duckdb.connect()
    for migration in MIGRATIONS:
        for stmt in migration:
            reference.execute(stmt)
    reference.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    expected = _schema(reference, "memory")
    assert len(expected["tables"]) == 16 and expected["constraints"]

    for i in range(2):  # the second store reuses the instance and its template
        path = tmp_path / f"new{i}.duckdb"
        Lab(path).close()
        con = duckdb.connect(str(path))
        assert _schema(con, f"new{i}") == expected
        con.close()
        with Lab(":memory:") as lab:
            con = lab.store._con
            assert _schema(con, con.execute("SELECT current_database()").fetchone()[0]) == expected
