"""The store interface: exactly what the rest of the lab calls on a store, with its contract.

Two backends implement it: `DuckDBStore` (the embedded default, one file per machine) and
`PostgresStore` (a shared server, `Lab("postgresql://...")`). `tests/store/` runs one
conformance suite against both. The engine hands the store *rows*: plain dicts in one wire
format (`t` names the table, times are Unix seconds, JSON values are Python JSON values), built
by the static row builders below or directly on the hot path (`Run.settled`). A backend decides
how a transaction of rows becomes durable; what it must guarantee is written on each method.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import duckdb

from ..manifest import Manifest
from ..records import CheckpointRecord, EventRecord, RunRecord, WaitRecord
from .holders import Process
from .rows import event_rows_text

__all__ = ("Store", "unix_seconds")


def unix_seconds(value: datetime) -> float:
    """How rows carry times: Unix seconds (cheap to take per boundary); naive values are UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


class Store(ABC):
    """Graphs, runs, the checkpoint tree, events and waits of one lab, behind one contract.

    Contract shared by every backend (the conformance suite in `tests/store/` checks each):

    - **A boundary is atomic.** `write(rows)` keeps all of its rows or none of them: a settled
      event is never stored without its checkpoint, a verdict never without its wait's answer.
    - **Sequence numbers are gap-free.** Checkpoint `seq` and event `seq` count 0, 1, 2, ... per
      run; a checkpoint id is written once, and a different checkpoint under a taken id is refused.
    - **The first verdict wins.** A wait's resolution is set once; a later answer for the same
      owner changes nothing (PostgreSQL refuses it with `WaitAnsweredError`).
    - **`sql` is read-only** by construction, not by inspection alone, and returns a private
      DuckDB relation that cannot reach the store.
    - **Newer schemas are refused** with `StoreSchemaError`, changing nothing; older ones are
      migrated on open.
    - Driver errors never escape: they become `StoreError` (or a subclass) naming what to do.
    """

    path: str
    """Where the store lives: a file path, `":memory:"`, or a `postgresql://` URL (no password)."""
    closed: bool
    """True once `close()` ran; every later call raises `StoreError` saying how to reopen."""
    live_runs: dict[str, Any]
    """Run handles open in this process, shared by every `Lab` on this store."""
    recovery_done: bool
    """Set by the first `Lab` that marked this store's dead attempts `interrupted`."""

    # -- lifecycle -----------------------------------------------------------------------

    @abstractmethod
    def close(self) -> None:
        """Make everything written durable and release the store for every Lab sharing it."""

    @abstractmethod
    def write(self, rows: Sequence[dict[str, Any]], *, sync: bool = True, hot: bool = False) -> None:
        """Store one transaction of rows, atomically.

        `sync=False` (durability="batch") may hold the transaction in memory; it is written, in
        order, with the next `sync=True` write or `flush()`. A write that fails raises a
        `StoreError` (`UnstorableValueError` for a value the store cannot hold) and keeps none of
        its rows. `hot=True` marks a boundary inside a running drive (a held settlement with the
        next `entered`): a store may make the checks it repeats on every write less often then.
        """

    @abstractmethod
    def flush(self) -> None:
        """Write every transaction `write(..., sync=False)` held back."""

    @abstractmethod
    def fold(self) -> None:
        """Make everything written visible to every reader (DuckDB folds its journal; a no-op elsewhere)."""

    writer_records_answers: bool = False
    """An answer from a process that does not write the run is recorded by the run's writer (its
    `verdict` event) when it goes on: DuckDB, whose event numbers only the writer gives."""

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the store across reads and writes no other process may come between (a takeover of a
        run, an answer to a wait). DuckDB takes its lock for them; a server store needs nothing here."""
        yield

    def writer(self, run_id: str) -> Process | None:
        """The live process other than this one that writes `run_id`, or None (docs/store.md)."""
        return None

    def claim(self, run_id: str) -> None:
        """Record this process as the writer of `run_id` (inside `held()`, after `writer` said None)."""
        return None

    def abandoned(self, run_id: str) -> bool:
        """True when no live process is stepping `run_id`, so an attempt left open in it died.

        `Lab` marks such a run `interrupted` on open. A store one process holds at a time
        (DuckDB) knows every other writer is gone; a shared store asks its server.
        """
        return True

    def abandoned_among(self, run_ids: Sequence[str]) -> set[str]:
        """Which of `run_ids` no live process steps, for showing them (`lab.runs()`): one look for all.

        Unlike `abandoned` before a takeover, showing a list need not fold every journal again per run."""
        return {r for r in run_ids if self.abandoned(r)}

    # -- graphs --------------------------------------------------------------------------

    @abstractmethod
    def register_graph(self, manifest: Manifest) -> int:
        """The revision number of this manifest's digest under its key, stored on first sight."""

    @abstractmethod
    def manifest(self, key: str, revision: int) -> Manifest | None:
        """The stored manifest of a graph revision, or None."""

    # -- reading runs --------------------------------------------------------------------

    @abstractmethod
    def get_run(self, run_id: str) -> RunRecord:
        """The run's row; `RunNotFoundError` naming the store if there is none."""

    @abstractmethod
    def list_runs(self, *, graph_key: str | None = None, status: str | None = None) -> list[RunRecord]:
        """Runs oldest first (by `created_at`, then id), filtered by graph key and status."""

    @abstractmethod
    def family(self, run_id: str) -> list[RunRecord]:
        """The run's lineage: its ancestors (root first), itself, then every descendant."""

    @abstractmethod
    def next_seqs(self, run_id: str) -> tuple[int, int]:
        """The next free checkpoint and event sequence numbers of a run."""

    # -- the checkpoint tree -------------------------------------------------------------

    @abstractmethod
    def checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        """Every checkpoint of a run, by seq. Damaged JSON raises `CheckpointError` naming run and seq."""

    @abstractmethod
    def checkpoint(self, run_id: str, seq: int) -> CheckpointRecord | None:
        """One checkpoint, or None."""

    @abstractmethod
    def checkpoints_in(self, run_id: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        """The checkpoints with these sequence numbers, in the order given (missing ones left out)."""

    @abstractmethod
    def seqs(self, run_id: str) -> list[int]:
        """Every checkpoint sequence number of a run, ascending."""

    @abstractmethod
    def parents(self, run_id: str) -> dict[int, int | None]:
        """Each checkpoint's parent (`seq -> parent_seq`): the tree without states."""

    @abstractmethod
    def branch(self, run_id: str, head: int) -> list[int]:
        """The sequence numbers from the root to `head`, following parent links (time travel)."""

    @abstractmethod
    def delete_checkpoints(self, run_id: str, keep: Sequence[int]) -> int:
        """Delete a run's checkpoints except `keep`, atomically; how many went. Callers check terminality."""

    @abstractmethod
    def delete_run(self, run_id: str) -> None:
        """Delete a run with its checkpoints, events and waits, atomically. Callers check terminality."""

    # -- events --------------------------------------------------------------------------

    @abstractmethod
    def events(self, run_id: str, *, kind: str | None = None) -> list[EventRecord]:
        """A run's events by seq, optionally of one kind."""

    def events_at(self, run_id: str, checkpoint_seq: int) -> list[EventRecord]:
        """A run's events bound to checkpoint `checkpoint_seq`, by seq (`run.checkpoint(seq)` reads only
        these). A backend filters in the database; this default filters `events`."""
        return [e for e in self.events(run_id) if e.checkpoint_seq == checkpoint_seq]

    @abstractmethod
    def event_tail(self, run_id: str, n: int) -> tuple[int, list[EventRecord]]:
        """How many events a run has, and its last `n` in order."""

    def event_rows_json(self, run_id: str) -> str:
        """A run's events by seq as one JSON array of rows (`records.EVENT_ROW`): what an exported page
        embeds as is. A backend builds it in the database; this default builds it from `events`."""
        return event_rows_text(self.events(run_id))

    @abstractmethod
    def settled_stations(self, run_id: str) -> dict[int, str]:
        """Checkpoint seq -> the station whose settlement wrote it."""

    # -- waits ---------------------------------------------------------------------------

    @abstractmethod
    def waits(self, run_id: str) -> list[WaitRecord]:
        """Every wait of a run, oldest first: the open one (if any) and the answered evidence."""

    @abstractmethod
    def wait_at(self, run_id: str, seq: int) -> WaitRecord | None:
        """The (latest) wait bound to checkpoint `seq` of a run."""

    @abstractmethod
    def open_waits(self) -> list[WaitRecord]:
        """Every unanswered wait of a run waiting on it, oldest first: what needs a person."""

    # -- SQL -----------------------------------------------------------------------------

    @abstractmethod
    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> duckdb.DuckDBPyRelation:
        """One read-only SELECT (or EXPLAIN of one); the result as a private DuckDB relation.

        What runs, runs in a transaction that is rolled back (read-only on PostgreSQL); a
        statement that would write is refused with `StoreQueryError`.
        """

    # -- rows: the wire format every backend takes ---------------------------------------

    @staticmethod
    def run_row(run: RunRecord) -> dict[str, Any]:
        """A new run (ignored if the id exists)."""
        return {
            "t": "run",
            "run_id": run.run_id,
            "graph_key": run.graph_key,
            "revision": run.revision,
            "digest": run.digest,
            "status": run.status,
            "head_seq": run.head_seq,
            "durability": run.durability,
            "output": run.output,
            "error": run.error,
            "created_at": unix_seconds(run.created_at),
            "updated_at": unix_seconds(run.updated_at),
            "parent_run_id": run.parent_run_id,
            "parent_seq": run.parent_seq,
            "breakpoints": run.breakpoints,
        }

    @staticmethod
    def checkpoint_row(cp: CheckpointRecord) -> dict[str, Any]:
        """A checkpoint; it also becomes its run's head (status, output; error cleared)."""
        return {
            "t": "cp",
            "run_id": cp.run_id,
            "seq": cp.seq,
            "parent_seq": cp.parent_seq,
            "status": cp.status,
            "state": cp.state,
            "next": [p.to_json() for p in cp.next],
            "output": cp.output,
            "created_at": unix_seconds(cp.created_at),
            "counters": cp.counters,
        }

    @staticmethod
    def event_row(ev: EventRecord) -> dict[str, Any]:
        """An event."""
        return {
            "t": "ev",
            "run_id": ev.run_id,
            "seq": ev.seq,
            "kind": ev.kind,
            "node_id": ev.node_id,
            "attempt": ev.attempt,
            "checkpoint_seq": ev.checkpoint_seq,
            "payload": ev.payload,
            "created_at": unix_seconds(ev.created_at),
        }

    @staticmethod
    def update_row(
        run_id: str, *, status: str, head_seq: int | None, output: Any = None, error: Any = None
    ) -> dict[str, Any]:
        """A run's new status, head, output and error."""
        return {
            "t": "upd",
            "run_id": run_id,
            "status": status,
            "head_seq": head_seq,
            "output": output,
            "error": error,
            "updated_at": time.time(),
        }

    @staticmethod
    def wait_row(wait: WaitRecord) -> dict[str, Any]:
        """A park (ignored if the owner exists)."""
        return {
            "t": "wait",
            "owner": wait.owner,
            "run_id": wait.run_id,
            "kind": wait.kind,
            "node_id": wait.node_id,
            "checkpoint_seq": wait.checkpoint_seq,
            "prompt": wait.prompt,
            "details": wait.details,
            "prior": wait.prior,
            "created_at": unix_seconds(wait.created_at),
        }

    @staticmethod
    def resolution_row(owner: str, resolution: dict[str, Any], at: datetime) -> dict[str, Any]:
        """A wait's verdict, answer or grant; the first one for an owner wins."""
        return {"t": "vd", "owner": owner, "resolution": resolution, "resolved_at": unix_seconds(at)}

    @staticmethod
    def breakpoints_row(run_id: str, breakpoints: dict[str, list[str]]) -> dict[str, Any]:
        """A run's breakpoints, replaced whole."""
        return {"t": "bp", "run_id": run_id, "breakpoints": breakpoints}
