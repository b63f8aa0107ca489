"""The PostgreSQL store's side of the `effects` table (effects.py): its connections and transactions.

An effect transaction takes a transaction lock on its key (`EFFECT_LOCK`) first, so two writers of
one key queue: the second finds the first one's record.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .effects import EffectTables
from .postgres_schema import EFFECT_LOCK

__all__ = ("PostgresEffects",)


class PostgresEffects(EffectTables):
    """`EffectTables` on the PostgreSQL store's connection pool."""

    _conn: Any

    @contextmanager
    def _effect_tx(self, key: str) -> Iterator[Any]:
        with self._conn(f"record the effect {key!r}") as con, con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [EFFECT_LOCK, key])
            yield con

    @contextmanager
    def _effects_reading(self) -> Iterator[Any]:
        with self._conn("read the effects") as con:
            yield con
