"""`lab.sql` on the DuckDB store: one read-only query, that never keeps another process waiting.

Reading cannot write, by construction rather than by inspecting the statement alone: a statement
whose plan writes (a data-modifying CTE, `EXPLAIN ANALYZE DELETE`) is refused; what runs, runs
inside a transaction that is always rolled back, on a connection that loads no extension; and
the result is copied into a private in-memory database with file access off, so the returned
relation (`rel.query(...)`, `rel.create(...)`) reaches nothing of the store. That database lives in
the process's one locked instance (sql_instance.py), not in a new instance per call (~15 ms).

A query runs on the store's file while the store's lock is held. When another process asks for
the lock while the query runs (it holds `lock-wait`, see holders.py), or another thread of this
process waits for the store (a run stepping on the lab's loop, a view refreshing), and the query
has run for `GRACE` seconds, the query is interrupted, the tables it names are copied into a
private file, the lock is let go, and the query runs again on the copy (issue 24 item 3): the
others wait for a copy of what the query reads, never for the query.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb

from ..errors import StoreQueryError
from .duckdb_instance import CONFIG
from .sql_instance import SMALL, lock_down, result_relation

__all__ = ("GRACE", "QueryWatch", "check_statement", "copy_table", "copy_tables", "open_copy", "run_to_private")

GRACE = 0.1
"""Seconds a query runs on the store's file before another process's wait interrupts it."""
POLL = 0.005
"""Seconds between two looks for a waiting process while a query runs."""

_READ_ONLY_TYPES = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
_WRITE_OPERATORS = re.compile(r"INSERT|DELETE|UPDATE|MERGE|CREATE|DROP|ALTER|COPY|ATTACH|DETACH|VACUUM|CHECKPOINT|EXPORT")
_PARQUET_LOSES = re.compile(r"HUGEINT|ENUM\(|\bBIT\b")
"""Column types a parquet copy would not give back as they were (HUGEINT as DOUBLE, say): copied as text."""
_EXPLAIN_PREFIX = re.compile(r"^\s*EXPLAIN\s+(ANALY[SZ]E\s+)?(\([^)]*\)\s*)?", re.IGNORECASE)
_REFUSED = "Change runs through the Run API (rewind, fork, edit_state, prune)"


def _sql_error(exc: duckdb.Error) -> StoreQueryError:
    return StoreQueryError(f"SQL error: {str(exc).strip()}")


def check_statement(con: duckdb.DuckDBPyConnection, query: str, args: Any) -> str:
    """The one SELECT `query` runs (the statement, or what an EXPLAIN explains), after refusing writes."""
    if not isinstance(query, str) or not query.strip():
        raise StoreQueryError("lab.sql needs a SELECT statement as a string")
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise _sql_error(exc) from None
    if len(statements) != 1:
        raise StoreQueryError(f"lab.sql runs one statement at a time; got {len(statements)}")
    kind = statements[0].type
    if kind not in _READ_ONLY_TYPES:
        raise StoreQueryError(f"lab.sql is read-only; {kind.name} statements are refused. {_REFUSED}")
    inner = query
    if kind == duckdb.StatementType.EXPLAIN:
        inner = _EXPLAIN_PREFIX.sub("", query, count=1)
        try:
            inner_kind = con.extract_statements(inner)[0].type
        except (duckdb.Error, IndexError):
            inner_kind = None
        if inner_kind != duckdb.StatementType.SELECT:
            name = inner_kind.name if inner_kind is not None else "this"
            raise StoreQueryError(
                f"lab.sql is read-only; EXPLAIN of a {name} statement is refused (EXPLAIN ANALYZE runs it). {_REFUSED}"
            )
    try:
        plan = con.execute("EXPLAIN (FORMAT JSON) " + inner, args).fetchall()
    except duckdb.Error as exc:
        raise _sql_error(exc) from None
    writes = sorted({op for op in _plan_operators(json.loads(plan[0][1])) if _WRITE_OPERATORS.search(op)})
    if writes:
        raise StoreQueryError(f"lab.sql is read-only; this statement writes ({', '.join(writes)}) and is refused. {_REFUSED}")
    return inner


def _plan_operators(node: Any) -> Iterator[str]:
    """Every operator name in an `EXPLAIN (FORMAT JSON)` plan."""
    if isinstance(node, list):
        for n in node:
            yield from _plan_operators(n)
    elif isinstance(node, dict):
        if isinstance(node.get("name"), str):
            yield node["name"].upper()
        yield from _plan_operators(node.get("children", []))


def run_to_private(
    con: duckdb.DuckDBPyConnection, query: str, args: Any, *, explain: bool, tmp: str, wanted: Any = None
) -> duckdb.DuckDBPyRelation | None:
    """Run `query` in a rolled-back transaction on `con`; its result as a relation of a private database.

    With `wanted` (another process waits for the store), the query is interrupted once that is
    true after `GRACE` s, and None is returned: run it again elsewhere. An interruption from
    anywhere else (Ctrl-C) is a `StoreQueryError`.
    """
    result = os.path.join(tmp, "result.parquet")
    kept: list[bool] = []
    types: list[str] = []
    names: list[str] = []
    watch = QueryWatch(con, wanted) if wanted is not None else contextlib.nullcontext()
    try:
        con.execute("BEGIN")
        try:
            with watch:
                kept, types, names = _execute(con, query, args, explain=explain, result=result)
        finally:
            con.execute("ROLLBACK")
    except duckdb.Error as exc:
        if getattr(watch, "fired", False):  # interrupted for a waiting process (a real error shows on the rerun)
            return None
        raise _sql_error(exc) from None
    return _to_private(con, result, kept, types, explain=explain)


def _to_private(
    con: duckdb.DuckDBPyConnection, result: str, kept: list[bool], types: list[str], *, explain: bool
) -> duckdb.DuckDBPyRelation:
    """The parquet file `result` as a relation of a private database: in the process's locked instance
    (sql_instance.py) when it is small, else in a new instance of its own, locked the same way."""
    quoted = result.replace("'", "''")
    source = con.sql(f"FROM read_parquet('{quoted}')")
    names = ['"' + c.replace('"', '""') + '"' for c in source.columns]
    # a column kept as it was has the type parquet gives back; one copied as text is cast back to its own
    given = [str(t) for t in source.types]
    wanted = given if explain or all(kept) else [g if keep else t for g, keep, t in zip(given, kept, types, strict=True)]
    most = max(1, SMALL // len(names))
    text = ", ".join(f"#{i + 1}::VARCHAR" for i in range(len(names)))
    rows = con.execute(f"SELECT [{text}] FROM read_parquet('{quoted}') LIMIT {most + 1}").fetchall()
    if len(rows) <= most:
        return result_relation([r[0] for r in rows], wanted, names)
    private = duckdb.connect(":memory:", config=CONFIG)
    try:
        select = ", ".join(f"CAST(#{i + 1} AS {t}) AS {n}" for i, (t, n) in enumerate(zip(wanted, names, strict=True)))
        private.execute(f"CREATE TABLE result AS SELECT {select} FROM read_parquet('{quoted}')")
        lock_down(private)
    except BaseException:
        private.close()
        raise
    return private.table("result")


def _execute(
    con: duckdb.DuckDBPyConnection, query: str, args: Any, *, explain: bool, result: str
) -> tuple[list[bool], list[str], list[str]]:
    """Run the query into the parquet file `result`: (columns kept as they are, their types, their names)."""
    kept: list[bool] = []
    types: list[str] = []
    names: list[str] = []
    if explain:
        rows = con.execute(query, args).fetchall()
        con.execute(
            f"COPY (SELECT * FROM (VALUES {', '.join(['(?, ?)'] * len(rows)) or '(NULL, NULL)'}) "
            f"t(explain_key, explain_value) {'' if rows else 'LIMIT 0'}) TO '{result}' (FORMAT parquet)",
            [v for r in rows for v in r[:2]],
        )
        return kept, types, names
    rel = con.sql(query, params=args)
    types = [str(t) for t in rel.types]
    names = ['"' + c.replace('"', '""') + '"' for c in rel.columns]
    kept = [_PARQUET_LOSES.search(t) is None for t in types]
    if not all(kept):  # through parquet as text, cast back by the caller
        rel = rel.project(
            ", ".join(
                f"#{i + 1} AS {n}" if keep else f"CAST(#{i + 1} AS VARCHAR) AS {n}"
                for i, (keep, n) in enumerate(zip(kept, names, strict=True))
            )
        )
    rel.write_parquet(result)
    return kept, types, names


class QueryWatch:
    """While a query runs on `con`: interrupt it once `wanted()` says another process waits (after `GRACE` s).

    `fired` tells the caller that an interruption came from here, not from the user (Ctrl-C).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, wanted: Any, *, grace: float = GRACE):
        self._con = con
        self._wanted = wanted
        self._grace = grace
        self._stop = threading.Event()
        self._mutex = threading.Lock()
        self._running = False
        self.fired = False
        self._thread = threading.Thread(target=self._watch, name="graphlab-sql-watch", daemon=True)

    def __enter__(self) -> QueryWatch:
        self._running = True
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._mutex:
            self._running = False
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(POLL):
            if time.monotonic() - self._started < self._grace or not self._wanted():
                continue
            with self._mutex:
                if self._running:
                    self.fired = True
                    self._con.interrupt()
            return


