"""The store's reads, written once over `sql_text.py` for every SQL backend.

`SqlReads` is mixed into a store that gives it `dialect`, `path` and `_fetch_each` (run
statements on one connection and return each one's rows); each backend keeps its own way of
reaching the data (DuckDB folds the journal first, PostgreSQL takes a pooled connection) and of
translating its driver's errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import RunNotFoundError, StoreError
from ..records import CheckpointRecord, EventRecord, RunRecord, WaitRecord
from . import sql_text as q
from .dialect import Dialect
from .rows import checkpoint_record, event_record, event_rows_text, run_record, wait_record

__all__ = ("SqlReads", "branch_path", "lineage")

Rows = list[tuple[Any, ...]]


def branch_path(parent: dict[int, int | None], head: int) -> list[int]:
    """The sequence numbers from the root to `head`, following `parent` links (a loop ends the walk)."""
    path: list[int] = []
    seq: int | None = head
    while seq is not None and seq in parent and len(path) <= len(parent):
        path.append(seq)
        seq = parent[seq]
    path.reverse()
    return path


def lineage(recs: dict[str, RunRecord], run_id: str) -> list[RunRecord]:
    """`run_id`'s ancestors (root first), itself, then every descendant breadth-first, from `recs`."""
    chain = [recs[run_id]]
    while chain[0].parent_run_id is not None and chain[0].parent_run_id in recs and len(chain) <= len(recs):
        chain.insert(0, recs[chain[0].parent_run_id])
    children: dict[str, list[RunRecord]] = {}
    for rec in recs.values():
        if rec.parent_run_id is not None:
            children.setdefault(rec.parent_run_id, []).append(rec)
    out = list(chain)
    queue = [run_id]
    while queue:
        for child in sorted(children.get(queue.pop(0), []), key=lambda r: r.run_id):
            out.append(child)
            queue.append(child.run_id)
    return out


