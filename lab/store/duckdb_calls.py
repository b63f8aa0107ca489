"""The DuckDB store's side of the `calls` table (calls.py): its reads, after this process's journal is folded.

Calls are written through the journal (`DuckDBStore.write`) and folded into the table with the rest
of a boundary (schema.py's FOLD_STATEMENTS); a read folds this process's lines first, as every read does.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from .calls import CallTables

__all__ = ("DuckDBCalls",)


class DuckDBCalls(CallTables):
    """`CallTables` on the DuckDB store's connection."""

    _reading: Any

    def _calls_reading(self) -> AbstractContextManager[Any]:
        return self._reading()
