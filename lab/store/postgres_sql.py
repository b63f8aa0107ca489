"""`lab.sql` on a PostgreSQL store: reads of the lab's tables, and nothing else.

A query runs on a connection of its own (never one the store writes with), in a READ ONLY
transaction with a statement timeout (`PostgresStore.sql_timeout`, 30 s unless set), which is
rolled back; then the session is reset (`DISCARD ALL`: settings, prepared statements, advisory
locks). Before anything is sent, a query is refused when it is not a read (it must start with
SELECT, WITH, VALUES, TABLE or EXPLAIN) or names a function that acts beyond the transaction:
advisory locks, ending or signalling other sessions, replication slots and origins,
`set_config`, `dblink`, server files and large objects, WAL and backup control, `pg_notify`,
and the functions that run a query given as text (`query_to_xml`, `ts_stat`, ...). A team can
give `lab.sql` a least-privilege role of its own (docs/scale.md): `Lab(url, sql_url=...)`.
The result comes back as a private in-memory DuckDB relation, as on the embedded store: a small one
of plain columns as a database of its own in the process's locked instance (sql_instance.py), which
saves a new DuckDB instance a call (~15-30 ms); any other in an instance of its own.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import duckdb

from ..errors import StoreQueryError
from .duckdb_instance import CONFIG
from .postgres_session import stale
from .sql_instance import SMALL, lock_down, result_relation

__all__ = ("SqlSession", "check_query", "pg_params", "pg_query", "relation", "SQL_TIMEOUT")

SQL_TIMEOUT = 30.0
"""Seconds a `lab.sql` query may run before the server stops it (`PostgresStore.sql_timeout`)."""

_READ_START = re.compile(r"^\s*(\(\s*)*(SELECT|WITH|EXPLAIN|VALUES|TABLE)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z_][a-z0-9_$]*")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_REFUSED_NAMES = frozenset(
    {
        "pg_terminate_backend", "pg_cancel_backend", "pg_signal_backend", "set_config", "pg_notify",
        "pg_reload_conf", "pg_rotate_logfile", "pg_promote", "pg_switch_wal", "pg_switch_xlog",
        "pg_start_backup", "pg_stop_backup", "pg_backup_start", "pg_backup_stop", "pg_export_snapshot",
        "pg_log_backend_memory_contexts", "pg_read_file", "pg_read_binary_file", "pg_stat_file",
        "query_to_xml", "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml",
        "cursor_to_xmlschema", "ts_stat", "ts_rewrite", "pg_file_write", "pg_file_rename", "pg_file_unlink",
    }
)  # fmt: skip
_REFUSED_PARTS = ("advisory", "replication_slot", "replication_origin")
_REFUSED_PREFIXES = ("dblink", "lo_", "pg_ls_", "pg_create_", "pg_drop_", "pg_logical_", "pg_stat_reset",
                     "pg_wal_replay", "pg_import", "pg_file_")  # fmt: skip


def check_query(query: object) -> None:
    """Refuse what is not one read of the tables, before anything reaches the server."""
    if not isinstance(query, str) or not query.strip():
        raise StoreQueryError("lab.sql needs a SELECT statement as a string")
    if not _READ_START.match(query):
        word = query.strip().split(None, 1)[0].upper()
        raise StoreQueryError(
            f"lab.sql is read-only; {word} statements are refused. "
            "Change runs through the Run API (rewind, fork, edit_state, prune)"
        )
    code = _code(query).lower()  # a string or comment is not code: only the names outside them are looked at
    if re.search(r'u&\s*"', code):
        raise StoreQueryError('lab.sql refuses Unicode-escaped names (U&"..."): write the name as it is')
    for word in set(_WORD.findall(code)):
        if word in _REFUSED_NAMES or any(p in word for p in _REFUSED_PARTS) or word.startswith(_REFUSED_PREFIXES):
            raise StoreQueryError(
                f"lab.sql refuses {word}(): it acts beyond the query (session locks, other sessions, replication, "
                "settings, server files or a query run from text) and could stall or break the processes sharing "
                "this store. lab.sql reads the lab's tables; ask the database's administrator for anything else"
            )


def _code(query: str) -> str:
    """The query without its string constants and comments, as PostgreSQL's lexer splits them."""
    out: list[str] = []
    i, n = 0, len(query)
    while i < n:
        ch, two = query[i], query[i : i + 2]
        prev = query[i - 1] if i else " "
        if two == "--":
            i = query.find("\n", i)
            i = n if i < 0 else i
        elif two == "/*":
            i = _comment_end(query, i)
            out.append(" ")
        elif ch == "'":
            escapes = prev in "eE" and (i < 2 or not (query[i - 2].isalnum() or query[i - 2] in "_$"))
            i = _quoted_end(query, i, "'", escapes)
            out.append(" '' ")
        elif ch == '"':  # a quoted name is code: kept whole, its quotes are not a string's
            end = _quoted_end(query, i, '"', False)
            out.append(query[i:end])
            i = end
        elif ch == "$" and not (prev.isalnum() or prev in "_$") and (m := _DOLLAR.match(query, i)):
            end = query.find(m.group(0), m.end())
            i = n if end < 0 else end + len(m.group(0))
            out.append(" '' ")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _comment_end(query: str, i: int) -> int:
    """Where the comment opening at `i` ends (comments nest)."""
    depth, i = 1, i + 2
    while i < len(query) and depth:
        depth += query.startswith("/*", i) - query.startswith("*/", i)
        i += 2 if query.startswith(("/*", "*/"), i) else 1
    return i


