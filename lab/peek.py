"""Get-state: a run's status, head, state and next stations read without running or claiming it.

`lab.peek(run_id)` (seed 003: "Returns where the run ... stopped, read from its last checkpoint,
without running anything"). It is `lab.read(run_id)` (lab.history.StoredRun: record, history,
events, waits, from the store alone) plus the head's next stations and, when the run's graph is
declared in this process at the revision the run is pinned to, the state decoded into its
classes; otherwise the state is the stored JSON and `decoded_because` says why.

It writes no event and claims nothing: no `resumed` event, no writer row, no takeover of a run a
live process advances, which keeps advancing it. Each read goes to the store, so it reads the run
as it is now. To step or answer it, `lab.resume(run_id)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .cursors import decode_pending
from .history import StoredRun

if TYPE_CHECKING:
    from .built import BuiltGraph
    from .records import CheckpointRecord, RunRecord
    from .store import Store

__all__ = ("PeekedRun",)


class PeekedRun(StoredRun):
    """A read-only handle on a stored run: `lab.peek(run_id)`. See the module docstring."""

    def __init__(self, store: Store, run_id: str, graph_of: Callable[[str], Any]):
        super().__init__(store, run_id)
        self._graph_of = graph_of  # graph key -> the graph declared in this process, or None

    def _built(self, rec: RunRecord) -> tuple[BuiltGraph | None, str]:
        """The run's pinned revision built here, or None with the reason the state stays JSON."""
        g = self._graph_of(rec.graph_key)
        if g is None:
            return None, f"graph {rec.graph_key!r} is not defined in this process (the state is the stored JSON)"
        built = g.build()
        if built.manifest.digest != rec.digest:
            return None, (
                f"graph {rec.graph_key!r} is defined here at revision {built.revision}, the run is pinned to "
                f"revision {rec.revision} (the state is the stored JSON)"
            )
        return built, "decoded with the graph defined here"

    @property
    def decoded(self) -> bool:
        """Whether `state` / `state_at` / `next` are decoded objects (else stored JSON)."""
        return self._built(self.record)[0] is not None

    @property
    def decoded_because(self) -> str:
        """Why the state is decoded, or why it is the stored JSON."""
        return self._built(self.record)[1]

    def _head(self) -> CheckpointRecord | None:
        head = self.head
        return None if head is None else self._store.checkpoint(self.id, head)

    def state_at(self, seq: int) -> Any:
        """The state at checkpoint `seq`: decoded when the run's graph is declared here, else JSON."""
        data = super().state_at(seq)
        built, _ = self._built(self.record)
        return data if built is None else built.codec.decode_state(data, run_id=self.id, seq=seq)

    @property
    def state_json(self) -> Any:
        """The head checkpoint's state as stored JSON, whether or not it can be decoded."""
        head = self.head
        return None if head is None else super().state_at(head)

    @property
    def next_stations(self) -> tuple[str, ...]:
        """The station ids the head checkpoint runs next (a parallel frontier's tasks; joins left out)."""
        cp = self._head()
        if cp is None:
            return ()
        return tuple(p.node_id for p in cp.next if not (p.meta and "join" in p.meta))

    @property
    def next(self) -> tuple[Any, ...]:
        """The head's pending stations: decoded nodes / tasks when the graph is declared here, else
        the stored `PendingStation`s (node id and fields as JSON)."""
        cp = self._head()
        if cp is None:
            return ()
        built, _ = self._built(self.record)
        if built is None:
            return tuple(cp.next)
        return tuple(decode_pending(built, cp))

    def __repr__(self) -> str:
        rec = self.record
        return (
            f"<PeekedRun {self.id} of {rec.graph_key}@{rec.revision}: {rec.status}, head {rec.head_seq}, "
            f"next {list(self.next_stations)} (read-only)>"
        )
