"""Opening a DuckDB store's file: its schema version, its tables, migrations, and a reader's view.

Mixed into `DuckDBStore`; every method runs with the file attached (duckdb_files.py).
"""

from __future__ import annotations

import re
import tempfile
from typing import Any

import duckdb

from ..errors import StoreError, StoreSchemaError
from . import sql_text as q
from .dialect import DUCKDB
from .duckdb_files import DB
from .duckdb_instance import TEMPLATE
from .holders import Process
from .schema import EXPAND_BOUNDARIES, MIGRATIONS, SCHEMA_VERSION, stored_version
from .sql_read import copy_table

__all__ = ("SchemaChecks", "TABLES_CREATED")

TABLES_CREATED = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", " ".join(s for m in MIGRATIONS for s in m)))
"""Every table the migrations create: a store lacking one was edited by hand."""
_PROBE = " UNION ALL ".join(
    [f"SELECT count(*) FROM {table}" for table in sorted(TABLES_CREATED)]
    + ["SELECT count(*) FROM (SELECT DISTINCT * FROM journal_marks)"]
)
"""`_probe`'s one statement: a count of every table, and every value of `journal_marks` read."""


class SchemaChecks:
    """Check, migrate and (for a reader) snapshot the attached file."""

    path: str
    _con: duckdb.DuckDBPyConnection
    _unfolded: Any
    _load_journal_rows: Any
    _fold_statements: Any

    def _tables(self) -> set[str]:
        """The tables of the attached file (one catalog read; a file that is not a store fails here, said so)."""
        try:
            return {
                r[0]
                for r in self._con.execute(
                    "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main'"
                ).fetchall()
            }
        except duckdb.Error as exc:
            raise self._damaged(exc) from None

    def _damaged(self, exc: duckdb.Error) -> StoreError:
        return StoreError(
            f"cannot open the store {self.path}: it is damaged or not a Graph Lab store "
            f"({str(exc).splitlines()[0]}); move the file aside to start a new store, or restore it from a backup"
        )

    def _version(self, present: set[str]) -> int:
        """The schema version the file says (0 without a `meta` table); a newer one is refused."""
        row = None
        if "meta" in present:
            try:
                row = self._con.execute(q.SCHEMA_VERSION_READ).fetchone()
            except duckdb.Error as exc:
                raise self._damaged(exc) from None
        return stored_version(f"the store {self.path}", row[0] if row else None, "move the file aside to start a new store")

    def _check_tables(self, version: int, present: set[str]) -> None:
        missing = sorted(TABLES_CREATED - present)
        if missing:
            raise StoreError(
                f"the store {self.path} (schema {version}) lacks its table(s) {missing}: it was edited outside "
                "Graph Lab; restore it from a backup, or move the file aside to start a new store"
            )

    def _probe(self) -> None:
        """Read every table once before anything is created beside the file (a damaged file fails here).

        One statement for all of them: a statement costs ~0.3 ms whatever it reads."""
        try:
            self._con.execute(_PROBE).fetchall()
        except duckdb.Error as exc:
            raise StoreError(
                f"cannot open the store {self.path}: it is not a DuckDB database or is damaged "
                f"({str(exc).splitlines()[0]}); move the file aside to start a new store, or restore it from a backup"
            ) from None

    def _check_schema(self) -> None:
        """A reader migrates nothing: an older store is read once a Lab has opened (and upgraded) it."""
        present = self._tables()
        version = self._version(present)
        if version < SCHEMA_VERSION:
            raise StoreSchemaError(
                f"the store {self.path} has schema {version} (this Graph Lab writes {SCHEMA_VERSION}); reading it "
                f"without writing needs the current schema: open it once with Lab({self.path!r}) to upgrade it"
            )
        self._check_tables(version, present)

    def _snapshot(self) -> None:
        """A reader's view: the tables as the file holds them, plus every journal folded in memory.

        Temp tables shadow the file's (unqualified names find `temp` first), so every read
        below works unchanged and nothing is written to the file or a journal. A run left
        `running` by a process that is gone is shown `interrupted`.
        """
        con = self._con
        db = con.execute("SELECT current_database()").fetchone()[0]
        sources = self._unfolded(read_only=True)
        shadow = ("runs", "checkpoints", "waits", "events", "writers", "calls", "jobs", "job_events") if sources else ("runs", "writers")
        for table in shadow:
            copy_table(con, db, table, f"CREATE TEMP TABLE {table}", f"temp.main.{table}")
        if sources:
            with tempfile.TemporaryDirectory(prefix="graphlab-read-") as tmp:
                try:
                    self._load_journal_rows(con, sources, tmp)
                    for stmt in (EXPAND_BOUNDARIES, *self._fold_statements()):
                        con.execute(stmt)  # boundary rows first, as the rows they stand for (as a fold does)
                    con.execute("DROP TABLE journal_rows")
                except duckdb.Error as exc:
                    raise StoreError(
                        f"cannot read the journals of {self.path}: {str(exc).splitlines()[0]}; a line of one was "
                        f"damaged or edited by hand: run `python -m lab salvage --store {self.path}`"
                    ) from None
        running = con.execute(
            "SELECT r.run_id, w.pid, w.host, w.started FROM runs r LEFT JOIN writers w USING (run_id) "
            "WHERE r.status = 'running'"
        ).fetchall()
        gone = [run_id for run_id, pid, host, started in running if pid is None or not Process(pid, host, started).is_alive()]
        if gone:
            con.execute("UPDATE runs SET status = 'interrupted' WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [gone])

    def _migrate(self) -> bool:
        """Bring the file to SCHEMA_VERSION; True when it had no table at all (a new store, created whole)."""
        con = self._con
        present = self._tables()
        version = self._version(present)
        fresh = not present
        if version < SCHEMA_VERSION:
            if fresh:
                self._template()
            # one transaction for every step: a store is upgraded whole or not at all, and a new
            # store costs one commit (one WAL sync) instead of one per schema version
            con.execute("BEGIN")
            if fresh:  # the tables as the migrations make them, in one statement (~1 ms against ~6)
                con.execute(f"COPY FROM DATABASE {TEMPLATE} TO {DB} (SCHEMA)")
            else:
                for v in range(version, SCHEMA_VERSION):
                    for stmt in MIGRATIONS[v]:
                        con.execute(stmt)
            con.execute(DUCKDB.upsert("meta", q.META_COLUMNS, "key"), ["schema_version", str(SCHEMA_VERSION)])
            con.execute("COMMIT")
            present = self._tables()
        self._check_tables(version, present)
        return fresh

    def _template(self) -> None:
        """The instance's empty copy of the schema, made by every migration once (duckdb_instance.py keeps it)."""
        con = self._con
        if con.execute("SELECT count(*) FROM duckdb_databases() WHERE database_name = ?", [TEMPLATE]).fetchone()[0]:
            return
        con.execute(f"ATTACH ':memory:' AS {TEMPLATE}; USE {TEMPLATE}")
        try:
            con.execute("BEGIN")
            for migration in MIGRATIONS:
                for stmt in migration:
                    con.execute(stmt)
            con.execute("COMMIT")
        except BaseException:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            con.execute(f"USE {DB}; DETACH {TEMPLATE}")  # never a partial template
            raise
        con.execute(f"USE {DB}")