def _quoted_end(query: str, i: int, quote: str, escapes: bool) -> int:
    """Just past the string or name quoted at `i` (a doubled quote, or with `escapes` a backslash, escapes)."""
    i += 1
    while i < len(query):
        if escapes and query[i] == "\\":
            i += 2
        elif query.startswith(quote * 2, i):
            i += 2
        elif query[i] == quote:
            return i + 1
        else:
            i += 1
    return i


class SqlSession:
    """The connection `lab.sql` uses, and only it: opened on first use, reset after every query."""

    def __init__(self, psycopg: Any, url: str, kwargs: dict[str, Any], where: str):
        self._pg = psycopg
        self.url = url
        self._kwargs = {**kwargs, "autocommit": True, "options": "-c application_name=graph-lab-sql"}
        self._where = where
        self._con: Any = None
        self._mutex = threading.Lock()

    def run(self, query: str, params: Any, timeout: float) -> duckdb.DuckDBPyRelation:
        check_query(query)
        args = pg_params(params)
        text = pg_query(query) if args is not None else query
        if not isinstance(timeout, int | float) or not timeout > 0:
            raise StoreQueryError(f"lab.store.sql_timeout is {timeout!r}: give a number of seconds above 0")
        pg = self._pg
        with self._mutex:
            con = self._connect()
            try:
                con.autocommit = False
                con.read_only = True
                try:
                    con.execute("SELECT set_config('statement_timeout', %s, true)", [f"{int(timeout * 1000)}ms"])
                    cur = con.cursor()
                    cur.execute(text, args, prepare=True)
                    desc = cur.description or []
                    rows = cur.fetchall() if desc else []
                    types = [duck_type(pg, d.type_code, [r[i] for r in rows]) for i, d in enumerate(desc)]
                    names = [d.name for d in desc]
                finally:
                    self._reset(con)
            except pg.errors.ReadOnlySqlTransaction:
                raise StoreQueryError(
                    "lab.sql is read-only; this statement writes and is refused (it ran in a READ ONLY transaction). "
                    "Change runs through the Run API (rewind, fork, edit_state, prune)"
                ) from None
            except pg.errors.QueryCanceled:
                raise StoreQueryError(
                    f"lab.sql stopped the query after {timeout:g} s (its statement timeout): narrow it, or allow "
                    "more with lab.store.sql_timeout = seconds"
                ) from None
            except pg.errors.InsufficientPrivilege as exc:
                raise StoreQueryError(
                    f"SQL error: {str(exc).strip()} (lab.sql's role may read only what it was granted: docs/scale.md)"
                ) from None
            except pg.Error as exc:
                raise StoreQueryError(f"SQL error: {str(exc).strip()}") from None
        return relation(names, types, rows)

    def _connect(self) -> Any:
        con = self._con
        if con is not None and not stale(con):
            return con
        self.close()  # the server ended it (a restart): a new one
        try:
            self._con = self._pg.connect(self.url, **self._kwargs)
        except self._pg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise StoreQueryError(f"lab.sql cannot connect to {self._where}: {first}") from None
        return self._con

    def _reset(self, con: Any) -> None:
        """Roll back and reset the session; a connection that cannot be reset is closed, not reused."""
        try:
            con.rollback()
            con.read_only = False
            con.autocommit = True
            con.execute("DISCARD ALL")  # settings, prepared statements, advisory locks, temp tables
        except Exception:
            self.close()

    def switch(self, url: str) -> None:
        """Connect as another role (its URL) from the next query on."""
        with self._mutex:
            self.close()
            self.url = url

    def close(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            try:
                con.close()
            except Exception:  # pragma: no cover - best effort
                pass


def pg_params(params: Any) -> list[Any] | None:
    if params is None or (isinstance(params, list | tuple) and not params):
        return None
    if isinstance(params, dict):
        raise StoreQueryError("lab.sql on PostgreSQL takes positional parameters (a list, written ? in the query)")
    if not isinstance(params, list | tuple):
        raise StoreQueryError(f"lab.sql parameters are a list, got {type(params).__name__}")
    return list(params)


def pg_query(query: str) -> str:
    """`?` placeholders (outside quotes) as psycopg's `%s`; a literal `%` doubled."""
    out: list[str] = []
    quote: str | None = None
    for ch in query:
        if quote:
            out.append("%%" if ch == "%" else ch)
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


SIMPLE_TYPES = {
    "bool": "BOOLEAN",
    "int2": "SMALLINT",
    "int4": "INTEGER",
    "int8": "BIGINT",
    "float4": "REAL",
    "float8": "DOUBLE",
    "text": "VARCHAR",
    "varchar": "VARCHAR",
    "bpchar": "VARCHAR",
    "name": "VARCHAR",
    "char": "VARCHAR",
    "json": "JSON",
    "jsonb": "JSON",
    "timestamp": "TIMESTAMP",
    "timestamptz": "TIMESTAMPTZ",
    "date": "DATE",
    "time": "TIME",
    "interval": "INTERVAL",
    "uuid": "UUID",
    "bytea": "BLOB",
    "_int4": "INTEGER[]",
    "_int8": "BIGINT[]",
    "_text": "VARCHAR[]",
    "_float8": "DOUBLE[]",
}


def duck_type(pg: Any, oid: int, values: list[Any]) -> str:
    info = pg.adapters.types.get(oid)
    name = info.name if info is not None else ""
    if name == "numeric":  # sum() and avg() of integers: exact when whole, else a double
        whole = all(v is None or (isinstance(v, Decimal) and v == v.to_integral_value()) for v in values)
        return "HUGEINT" if whole else "DOUBLE"
    return SIMPLE_TYPES.get(name, "VARCHAR")


_AS_TEXT: dict[str, Callable[[Any], str]] = {
    "BOOLEAN": lambda v: "true" if v else "false",
    "SMALLINT": str,
    "INTEGER": str,
    "BIGINT": str,
    "HUGEINT": lambda v: str(int(v)),
    "REAL": repr,
    "DOUBLE": lambda v: repr(float(v)),
    "VARCHAR": lambda v: v if isinstance(v, str) else str(v),
    "JSON": json.dumps,
    "UUID": str,
    "TIMESTAMP": lambda v: v.isoformat(sep=" "),
    "TIMESTAMPTZ": lambda v: v.isoformat(sep=" "),
    "DATE": lambda v: v.isoformat(),
    "TIME": lambda v: v.isoformat(),
}
"""The column types whose values DuckDB reads back from text exactly as it takes them as parameters (`to_duck`):
a result of these alone lives in the process's locked instance (sql_instance.py) when it is small."""


def relation(names: list[str], types: list[str], rows: list[tuple[Any, ...]]) -> duckdb.DuckDBPyRelation:
    """The result in a private in-memory DuckDB with file access off: it prints and displays as a table.

    Small results of plain columns (`_AS_TEXT`) go to the process's locked instance, a database of their
    own there (a new instance costs ~15 ms); the others get an instance of their own, locked the same way.
    """
    seen: dict[str, int] = {}
    quoted, cols = [], []
    for name, typ in zip(names, types, strict=True):
        n = seen.get(name, 0)
        seen[name] = n + 1
        unique = name if n == 0 else f"{name}_{n}"
        quoted.append(f'"{unique.replace(chr(34), chr(34) * 2)}"')
        cols.append(f"{quoted[-1]} {typ}")
    if cols and len(rows) * len(cols) <= SMALL and all(t in _AS_TEXT for t in types):
        text = [_AS_TEXT[t] for t in types]
        values = [[None if v is None else f(v) for f, v in zip(text, r, strict=True)] for r in rows]
        return result_relation(values, types, quoted)
    con = duckdb.connect(":memory:", config=CONFIG)
    con.execute(f"CREATE TABLE result ({', '.join(cols) or 'empty INTEGER'})")
    if rows and cols:
        conv = [to_duck(t) for t in types]
        con.executemany(
            f"INSERT INTO result VALUES ({', '.join(['?'] * len(cols))})",
            [[c(v) for c, v in zip(conv, r, strict=True)] for r in rows],
        )
    lock_down(con)
    return con.table("result")


def to_duck(typ: str) -> Any:
    if typ == "JSON":
        return lambda v: None if v is None else json.dumps(v)
    if typ == "VARCHAR":
        return lambda v: v if v is None or isinstance(v, str) else str(v)
    if typ == "HUGEINT":
        return lambda v: None if v is None else int(v)
    if typ == "DOUBLE":
        return lambda v: None if v is None else float(v)
    return lambda v: v
