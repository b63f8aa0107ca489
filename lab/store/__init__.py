"""Where graphs, runs, checkpoints and events live: one interface (`Store`), two backends.

DuckDB (with a journal in front) is the embedded default; PostgreSQL is the shared one,
opened by `Lab("postgresql://...")` (needs `graph-lab[postgres]`).
"""

from __future__ import annotations

import os

from .base import Store
from .duckdb_store import MEMORY, DuckDBStore, open_store, salvage_journal
from .postgres_store import is_postgres_url, redact

__all__ = ("Store", "DuckDBStore", "open_store", "open_location", "salvage_journal", "is_postgres_url", "redact", "MEMORY")


def open_location(location: str | os.PathLike[str], *, fsync: bool | None = None) -> Store:
    """The store at `location`: a `postgresql://` URL, `":memory:"` or a DuckDB file path."""
    if is_postgres_url(location):
        from .postgres_store import open_postgres

        return open_postgres(str(location), fsync=fsync)
    return open_store(location, fsync=fsync)