class SqlReads:
    """Runs, checkpoints, events and waits read with the shared statements."""

    dialect: Dialect
    path: str

    def _fetch_each(self, what: str, statements: Sequence[tuple[str, Sequence[Any]]], *, flush: bool) -> list[Rows]:
        """Each (rendered statement, parameters)'s rows, on one connection; `what` names the read in errors.

        `flush=True`: rows this process holds back (durability="batch") are written first."""
        raise NotImplementedError

    def _fetch(self, what: str, text: str, params: Sequence[Any] = (), *, flush: bool = False) -> Rows:
        return self._fetch_each(what, [(self.dialect.sql(text), params)], flush=flush)[0]

    def _not_found(self, run_id: str) -> RunNotFoundError:
        return RunNotFoundError(f"no run {run_id!r} in the store {self.path}; lab.runs() lists the runs it holds")

    def get_run(self, run_id: str) -> RunRecord:
        rows = self._fetch("read a run", q.GET_RUN, [run_id])
        if not rows:
            raise self._not_found(run_id)
        return run_record(self.dialect, rows[0])

    def list_runs(self, *, graph_key: str | None = None, status: str | None = None) -> list[RunRecord]:
        sql = q.list_runs(graph_key=graph_key is not None, status=status is not None)
        params = [v for v in (graph_key, status) if v is not None]
        return [run_record(self.dialect, r) for r in self._fetch("list runs", sql, params)]

    def family(self, run_id: str) -> list[RunRecord]:
        """The run's lineage: its ancestors (root first), itself, then every descendant."""
        recs = {r[0]: run_record(self.dialect, r) for r in self._fetch("read a run's lineage", q.FAMILY, [run_id])}
        if run_id not in recs:
            raise self._not_found(run_id)
        return lineage(recs, run_id)

    def next_seqs(self, run_id: str) -> tuple[int, int]:
        """The next free checkpoint and event sequence numbers of a run."""
        rows = self._fetch("read a run's sequence numbers", q.NEXT_SEQS, [run_id, run_id], flush=True)
        return int(rows[0][0]), int(rows[0][1])

    def checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        return [checkpoint_record(self.dialect, r) for r in self._fetch("read checkpoints", q.CHECKPOINTS, [run_id])]

    def checkpoint(self, run_id: str, seq: int) -> CheckpointRecord | None:
        rows = self._fetch("read a checkpoint", q.CHECKPOINT, [run_id, seq])
        return checkpoint_record(self.dialect, rows[0]) if rows else None

    def checkpoints_in(self, run_id: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        """The checkpoints with these sequence numbers, in the order given."""
        if not seqs:
            return []
        rows = self._fetch("read checkpoints", q.CHECKPOINTS_IN, [run_id, [int(s) for s in seqs]])
        by_seq = {int(r[1]): r for r in rows}
        return [checkpoint_record(self.dialect, by_seq[s]) for s in seqs if s in by_seq]

    def seqs(self, run_id: str) -> list[int]:
        """Every checkpoint sequence number of a run, ascending."""
        return [int(r[0]) for r in self._fetch("read checkpoints", q.SEQS, [run_id])]

    def parents(self, run_id: str) -> dict[int, int | None]:
        """Each checkpoint's parent (`seq -> parent_seq`): the run's checkpoint tree, without states."""
        rows = self._fetch("read checkpoints", q.PARENTS, [run_id])
        return {int(s): (None if p is None else int(p)) for s, p in rows}

    def branch(self, run_id: str, head: int) -> list[int]:
        """The sequence numbers from the root to `head`, following parent links."""
        return branch_path(self.parents(run_id), head)

    def events(self, run_id: str, *, kind: str | None = None) -> list[EventRecord]:
        if kind is None:
            rows = self._fetch("read events", q.EVENTS, [run_id], flush=True)
        else:
            rows = self._fetch("read events", q.EVENTS_OF_KIND, [run_id, kind], flush=True)
        return [event_record(self.dialect, r) for r in rows]

    def events_at(self, run_id: str, checkpoint_seq: int) -> list[EventRecord]:
        rows = self._fetch("read events", q.EVENTS_AT, [run_id, checkpoint_seq], flush=True)
        return [event_record(self.dialect, r) for r in rows]

    def event_tail(self, run_id: str, n: int) -> tuple[int, list[EventRecord]]:
        """How many events a run has, and its last `n` in order (a view of a long run reads only these)."""
        d = self.dialect
        count, rows = self._fetch_each(
            "read events", [(d.sql(q.EVENT_COUNT), [run_id]), (d.sql(q.EVENT_TAIL), [run_id, max(0, n)])], flush=True
        )
        return int(count[0][0]), [event_record(d, r) for r in reversed(rows)]

    def event_rows_json(self, run_id: str) -> str:
        """A run's events as one JSON array of `records.EVENT_ROW` rows by seq, built by the database in one read.

        A payload the database cannot read as JSON (a store edited outside the lab) fails the
        database's build; the rows are then built here from `events`, which keeps it under
        `damaged_payload`, so the answer is the same rows either way."""
        try:
            rows = self._fetch("read events", q.EVENT_ROWS_JSON[self.dialect.name], [run_id], flush=True)
        except StoreError:
            return event_rows_text(self.events(run_id))
        return str(rows[0][0]) if rows and rows[0][0] is not None else "[]"

    def settled_stations(self, run_id: str) -> dict[int, str]:
        """Checkpoint seq -> the station whose settlement wrote it, for every settled boundary."""
        rows = self._fetch("read events", q.SETTLED_STATIONS, [run_id], flush=True)
        return {int(seq): node for seq, node in rows}

    def waits(self, run_id: str) -> list[WaitRecord]:
        """Every wait of a run, oldest first: the open one (if any) and the answered evidence."""
        return [wait_record(self.dialect, r) for r in self._fetch("read waits", q.WAITS, [run_id])]

    def wait_at(self, run_id: str, seq: int) -> WaitRecord | None:
        """The wait bound to checkpoint `seq` of a run (a waiting checkpoint has exactly one)."""
        rows = self._fetch("read waits", q.WAIT_AT, [run_id, seq])
        return wait_record(self.dialect, rows[0]) if rows else None

    def open_waits(self) -> list[WaitRecord]:
        """Every unanswered wait of a waiting run in the store (what needs a person)."""
        return [wait_record(self.dialect, r) for r in self._fetch("read waits", q.OPEN_WAITS)]
