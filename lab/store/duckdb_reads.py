"""The DuckDB store's reads: the shared ones of reads.py over a folded view, and DuckDB's own.

Mixed into `DuckDBStore`. Every read folds this process's journal first (and the other
processes' at most every `OTHERS_EVERY` seconds), so it sees everything written before it.
`lab.sql` is read-only by construction (sql_read.py).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import duckdb

from ..errors import StoreError
from ..manifest import Manifest
from ..records import utcnow
from . import sql_text as q
from .dialect import DUCKDB
from .duckdb_files import DB
from .reads import Rows, SqlReads, branch_path
from .schema import TABLES
from .sql_read import check_statement, copy_tables, open_copy, run_to_private

__all__ = ("DuckDBReads", "OTHERS_EVERY")

OTHERS_EVERY = 0.5
"""Seconds between two reads of the journals of other processes (what they wrote shows this late at most)."""


class DuckDBReads(SqlReads):
    """Reads (and the few deletes, graph registrations and `lab.sql`) on the attached file."""

    dialect = DUCKDB
    path: str
    read_only: bool
    _others_at: float
    _session: Any
    _check_open: Any
    _check_writable: Any
    _waited_for: Any
    fold: Any

    @contextmanager
    def _reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._session() as con:
            self._check_open()
            # this process's own writes are always folded first; the other processes' journals at
            # most every OTHERS_EVERY s (a read in a tight loop would fold a few lines each time)
            self.fold(others=time.monotonic() - self._others_at >= OTHERS_EVERY)
            try:
                yield con
            except duckdb.Error as exc:
                raise StoreError(
                    f"cannot read the store {self.path}: {str(exc).splitlines()[0]}; if it was edited outside "
                    "Graph Lab, restore it from a backup"
                ) from None

    def _fetch_each(self, what: str, statements: Sequence[tuple[str, Sequence[Any]]], *, flush: bool) -> list[Rows]:
        with self._reading() as con:
            return [con.execute(sql, params).fetchall() for sql, params in statements]

    def register_graph(self, manifest: Manifest) -> int:
        """The revision number of this manifest's digest under its key, stored on first sight."""
        self._check_writable()
        with self._session() as con:
            row = con.execute(DUCKDB.sql(q.GRAPH_REVISION), [manifest.key, manifest.digest]).fetchone()
            if row:
                return int(row[0])
            nxt = con.execute(DUCKDB.sql(q.GRAPH_NEXT_REVISION), [manifest.key]).fetchone()[0]
            body = manifest.with_revision(int(nxt)).to_json()
            con.execute(
                DUCKDB.sql(q.GRAPH_INSERT),
                [manifest.key, int(nxt), manifest.digest, json.dumps(body), utcnow().replace(tzinfo=None)],
            )
            return int(nxt)

    def manifest(self, key: str, revision: int) -> Manifest | None:
        self._check_open()
        with self._session() as con:
            row = con.execute(DUCKDB.sql(q.MANIFEST), [key, revision]).fetchone()
        return Manifest.from_json(DUCKDB.load(row[0])) if row else None

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> duckdb.DuckDBPyRelation:
        """Run read-only SQL; returns a DuckDB relation (it prints and displays as a table).

        Read-only by construction (sql_read.py). A query that another process (or another thread of
        this one) waits behind is interrupted and run again on a private copy of the tables it
        names, with the store let go.
        """
        args: Any = params if params else None
        with tempfile.TemporaryDirectory(prefix="graphlab-sql-") as tmp:
            with self._reading() as con:
                inner = check_statement(con, query, args)
                explain = inner is not query
                # nobody waits behind a reader (the CLI: one thread, the lock file held shared)
                wanted = None if self.read_only else self._waited_for
                rel = run_to_private(con, query, args, explain=explain, tmp=tmp, wanted=wanted)
                if rel is not None:
                    return rel
                # another process or thread waits for the store: copy what the query reads, let go (issue 24 item 3)
                present = [
                    r[0]
                    for r in con.execute(
                        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
                        "AND schema_name = 'main'"
                    ).fetchall()
                ]
                copy = os.path.join(tmp, f"{DB}.duckdb")  # its name, so a query naming the store works on it
                copy_tables(con, inner, present, copy)
            copy_con = open_copy(copy)
            try:
                rel = run_to_private(copy_con, query, args, explain=explain, tmp=tmp)
            finally:
                copy_con.close()
            assert rel is not None
            return rel

    def seqs(self, run_id: str) -> list[int]:
        """Every checkpoint sequence number of a run, ascending."""
        with self._reading() as con:
            row = con.execute("SELECT list(seq ORDER BY seq) FROM checkpoints WHERE run_id = ?", [run_id]).fetchone()
        return list(row[0] or [])

    def parents(self, run_id: str) -> dict[int, int | None]:
        """Each checkpoint's parent (`seq -> parent_seq`): the run's checkpoint tree, without states."""
        with self._reading() as con:
            row = con.execute(
                "SELECT list(seq ORDER BY seq), list(parent_seq ORDER BY seq) FROM checkpoints WHERE run_id = ?",
                [run_id],
            ).fetchone()
        return dict(zip(row[0] or [], row[1] or [], strict=True))

    def branch(self, run_id: str, head: int) -> list[int]:
        """The sequence numbers from the root to `head`, following parent links."""
        with self._reading() as con:
            linear = con.execute(
                "SELECT count(*) > 0 AND count(*) FILTER (WHERE parent_seq IS DISTINCT FROM "
                "CASE WHEN seq = 0 THEN NULL ELSE seq - 1 END) = 0 AND max(seq) + 1 = count(*) "
                "FROM checkpoints WHERE run_id = ?",
                [run_id],
            ).fetchone()[0]
            if linear:  # never rewound: every checkpoint's parent is the one before it
                return list(range(head + 1))
            row = con.execute(
                "SELECT list(seq), list(parent_seq) FROM checkpoints WHERE run_id = ?", [run_id]
            ).fetchone()
        return branch_path(dict(zip(row[0] or [], row[1] or [], strict=True)), head)

    def delete_checkpoints(self, run_id: str, keep: Sequence[int]) -> int:
        """Delete a run's checkpoints except `keep`; returns how many went. Callers check terminality."""
        self._check_writable()
        keep = [int(k) for k in keep]
        with self._reading() as con:
            n = con.execute(DUCKDB.sql(q.COUNT_PRUNED), [run_id, keep]).fetchone()[0]
            con.execute("BEGIN")
            try:
                con.execute(DUCKDB.sql(q.PRUNE), [run_id, keep])
                con.execute("COMMIT")
            except duckdb.Error as exc:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot prune run {run_id}: {str(exc).splitlines()[0]}") from None
        return int(n)

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its checkpoints and events. Callers check terminality."""
        self._check_writable()
        with self._reading() as con:
            con.execute("BEGIN")
            try:
                for table in q.TABLES_BY_RUN:
                    con.execute(DUCKDB.sql(q.DELETE_BY_RUN[table]), [run_id])
                con.execute("COMMIT")
            except duckdb.Error as exc:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot delete run {run_id}: {str(exc).splitlines()[0]}") from None

    def table_snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, for tests that prove a refused action changed nothing."""
        out = {}
        with self._reading() as con:
            for table in TABLES:
                out[table] = con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        return out

