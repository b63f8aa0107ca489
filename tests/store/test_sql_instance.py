"""`lab.sql` results share one locked DuckDB instance per process, each with a connection and a database of its own.

Scenarios: one call's temp table, `CREATE TABLE` (also by name in the default database), `rel.create(...)`,
`ATTACH ':memory:'` and `USE` are gone in the next call;
the shared instance still reads and writes no file, attaches no file, installs or loads no extension and
changes no setting; a collected result's database is detached at the next call; two threads calling at
once each get their own rows; a large result gets an instance of its own, locked the same way; the
copy keeps DuckDB's types; a forked child makes its own instance.
"""

from __future__ import annotations

import gc
import os
import threading

import duckdb
import pytest

from lab import Lab
from lab.store.sql_instance import SMALL, result_relation

_MINE = "select database_name from duckdb_databases() where database_name like 'graphlab_sql_%'"


@pytest.fixture
def lab(tmp_path):
    with Lab(tmp_path / "lab.duckdb") as lab:
        yield lab


def test_one_calls_tables_and_use_are_gone_in_the_next_call(lab):
    first = lab.sql("select 1 as x")
    first.query("r", "create temp table scratch as select 41 as v")
    first.query("r", "create table kept as select 42 as v")
    first.create("copied")
    assert first.query("r", "select (select v from scratch) + (select v from kept)").fetchall() == [(83,)]
    second = lab.sql("select 2 as x")
    for name in ("scratch", "kept", "copied"):
        with pytest.raises(duckdb.CatalogException):
            second.query("r", f"select * from {name}")
    assert second.query("r", "select current_database()").fetchall() != first.query("r", "select current_database()").fetchall()
    assert second.fetchall() == [(2,)] and first.fetchall() == [(1,)]  # both still usable
    # what a call made elsewhere by name is gone in the next call too
    second.query("r", 'create table memory.main."a ""t" as select 1 as v')
    second.query("r", "create view memory.main.w as select 1 as v")
    second.query("r", "attach ':memory:' as extra")
    third = lab.sql("select 3 as x")
    assert third.query("r", "select count(*) from duckdb_tables() where database_name = 'memory'").fetchall() == [(0,)]
    assert third.query("r", "select count(*) from duckdb_views() where database_name = 'memory' and not internal").fetchall() == [(0,)]
    assert third.query("r", "select count(*) from duckdb_databases() where database_name = 'extra'").fetchall() == [(0,)]
    # one result's rows are a temp table of its own connection: another call cannot name them
    ((first_db,),) = first.query("r", "select current_database()").fetchall()
    with pytest.raises(duckdb.CatalogException):
        second.query("r", f"select * from {first_db}.main.result")
    assert second.query("r", "select count(*) from duckdb_tables() where table_name = 'result'").fetchall() == [(1,)]


@pytest.mark.parametrize(
    "statement",
    [
        "select * from read_csv('/etc/hostname')",
        "copy (select 1) to '{tmp}/out.csv'",
        "attach '{tmp}/other.duckdb' as other",
        "install sqlite",
        "load sqlite_scanner",
        "set enable_external_access = true",
        "set threads = 1",
        "reset lock_configuration",
    ],
)
def test_the_shared_instance_reaches_no_file_extension_or_setting(lab, tmp_path, statement):
    rel = lab.sql("select 1 as x")
    with pytest.raises(duckdb.Error):
        rel.query("r", statement.format(tmp=tmp_path))
    assert not list(tmp_path.glob("out.csv")) and not list(tmp_path.glob("other.duckdb"))
    assert lab.sql("select 1 as x").query("r", "select current_setting('enable_external_access')").fetchall() == [(False,)]


def test_a_collected_results_database_is_detached_at_the_next_call(lab):
    rel = lab.sql("select 1 as x")
    name = rel.query("r", "select current_database()").fetchall()[0][0]
    derived = rel.filter("x = 1")
    del rel
    gc.collect()
    assert (name,) in lab.sql("select 1").query("r", _MINE).fetchall()  # a derived relation keeps it
    assert derived.fetchall() == [(1,)]
    del derived
    gc.collect()
    assert (name,) not in lab.sql("select 1").query("r", _MINE).fetchall()


def test_two_threads_calling_at_once_each_get_their_own_rows(lab):
    errors: list[BaseException] = []

    def call(n: int) -> None:
        try:
            for i in range(30):
                rel = lab.sql("select ? as n, ? as i", [n, i])
                rel.query("r", f"create temp table t{n} as select * from r")
                assert rel.fetchall() == [(n, i)]
                assert rel.query("r", f"select count(*) from t{n}").fetchall() == [(1,)]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_a_large_result_gets_an_instance_of_its_own_locked_the_same_way(lab):
    rel = lab.sql(f"select range as n, 'a'::ENUM('a', 'b') as e from range({SMALL})")
    assert rel.aggregate("count(*), sum(n)").fetchall() == [(SMALL, SMALL * (SMALL - 1) // 2)]
    assert [str(t) for t in rel.types] == ["BIGINT", "ENUM('a', 'b')"]
    assert rel.query("r", _MINE).fetchall() == []  # not the shared instance
    rel.create("copied")
    with pytest.raises(duckdb.Error):
        rel.query("r", "select * from read_csv('/etc/hostname')")


def test_the_copy_keeps_duckdbs_types_and_values(lab):
    """As the parquet copy it is read from keeps them (it has no INTERVAL below ms, nor ARRAY or UNION)."""
    query = (
        "select 0.1::DOUBLE as d, '\\xAA\\x00'::BLOB as b, '{\"a\": [1, \"x, y\"]}'::JSON as j, "
        "{'a': 'it''s, {x}', 'b': NULL} as s, ['a,b', 'NULL', NULL, ''] as l, MAP {'k': 'v, 2'} as m, "
        "INTERVAL '1 month 2 days 3 seconds' as i, '0101'::BIT as bit, "
        "170141183460469231731687303715884105727::HUGEINT as h, 123.456::DECIMAL(18,3) as dec, "
        "'2024-01-01 00:00:00.123456789'::TIMESTAMP_NS as tns, 'infinity'::DATE as dinf, 'b'::ENUM('a', 'b') as e, "
        "NULL::VARCHAR as n, 'line1\nline2' as nl, 'a b' as \"a col\", 1 as \"a\"\"q\""
    )
    direct = duckdb.connect()
    expected = direct.sql(query)
    rel = lab.sql(query)
    assert rel.fetchall() == expected.fetchall()
    assert rel.columns == expected.columns
    assert [str(t) for t in rel.types] == [str(t) for t in expected.types]
    assert lab.sql("select * from range(0)").fetchall() == []
    assert lab.sql("explain select * from runs").fetchall()


def test_a_forked_child_makes_its_own_instance(lab):
    parent = lab.sql("select 1 as x")
    assert parent.query("r", _MINE).fetchall()
    pid = os.fork()
    if pid == 0:  # the child: nothing of the parent's instance is seen or used
        try:
            rel = result_relation([["7"]], ["INTEGER"], ['"x"'])
            ok = rel.fetchall() == [(7,)] and len(rel.query("r", _MINE).fetchall()) == 1
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert parent.fetchall() == [(1,)]
