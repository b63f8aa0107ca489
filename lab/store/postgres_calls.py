"""The PostgreSQL store's side of the `calls` table (calls.py): its reads (calls are written by `graphlab_write`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .calls import CallTables

__all__ = ("PostgresCalls",)


class PostgresCalls(CallTables):
    """`CallTables` on the PostgreSQL store's connection pool."""

    _conn: Any
    flush: Any

    @contextmanager
    def _calls_reading(self) -> Iterator[Any]:
        self.flush()  # this process's held rows (a call waiting for its event) first
        with self._conn("read the calls") as con:
            yield con
