"""A new agent job whose rows are only in the journal (jobs.py `journals_new_jobs`), and its lines.

A job of a run this process created rides in its park's journal write (QUEUED and its first
event). While no fold has taken those rows since (the store says so with a `window`: on DuckDB,
the file held by this process all along, so no other process could fold its journal, and no fold
here), what the job's moves record next is journalled too: a `job` line with the job's whole row as
the moves leave it (the fold keeps a job's last line) and a `jev` line per new event. Once a fold
may have taken the rows, the job's next write is a transaction that inserts the row and every event
so far (if a fold stored the row first, that insert meets the key and the write moves the stored row).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

__all__ = ("Journalled", "FIELD")

FIELD = {"status": 9, "output": 11, "error": 12, "usage": 13, "worker": 14, "updated_at": 16, "ended_at": 17}
"""Where a job's changing columns sit in its row (`q.JOB_COLS`' order)."""
_JSON = (7, 11, 12, 13, 14)
"""The row's JSON columns (request, output, error, usage, worker): kept as values, dumped for SQL."""


def _unix(at: datetime | None) -> float | None:
    return None if at is None else at.replace(tzinfo=UTC).timestamp()


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


@dataclasses.dataclass(frozen=True)
class Journalled:
    """A job known only to the journal: its row and every event so far, and the store's window."""

    row: tuple[Any, ...]
    """The job's row in `q.JOB_COLS`' order, JSON columns as values, times as naive UTC datetimes."""
    events: tuple[tuple[Any, ...], ...]
    """Every event of the job so far: (request_id, seq, kind, from_status, to_status, payload, created_at)."""
    window: Any
    """The store's token from when the job's rows were first journalled (None: they may be folded any time)."""

    def advanced(self, changes: dict[str, Any], events: list[tuple[Any, ...]]) -> Journalled:
        """The job after a write: `changes` to its row (by column name), `events` after its others."""
        row = list(self.row)
        for name, value in changes.items():
            row[FIELD[name]] = value
        return dataclasses.replace(self, row=tuple(row), events=(*self.events, *events))

    def head(self) -> tuple[str, int]:
        """The job's status and the seq of its next event."""
        return self.row[FIELD["status"]], self.events[-1][1] + 1

    def line_seen(self, line: Any) -> bool:
        """A worker's progress line already recorded among the job's events."""
        return any(isinstance(e[5], dict) and e[5].get("line") == line for e in self.events)

    def sql_row(self) -> list[Any]:
        """The row's parameters for `q.JOB_INSERT_NEW`."""
        return [_dump(v) if i in _JSON else v for i, v in enumerate(self.row)]

    def sql_events(self) -> list[Any]:
        """Every event's parameters for `q.job_events_insert(len(events))`."""
        params: list[Any] = []
        for rid, seq, kind, from_status, to_status, payload, at in self.events:
            params += [rid, seq, kind, from_status, to_status, json.dumps(payload), at]
        return params

    def lines(self, since: int) -> list[dict[str, Any]]:
        """The journal lines of the job's row as it is now and of its events from `since` (a seq) on."""
        r = self.row
        job = {
            "t": "job", "request_id": r[0], "run_id": r[1], "node_id": r[2], "wait_owner": r[3], "checkpoint_seq": r[4],
            "runtime": r[5], "runner": r[6], "request": r[7], "digest": r[8], "status": r[9], "retry_of": r[10],
            "output": r[11], "error": r[12], "usage": r[13], "worker": r[14], "created_at": _unix(r[15]),
            "updated_at": _unix(r[16]), "ended_at": _unix(r[17]),
        }  # fmt: skip
        return [job] + [
            {
                "t": "jev", "request_id": rid, "seq": seq, "kind": kind, "from_status": from_status,
                "to_status": to_status, "payload": payload, "created_at": _unix(at),
            }  # fmt: skip
            for rid, seq, kind, from_status, to_status, payload, at in self.events
            if seq >= since
        ]
