"""A run's journal: the numbering of its events, its writes, and who hears of them.

`Run` holds one `Journal` (composition, not a mixin). Every boundary the run commits is one call
of `write` (one journal transaction in the store); the events it carried are handed to the run's
observers (`run.on_event`) and streams (`run.watch`) once the write returned. A write the store
refused leaves no event behind: the numbering goes back to the first event of that transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .errors import StoreError
from .observe import run_tracer
from .records import EventRecord, RunRecord

if TYPE_CHECKING:
    from .lab import Lab

__all__ = ("Journal",)

log = logging.getLogger("lab.run")

_EVENTS = frozenset({"ev", "b"})
"""Row kinds that number events: an event, and a boundary row (its `settled` is `ev`, lab/store/boundary.py)."""


class Journal:
    """Event rows and writes of one run (`run.id`) to its lab's store."""

    __slots__ = ("lab", "run_id", "next_ev", "stash", "undo", "observers", "sinks", "pending", "tracer")

    def __init__(self, lab: Lab, run_id: str, next_ev: int, record: RunRecord | None = None):
        self.lab = lab
        self.run_id = run_id
        self.next_ev = next_ev
        """The sequence number the run's next event gets."""
        self.stash: list[dict[str, Any]] = []
        """Rows held back to ride with the run's next write (a step settlement and the next `entered`)."""
        self.undo: Callable[[], None] | None = None
        """Called when the write that carried `stash` failed: the run forgets what the rows recorded."""
        self.observers: list[Callable[[EventRecord], None]] = []
        """`run.on_event` callbacks: each gets every written event."""
        self.sinks: list[Callable[[list[EventRecord]], None]] = []
        """Streams: each gets every written batch of events (one journal transaction) at once."""
        self.pending: list[EventRecord] = []
        """Events built since the last write, for the observers and sinks (only while someone listens)."""
        self.tracer = run_tracer(lab, run_id, next_ev, record)
        """The run's OpenTelemetry spans (lab.observe), fed every transaction before it is stored; None when off."""

    def event_row(
        self,
        kind: str,
        *,
        node_id: str | None = None,
        attempt: int | None = None,
        checkpoint_seq: int | None = None,
        payload: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The journal row of the run's next event (built directly: this is the hot path)."""
        seq = self.next_ev
        self.next_ev = seq + 1
        row = {
            "t": "ev",
            "run_id": self.run_id,
            "seq": seq,
            "kind": kind,
            "node_id": node_id,
            "attempt": attempt,
            "checkpoint_seq": checkpoint_seq,
            "payload": payload or {},
            "created_at": time.time(),
        }
        if self.observers or self.sinks:
            self.pending.append(
                EventRecord(
                    run_id=self.run_id,
                    seq=seq,
                    kind=kind,  # type: ignore[arg-type]
                    node_id=node_id,
                    attempt=attempt,
                    checkpoint_seq=checkpoint_seq,
                    payload=row["payload"],
                    created_at=datetime.fromtimestamp(row["created_at"], UTC).replace(tzinfo=None),
                )
            )
        return row

    def hold(self, rows: list[dict[str, Any]], undo: Callable[[], None]) -> None:
        """Keep `rows` for the run's next write (one transaction with it); `undo` if that write fails."""
        self.stash.extend(rows)
        self.undo = undo

    def write(self, rows: list[dict[str, Any]], *, sync: bool, hot: bool = False) -> None:
        """Write `rows` as one journal transaction (through to disk when `sync`), then tell the listeners.

        Rows held back (`hold`) lead the transaction; if it fails they are dropped with it and
        their `undo` is called, so the run's head goes back to what is written. `hot`: a boundary
        inside a running drive (`Store.write`).
        """
        undo = None
        if self.stash:
            rows, self.stash = [*self.stash, *rows], []
            undo, self.undo = self.undo, None
        if self.tracer is not None:
            self.tracer(rows)
        try:
            self.lab.store.write(rows, sync=sync, hot=hot)
        except StoreError:
            # nothing of this transaction was kept: its events never happened, the head stands
            seqs = [r["seq"] if r["t"] == "ev" else r["ev"] for r in rows if r.get("t") in _EVENTS and r.get("run_id") == self.run_id]
            if seqs:
                self.next_ev = min(seqs)
                self.pending = [e for e in self.pending if e.seq < self.next_ev]
            if undo is not None:
                undo()
            raise
        if self.observers or self.sinks:
            self.notify()

    def notify(self) -> None:
        """Hand the events written since the last call to the observers and sinks (their errors are logged)."""
        if self.observers or self.sinks:
            events, self.pending = self.pending, []
            for ev in events:
                for cb in list(self.observers):
                    try:
                        cb(ev)
                    except Exception:
                        log.exception("event observer failed on %s event of run %s", ev.kind, self.run_id)
            for sink in list(self.sinks) if events else ():
                try:
                    sink(events)
                except Exception:
                    log.exception("event stream of run %s failed", self.run_id)
