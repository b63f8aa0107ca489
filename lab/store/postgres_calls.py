"""The PostgreSQL store's side of the `calls` table (calls.py): its connection pool."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .calls import CallTables

__all__ = ("PostgresCalls",)


class PostgresCalls(CallTables):
    """`CallTables` on the PostgreSQL store's connection pool."""

    _conn: Any

    @contextmanager
    def _calls_writing(self) -> Iterator[Any]:
        with self._conn("record a call") as con, con.transaction():
            yield con

    @contextmanager
    def _calls_reading(self) -> Iterator[Any]:
        with self._conn("read the calls") as con:
            yield con
