"""The locked DuckDB instance `lab.sql` results live in: one per process, a connection and a database per result.

Why: a new DuckDB instance costs ~15 ms (DuckDB builds its catalog), more than a small query. The
instance is made as each result's private instance was (no extension loaded, file access off,
settings locked), once, on first use. Each result gets a new connection on it, holding the rows in a
temp table (no other connection sees it), and an in-memory database of its own that the connection
`USE`s, where `rel.create(...)` lands: temp tables, `USE` and created tables stay with that
result. Once the connection is collected (no relation of the result is left), its database is
detached at the next call, as is any other database a result attached, and any table or view a result
made in the instance's default database by name is dropped. The rows come in as one list parameter of text values cast back to their
types (the instance reads no file), so a large result still gets an instance of its own (`SMALL`).
A forked child never uses its parent's instance.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Sequence

import duckdb

from .duckdb_instance import CONFIG

__all__ = ("SMALL", "result_relation")

SMALL = 10_000
"""Values (rows x columns) a result may have to live in the shared instance; a larger one gets its own
(measured: about where text values through a parameter cost as much as a new instance, ~40 ms)."""

_lock = threading.Lock()
_root: list[duckdb.DuckDBPyConnection] = []
_live: set[str] = set()
"""The databases of results whose connection is alive; any other is detached at the next call (a finalizer runs no SQL)."""
_LOOK = (
    "SELECT 'DATABASE', database_name, NULL FROM duckdb_databases() WHERE NOT internal AND database_name <> 'memory' "
    "UNION ALL SELECT 'VIEW', schema_name, view_name FROM duckdb_views() WHERE database_name = 'memory' AND NOT internal "
    "UNION ALL SELECT 'TABLE', schema_name, table_name FROM duckdb_tables() WHERE database_name = 'memory'"
)
"""What results left in the instance: the databases attached (theirs, or a user's `ATTACH ':memory:'`), and
the tables and views made in the default database by name (`memory.main.t`): dropped at the next call."""
_inherited: list[duckdb.DuckDBPyConnection] = []
"""An instance a forked child inherited: never used (its threads are the parent's) nor closed."""
_names = itertools.count()


def _forget_after_fork() -> None:
    global _lock
    _inherited.extend(_root)
    _root.clear()
    _live.clear()
    _lock = threading.Lock()  # a parent's thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_after_fork)


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """No file access and no setting changed from now on, for every connection of `con`'s instance."""
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _collected(name: str, pid: int) -> None:
    if pid == os.getpid():
        _live.discard(name)


def _connection() -> tuple[duckdb.DuckDBPyConnection, str]:
    """A new connection on the process's instance (made on first use) and the name of a new database for it."""
    with _lock:
        if not _root:
            root = duckdb.connect(":memory:", config=CONFIG)
            try:
                lock_down(root)
            except BaseException:
                root.close()
                raise
            _root.append(root)
        root = _root[0]
        for kind, where, what in root.execute(_LOOK).fetchall():
            if kind == "DATABASE" and where not in _live:
                root.execute(f"DETACH DATABASE IF EXISTS {_quote(where)}")
            elif kind != "DATABASE":
                root.execute(f"DROP {kind} IF EXISTS memory.{_quote(where)}.{_quote(what)} CASCADE")
        name = f"graphlab_sql_{next(_names)}"
        _live.add(name)
        return root.cursor(), name


def result_relation(rows: list[list[str | None]], types: Sequence[str], names: Sequence[str]) -> duckdb.DuckDBPyRelation:
    """`rows` (each value as text, or None) as the table `result`, its columns `names` cast to `types`."""
    con, name = _connection()
    weakref.finalize(con, _collected, name, os.getpid())
    try:
        con.execute(f"ATTACH ':memory:' AS {name}")
    except BaseException:
        con.close()
        raise
    con.execute(f"USE {name}")
    select = ", ".join(f"CAST(r[{i + 1}] AS {t}) AS {n}" for i, (t, n) in enumerate(zip(types, names, strict=True)))
    con.execute(f"CREATE TEMP TABLE result AS SELECT {select} FROM unnest(?::VARCHAR[][]) AS t(r)", [rows])
    return con.table("result")
