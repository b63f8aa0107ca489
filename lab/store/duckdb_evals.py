"""The DuckDB store's side of the evaluation tables (evals.py): its connection and transactions.

As for effects (duckdb_effects.py): a transaction on the store's connection under the store's
lock with the file attached, committed before the call returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from ..errors import StoreError
from .evals import EvalTables

__all__ = ("DuckDBEvals",)


class DuckDBEvals(EvalTables):
    """`EvalTables` on the DuckDB store's connection."""

    _session: Any
    _check_writable: Any
    _check_open: Any

    @contextmanager
    def _eval_tx(self, what: str) -> Iterator[duckdb.DuckDBPyConnection]:
        self._check_writable()
        with self._eval_reading() as con:
            con.execute("BEGIN")
            try:
                yield con
            except BaseException as exc:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                if isinstance(exc, duckdb.Error):
                    raise StoreError(f"cannot {what}: {str(exc).splitlines()[0]}") from None
                raise
            try:
                con.execute("COMMIT")
            except duckdb.Error as err:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot {what}: {str(err).splitlines()[0]}") from None

    @contextmanager
    def _eval_reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._session() as con:
            self._check_open()
            try:
                yield con
            except duckdb.Error as exc:
                where = getattr(self, "path", "the store")
                raise StoreError(
                    f"cannot read the evaluations of {where}: {str(exc).splitlines()[0]}"
                ) from None
