"""The PostgreSQL store's rows as the lab's records: the columns each read selects, and the
record each row becomes (the same records as DuckDB's, lab/records.py)."""

from __future__ import annotations

from typing import Any

from ..errors import CheckpointError
from ..records import CheckpointRecord, EventRecord, PendingStation, RunRecord, WaitRecord

__all__ = (
    "RUN_COLS", "CP_COLS", "WAIT_COLS", "EV_COLS", "run_record", "checkpoint_record", "event_record", "wait_record",
)  # fmt: skip

RUN_COLS = (
    "run_id, graph_key, revision, digest, status, head_seq, durability, output, error, "
    "created_at, updated_at, parent_run_id, parent_seq, breakpoints"
)
CP_COLS = "run_id, seq, parent_seq, status, state, next, output, created_at, counters"
WAIT_COLS = (
    "run_id, owner, kind, node_id, checkpoint_seq, prompt, details, prior, created_at, resolved_at, resolution"
)
EV_COLS = "run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at"



def run_record(r: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        run_id=r[0],
        graph_key=r[1],
        revision=int(r[2]),
        digest=r[3],
        status=r[4],
        head_seq=r[5],
        durability=r[6],
        output=r[7],
        error=r[8],
        created_at=r[9],
        updated_at=r[10],
        parent_run_id=r[11],
        parent_seq=r[12],
        breakpoints=r[13],
    )


def checkpoint_record(r: tuple[Any, ...]) -> CheckpointRecord:
    run_id, seq = r[0], int(r[1])
    try:
        stations = tuple(PendingStation.from_json(p) for p in r[5])
    except (ValueError, TypeError, KeyError) as exc:
        raise CheckpointError(
            f"stored JSON is damaged ({exc}); other runs and checkpoints are unaffected: fork the run from "
            "an earlier checkpoint (lab.fork(run_id, seq)), or restore the database from a backup",
            run_id=run_id,
            seq=seq,
        ) from None
    return CheckpointRecord(
        run_id=run_id,
        seq=seq,
        parent_seq=r[2],
        status=r[3],
        state=r[4],
        next=stations,
        output=r[6],
        created_at=r[7],
        counters=r[8],
    )


def event_record(r: tuple[Any, ...]) -> EventRecord:
    return EventRecord(
        run_id=r[0],
        seq=int(r[1]),
        kind=r[2],
        node_id=r[3],
        attempt=r[4],
        checkpoint_seq=r[5],
        payload=r[6] if isinstance(r[6], dict) else {},
        created_at=r[7],
    )


def wait_record(r: tuple[Any, ...]) -> WaitRecord:
    return WaitRecord(
        run_id=r[0],
        owner=r[1],
        kind=r[2],
        node_id=r[3],
        checkpoint_seq=int(r[4]),
        prompt=r[5],
        details=r[6],
        prior=r[7] or [],
        created_at=r[8],
        resolved_at=r[9],
        resolution=r[10],
    )

