"""A store's rows as the lab's records (lab/records.py), for both backends.

The columns are `sql_text.py`'s (`RUN_COLS`, ...); JSON columns are read through the backend's
dialect (DuckDB returns text, psycopg decoded `jsonb`). Stored JSON that cannot be read fails
with a `CheckpointError` naming the run, and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..errors import CheckpointError
from ..records import CheckpointRecord, EventRecord, PendingStation, RunRecord, WaitRecord
from .dialect import Dialect

__all__ = ("run_record", "checkpoint_record", "event_record", "event_rows_text", "wait_record")


def run_record(d: Dialect, r: tuple[Any, ...]) -> RunRecord:
    """A `RUN_COLS` row."""
    return RunRecord(
        run_id=r[0],
        graph_key=r[1],
        revision=int(r[2]),
        digest=r[3],
        status=r[4],
        head_seq=r[5],
        durability=r[6],
        output=d.load(r[7]),
        error=d.load(r[8]),
        created_at=r[9],
        updated_at=r[10],
        parent_run_id=r[11],
        parent_seq=r[12],
        breakpoints=d.load(r[13]),
    )


def checkpoint_record(d: Dialect, r: tuple[Any, ...]) -> CheckpointRecord:
    """A `CP_COLS` row."""
    run_id, seq = r[0], int(r[1])
    try:
        state = d.load(r[4])
        nxt = d.load(r[5])
        output = d.load(r[6])
        counters = d.load(r[8])
        stations = tuple(PendingStation.from_json(p) for p in nxt)
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError(
            f"stored JSON is damaged ({exc}); other runs and checkpoints are unaffected: fork the run from "
            f"an earlier checkpoint (lab.fork(run_id, seq)), or restore {d.restore_what} from a backup",
            run_id=run_id,
            seq=seq,
        ) from None
    return CheckpointRecord(
        run_id=run_id,
        seq=seq,
        parent_seq=r[2],
        status=r[3],
        state=state,
        next=stations,
        output=output,
        created_at=r[7],
        counters=counters,
    )


def event_record(d: Dialect, r: tuple[Any, ...]) -> EventRecord:
    """An `EV_COLS` row."""
    return EventRecord(
        run_id=r[0],
        seq=int(r[1]),
        kind=r[2],
        node_id=r[3],
        attempt=r[4],
        checkpoint_seq=r[5],
        payload=d.event_payload(r[6]),
        created_at=r[7],
    )


def event_rows_text(events: Iterable[EventRecord]) -> str:
    """Events as the JSON text `Store.event_rows_json` returns (rows of `records.EVENT_ROW`), built in
    Python: a store without the database's own build, or a payload the database cannot read."""
    rows = [
        [
            e.seq,
            e.kind,
            e.node_id,
            e.attempt,
            e.checkpoint_seq,
            e.payload if isinstance(e.payload, dict) else {},
            e.created_at.isoformat(timespec="milliseconds"),
        ]
        for e in events
    ]
    return json.dumps(rows, ensure_ascii=False, separators=(",", ":"), default=str)


def wait_record(d: Dialect, r: tuple[Any, ...]) -> WaitRecord:
    """A `WAIT_COLS` row."""
    try:
        details, prior, resolution = d.load(r[6]), d.load(r[7]) or [], d.load(r[10])
    except ValueError as exc:
        raise CheckpointError(
            f"the stored wait {r[1]} is damaged ({exc}); other runs are unaffected", run_id=r[0], seq=r[4]
        ) from None
    return WaitRecord(
        run_id=r[0],
        owner=r[1],
        kind=r[2],
        node_id=r[3],
        checkpoint_seq=int(r[4]),
        prompt=r[5],
        details=details,
        prior=prior,
        created_at=r[8],
        resolved_at=r[9],
        resolution=resolution,
    )
