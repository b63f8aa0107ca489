"""The store's `effects` table: one record per `IdempotentOp` call of a station visit (lab/idempotent.py).

Mixed into both stores (`DuckDBEffects`, `PostgresEffects`), which give it a transaction that holds
one key against every other writer of it; the SQL is in sql_text.py. Like agent jobs, effects are
not journalled: `begin_effect` must be committed before the effect runs (a buffered journal line
is not), and there are a few rows per run, not one per boundary.

The protocol (seed 002: "making an effect exactly-once is the effect's own job"):

1. `begin_effect` records the key as `started` before the effect runs, or finds it recorded;
2. the effect runs; `finish_effect` records its JSON result (`done`) or its exception (`failed`);
3. a later try, a retry or a resume in another process calls `begin_effect` with the same key:
   `done` gives back the stored result without running the effect, `failed` runs it again, and
   `started` (a crash between 1 and 2) is *in doubt*: it runs again only when the op says that is
   safe, otherwise the caller reports it and a person settles it (`settle_effect`).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from ..errors import StoreError
from ..records import EffectRecord
from . import sql_text as q
from .dialect import Dialect

__all__ = ("EffectTables",)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


class EffectTables:
    """Begin, finish, settle and read `IdempotentOp` records, on any backend."""

    dialect: Dialect

    @abstractmethod
    def _effect_tx(self, key: str) -> AbstractContextManager[Any]:
        """A connection inside one transaction that holds effect `key` against every other writer
        of it (committed on success, rolled back on error); driver errors become `StoreError`."""

    @abstractmethod
    def _effects_reading(self) -> AbstractContextManager[Any]:
        """A connection to read the effects table; driver errors become `StoreError`."""

    def begin_effect(
        self,
        key: str,
        *,
        run_id: str,
        node_id: str,
        checkpoint_seq: int | None,
        name: str,
        repeat_started: bool = False,
    ) -> tuple[EffectRecord, bool]:
        """Record `key` as started, unless its record says otherwise; returns `(record, run_it)`.

        `run_it` is True when the caller must run the effect now: the key was new, its effect
        failed before, or it was started and never finished and `repeat_started` says running it
        again is safe. Otherwise the record says what happened (`done`: its result; `started`: in doubt).
        """
        sql = self.dialect.sql
        now = _now()
        with self._effect_tx(key) as con:
            row = con.execute(sql(q.EFFECT), [key]).fetchone()
            if row is None:
                con.execute(sql(q.EFFECT_INSERT), [key, run_id, node_id, checkpoint_seq, name, now, now])
            else:
                found = self._effect_record(row)
                if found.status == "done" or (found.status == "started" and not repeat_started):
                    return found, False
                con.execute(sql(q.EFFECT_RESTART), [now, key])
            row = con.execute(sql(q.EFFECT), [key]).fetchone()
        return self._effect_record(row), True

    def finish_effect(
        self, key: str, *, result: Any = None, error: dict[str, Any] | None = None, by: str = "effect"
    ) -> bool:
        """Record how started effect `key` ended: `done` with `result` (JSON), or `failed` with
        `error`. Returns False when the record was not `started` (it stays as it is)."""
        with self._effect_tx(key) as con:
            applied = con.execute(
                self.dialect.sql(q.EFFECT_FINISH),
                ["failed" if error is not None else "done", _dump(result), _dump(error), by, _now(), key],
            ).fetchall()
        return bool(applied)

    def effect(self, key: str) -> EffectRecord | None:
        with self._effects_reading() as con:
            row = con.execute(self.dialect.sql(q.EFFECT), [key]).fetchone()
        return self._effect_record(row) if row else None

    def effects(self, run_id: str | None = None) -> list[EffectRecord]:
        """The effect records, oldest first (of one run when `run_id` is given)."""
        with self._effects_reading() as con:
            if run_id is None:
                rows = con.execute(self.dialect.sql(q.EFFECTS)).fetchall()
            else:
                rows = con.execute(self.dialect.sql(q.EFFECTS_OF_RUN), [run_id]).fetchall()
        return [self._effect_record(r) for r in rows]

    def _effect_record(self, r: Any) -> EffectRecord:
        r = tuple(r)
        load = self.dialect.load
        try:
            result, error = load(r[6]), load(r[7])
        except ValueError:
            raise StoreError(
                f"the effect record {r[0]!r} holds damaged JSON; restore {self.dialect.restore_what} from a backup"
            ) from None
        return EffectRecord(
            key=r[0], run_id=r[1], node_id=r[2], checkpoint_seq=r[3], name=r[4], status=r[5], result=result,
            error=error, tries=int(r[8]), settled_by=r[9], created_at=r[10], updated_at=r[11],
        )  # fmt: skip
