"""The DuckDB store's side of the `effects` table (effects.py): its connection and transactions.

As for agent jobs (duckdb_jobs.py), an effect transaction runs on the store's connection under
the store's lock with the file attached, so it holds the key against this process's threads and
every other process; COMMIT returns once the row is in DuckDB's write-ahead log, before the effect runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from ..errors import StoreError
from .effects import EffectTables

__all__ = ("DuckDBEffects",)


class DuckDBEffects(EffectTables):
    """`EffectTables` on the DuckDB store's connection."""

    _session: Any
    _check_writable: Any
    _check_open: Any

    @contextmanager
    def _effect_tx(self, key: str) -> Iterator[duckdb.DuckDBPyConnection]:
        self._check_writable()
        with self._effects_reading() as con:
            con.execute("BEGIN")
            try:
                yield con
            except BaseException as exc:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                if isinstance(exc, duckdb.Error):
                    raise StoreError(f"cannot record the effect {key!r}: {str(exc).splitlines()[0]}") from None
                raise
            try:
                con.execute("COMMIT")
            except duckdb.Error as err:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot record the effect {key!r}: {str(err).splitlines()[0]}") from None

    @contextmanager
    def _effects_reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._session() as con:
            self._check_open()
            try:
                yield con
            except duckdb.Error as exc:
                where = getattr(self, "path", "the store")
                raise StoreError(f"cannot read the effects of {where}: {str(exc).splitlines()[0]}") from None
