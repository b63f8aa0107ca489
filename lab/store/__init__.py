"""Where graphs, runs, checkpoints and events live: DuckDB, with a journal in front."""

from .duckdb_store import MEMORY, DuckDBStore, open_store, salvage_journal

__all__ = ("DuckDBStore", "open_store", "salvage_journal", "MEMORY")