def copy_tables(con: duckdb.DuckDBPyConnection, query: str, present: Sequence[str], target: str) -> None:
    """Copy the store tables `query` names (all of them, if its names cannot be told) into a new file.

    `con` has the store attached as its default database; `target` is a DuckDB file to create.
    """
    try:
        named = {n.lower() for n in duckdb.get_table_names(query)}
        tables = [t for t in present if t.lower() in named]
    except duckdb.Error:
        tables = list(present)
    source = con.execute("SELECT current_database()").fetchone()[0]
    quoted = target.replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS graphlab_sql_copy")
    try:
        for table in tables:
            copy_table(con, source, table, f"CREATE TABLE graphlab_sql_copy.main.{table}", f"graphlab_sql_copy.main.{table}")
    finally:
        con.execute("DETACH graphlab_sql_copy")


def open_copy(path: str) -> duckdb.DuckDBPyConnection:
    """The copied tables, read-only, in a DuckDB instance of their own."""
    return duckdb.connect(path, read_only=True, config=CONFIG)


def copy_table(con: duckdb.DuckDBPyConnection, source: str, table: str, create: str, into: str) -> None:
    """Copy `table` of the attached database `source`: `create` (say `CREATE TEMP TABLE runs`) with its
    columns and constraints, then its rows into `into` (that table's qualified name)."""
    ddl = con.execute(
        "SELECT sql FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' AND table_name = ?",
        [source, table],
    ).fetchone()[0]
    con.execute(re.sub(r"^CREATE TABLE [^(\s]+", create, ddl, count=1))
    con.execute(f'INSERT INTO {into} SELECT * FROM "{source}".main.{table}')
