"""The store's `calls` table: the recorded calls of stations (lab/recording.py, docs/replay.md).

Mixed into both stores (`DuckDBCalls`, `PostgresCalls`), which give it a connection to read; the SQL
is in sql_text.py. Calls are journalled: `record_call` hands the store's `write` one `call` row, held
with the call's `recorded` event (as `durability="batch"` holds a boundary) until the station's next
write (its settlement, its failure or its park) carries them in the same transaction; DuckDB's fold
and PostgreSQL's `graphlab_write` store it, and find its station try (`attempt`) among the events
then. So recording costs a station no read and no write of its own. A process that dies mid-station
loses the calls of that try (the next try makes them again), as it loses the try itself. A `live` row holds the request and the response as JSON; a `replayed` row
names the live row it replayed (`replayed_from`) and keeps no copy of the response.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ..errors import StoreError
from . import sql_text as q
from .dialect import Dialect

__all__ = ("CallMode", "CallRecord", "CallTables", "call_record", "call_row")

CallMode = Literal["live", "replayed"]
"""`live`: the call ran and its response was recorded; `replayed`: a recorded response was handed back."""


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call a station made: a model request or a `@lab.recorded` function's call."""

    call_id: str
    run_id: str
    node_id: str
    checkpoint_seq: int | None
    """The checkpoint the station was entered from (its visit)."""
    attempt: int | None
    """The station try (the `entered` event's seq, the events' `attempt` column), None when unknown."""
    call_index: int
    """Which call of the try this is, from 1, counted per kind and name (`model:<model name>`, `function:<qualname>`)."""
    kind: str
    """`model` (a pydantic-ai model request) or `function` (a `@lab.recorded` function)."""
    name: str
    digest: str
    """The sha256 of the request's canonical JSON (what a replay matches on)."""
    mode: CallMode
    replayed_from: str | None = None
    """The live call a replayed call handed back."""
    request: Any = None
    response: Any = None
    """The response as JSON (live calls only)."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    ms: float | None = None
    """How long the call took (live) or the replay took (replayed), in milliseconds."""
    created_at: datetime | None = None

    @property
    def tokens(self) -> int:
        """Input plus output tokens (those a replayed call saved)."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)


class CallTables:
    """Record and read recorded calls, on any backend."""

    dialect: Dialect

    @abstractmethod
    def write(self, rows: Sequence[dict[str, Any]], *, sync: bool = True, hot: bool = False) -> None:
        """The store's journal write (`Store.write`)."""

    @abstractmethod
    def _calls_reading(self) -> AbstractContextManager[Any]:
        """A connection to read the calls table; driver errors become `StoreError`."""

    def record_call(self, rec: CallRecord, *, sync: bool = False) -> None:
        """Journal one call: held for the run's next write unless `sync` (then written through at once)."""
        self.write([call_row(rec)], sync=sync)

    def calls(self, run_id: str) -> list[CallRecord]:
        """The calls of one run, oldest first (live and replayed)."""
        with self._calls_reading() as con:
            rows = con.execute(self.dialect.sql(q.CALLS_OF_RUN), [run_id]).fetchall()
        return [self._call_record(r) for r in rows]

    def lineage_calls(self, run_id: str) -> list[CallRecord]:
        """The live calls of `run_id` and of every run it was forked from, newest first (one read)."""
        with self._calls_reading() as con:
            rows = con.execute(self.dialect.sql(q.CALLS_IN_LINEAGE), [run_id]).fetchall()
        return [self._call_record(r) for r in rows]

    def recorded_calls(self, run_ids: Sequence[str], node_id: str | None = None) -> list[CallRecord]:
        """The live calls of `run_ids` (of station `node_id` when given), newest first: what a replay may use."""
        if not run_ids:
            return []
        text = q.recorded_calls(len(run_ids), node=node_id is not None)
        params = [*run_ids, *([node_id] if node_id is not None else [])]
        with self._calls_reading() as con:
            rows = con.execute(self.dialect.sql(text), params).fetchall()
        return [self._call_record(r) for r in rows]

    def _call_record(self, r: Any) -> CallRecord:
        r = tuple(r)
        try:
            request, response = self.dialect.load(r[11]), self.dialect.load(r[12])
        except ValueError:
            raise StoreError(
                f"the recorded call {r[0]!r} holds damaged JSON; restore {self.dialect.restore_what} from a backup"
            ) from None
        return CallRecord(
            call_id=r[0], run_id=r[1], node_id=r[2], checkpoint_seq=r[3], attempt=r[4], call_index=int(r[5]),
            kind=r[6], name=r[7], digest=r[8], mode=r[9], replayed_from=r[10], request=request, response=response,
            input_tokens=r[13], output_tokens=r[14], ms=r[15], created_at=r[16],
        )  # fmt: skip


def call_row(rec: CallRecord) -> dict[str, Any]:
    """The journal row of a call (`t = 'call'`); its `attempt` is found when it is stored."""
    created = rec.created_at.replace(tzinfo=UTC).timestamp() if rec.created_at is not None else time.time()
    return {
        "t": "call", "run_id": rec.run_id, "call_id": rec.call_id, "node_id": rec.node_id,
        "checkpoint_seq": rec.checkpoint_seq, "call_index": rec.call_index, "kind": rec.kind, "name": rec.name,
        "digest": rec.digest, "mode": rec.mode, "replayed_from": rec.replayed_from, "request": rec.request,
        "response": rec.response, "input_tokens": rec.input_tokens, "output_tokens": rec.output_tokens, "ms": rec.ms,
        "created_at": created,
    }  # fmt: skip


def call_record(row: dict[str, Any], *, attempt: int | None = None) -> CallRecord:
    """The `CallRecord` of a call's journal row (`call_row`'s keys; others, such as the journal's `j`, are
    ignored): what a recorder keeps of a call it wrote, made a record only when it is needed."""
    created = row.get("created_at")
    return CallRecord(
        call_id=row["call_id"], run_id=row["run_id"], node_id=row["node_id"], checkpoint_seq=row["checkpoint_seq"],
        attempt=attempt, call_index=row["call_index"], kind=row["kind"], name=row["name"], digest=row["digest"],
        mode=row["mode"], replayed_from=row["replayed_from"], request=row["request"], response=row["response"],
        input_tokens=row["input_tokens"], output_tokens=row["output_tokens"], ms=row["ms"],
        created_at=datetime.fromtimestamp(created, UTC).replace(tzinfo=None) if created is not None else None,
    )  # fmt: skip
