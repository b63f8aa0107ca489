"""The DuckDB store's side of the `calls` table (calls.py): its connection and transactions.

As for effects (duckdb_effects.py), a call is written on the store's connection under the store's
lock with the file attached; COMMIT returns once the row is in DuckDB's write-ahead log.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from ..errors import StoreError
from .calls import CallTables

__all__ = ("DuckDBCalls",)


class DuckDBCalls(CallTables):
    """`CallTables` on the DuckDB store's connection."""

    _session: Any
    _check_writable: Any
    _check_open: Any

    @contextmanager
    def _calls_writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self._check_writable()
        with self._calls_reading() as con:
            con.execute("BEGIN")
            try:
                yield con
            except BaseException:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                raise
            con.execute("COMMIT")

    @contextmanager
    def _calls_reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._session() as con:
            self._check_open()
            try:
                yield con
            except duckdb.Error as exc:
                where = getattr(self, "path", "the store")
                raise StoreError(
                    f"cannot record or read the calls of {where}: {str(exc).splitlines()[0]}"
                ) from None
