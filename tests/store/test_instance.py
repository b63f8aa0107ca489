"""A DuckDB store's private instance is reused after its store closes, and only as it was lent.

Scenarios: a closed store's instance serves the next store with a fresh connection; two stores open
at once never share one (`fsync_mode` is global to an instance); a store's file is detached and its
`fsync_mode` set back before the instance is kept; an instance with anything left in its default
database is closed, not kept; a store collected without `close()` gives its instance back too.
"""

from __future__ import annotations

import gc

import duckdb

from lab import Lab
from lab.store import duckdb_instance
from lab.store.duckdb_instance import TEMPLATE, give_back, lend
from lab.store.duckdb_store import open_store


def _databases(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT database_name FROM duckdb_databases() WHERE NOT internal").fetchall()}


def test_a_closed_stores_instance_serves_the_next_store_with_a_fresh_connection(tmp_path):
    first = Lab(tmp_path / "a.duckdb")
    root = first.store._root
    first.store._con.execute("CREATE TEMP TABLE scratch AS SELECT 1 AS x")
    first.close()
    assert _databases(root) <= {"memory", TEMPLATE}  # the file detached, the template kept

    with Lab(tmp_path / "b.duckdb") as second:
        con = second.store._con
        assert second.store._root is root
        assert con.execute("SELECT current_database()").fetchone()[0] == "graphlab_store"
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'scratch'").fetchone()[0] == 0
        assert con.execute("SELECT current_setting('fsync_mode')").fetchone()[0].lower() == "standard"


def test_two_stores_open_at_once_never_share_an_instance(tmp_path):
    with Lab(tmp_path / "a.duckdb") as a, Lab(":memory:") as b:
        assert a.store._root is not b.store._root
        with a.store._session() as con:
            con.execute("SET fsync_mode = 'none'")  # what a job commit does (duckdb_jobs.py)
            try:
                mode = b.store._con.execute("SELECT current_setting('fsync_mode')").fetchone()[0]
                assert mode.lower() == "standard"
            finally:
                con.execute("SET fsync_mode = 'standard'")


def test_an_instance_goes_back_synced_and_detached_or_is_closed(tmp_path):
    root, con = lend()
    path = str(tmp_path / "x.duckdb")
    con.execute(f"ATTACH '{path}' AS other; USE other; CREATE TABLE t AS SELECT 42 AS v; SET fsync_mode = 'none'")
    give_back(root, con)
    assert _databases(root) <= {"memory", TEMPLATE}
    assert root.execute("SELECT current_setting('fsync_mode')").fetchone()[0].lower() == "standard"
    reader = duckdb.connect(path)  # detached: the file is free for another connection
    try:
        assert reader.execute("SELECT v FROM t").fetchall() == [(42,)]
    finally:
        reader.close()

    again, con = lend()
    assert again is root
    con.execute("CREATE TABLE memory.main.left_behind (x INTEGER)")  # never done by a store: not kept
    give_back(again, con)
    assert again not in duckdb_instance._idle
    fresh, con = lend()
    assert fresh is not again
    give_back(fresh, con)


def test_a_store_dropped_without_close_gives_its_instance_back(tmp_path):
    store = open_store(":memory:")
    root = store._root
    del store
    gc.collect()
    assert root in duckdb_instance._idle
    assert _databases(root) <= {"memory", TEMPLATE}
