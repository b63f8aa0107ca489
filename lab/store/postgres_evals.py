"""The PostgreSQL store's side of the evaluation tables (evals.py): its connections and transactions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .evals import EvalTables

__all__ = ("PostgresEvals",)


class PostgresEvals(EvalTables):
    """`EvalTables` on the PostgreSQL store's connection pool."""

    _conn: Any

    @contextmanager
    def _eval_tx(self, what: str) -> Iterator[Any]:
        with self._conn(what) as con, con.transaction():
            yield con

    @contextmanager
    def _eval_reading(self) -> Iterator[Any]:
        with self._conn("read the evaluations") as con:
            yield con
