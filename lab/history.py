"""Time travel on a run: the checkpoint tree, state at any checkpoint, rewind, edits, forks, diffs.

Nothing here deletes: a rewind moves the head and the next step starts a new branch; an edit
writes a new checkpoint; a fork makes a new run with lineage. Rewinding does not undo side
effects a station already performed (seeds 000 and 002): the rewind event lists the stations
whose effects may repeat.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, overload

from pydantic import BaseModel, ValidationError

from .current import note_run
from .cursors import check_cursors, decode_pending
from .diff import StateDiff, diff_json
from .display_hooks import show
from .engine.tasks import JoinAcc, node_id_of
from .errors import CheckpointError, GraphDefinitionError, RunStateError, StateEditError
from .events import ColdStream
from .records import CheckpointRecord, EventRecord, RunRecord
from .run_values import new_run_id

if TYPE_CHECKING:
    from .graph import BuiltGraph
    from .run import Run
    from .store import Store

__all__ = ("TimeTravel", "Checkpoint", "History", "StoredRun")


class History(Sequence[CheckpointRecord]):
    """The checkpoints of a branch (or a whole run), oldest first, read from the store in pages.

    Listing a 100,000-checkpoint branch only walks the parent links; each checkpoint's JSON
    is read and parsed when that part of the history is looked at.
    """

    _PAGE = 1000

    def __init__(self, store: Store, run_id: str, seqs: list[int]):
        self._store = store
        self.run_id = run_id
        self.seqs: tuple[int, ...] = tuple(seqs)
        self._pages: dict[int, list[CheckpointRecord]] = {}

    def __len__(self) -> int:
        return len(self.seqs)

    def _page(self, n: int) -> list[CheckpointRecord]:
        page = self._pages.get(n)
        if page is None:
            chunk = self.seqs[n * self._PAGE : (n + 1) * self._PAGE]
            page = self._pages[n] = self._store.checkpoints_in(self.run_id, chunk)
        return page

    @overload
    def __getitem__(self, index: int) -> CheckpointRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[CheckpointRecord]: ...
    def __getitem__(self, index: int | slice) -> CheckpointRecord | list[CheckpointRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("history index out of range")
        return self._page(index // self._PAGE)[index % self._PAGE]

    def __iter__(self) -> Iterator[CheckpointRecord]:
        for n in range((len(self) + self._PAGE - 1) // self._PAGE):
            yield from self._page(n)

    def __repr__(self) -> str:
        if not self.seqs:
            return f"<History of {self.run_id}: empty>"
        shown = " → ".join(map(str, self.seqs[:12])) + (" → …" if len(self.seqs) > 12 else "")
        return f"<History of {self.run_id}: {len(self.seqs)} checkpoints {shown}>"


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint, decoded: state and next nodes as objects, with the events that led to it."""

    run_id: str
    seq: int
    parent_seq: int | None
    status: str
    state: Any
    next: tuple[Any, ...]
    output: Any
    created_at: datetime
    events: tuple[EventRecord, ...]

    @property
    def next_stations(self) -> tuple[str, ...]:
        return tuple(node_id_of(n) for n in self.next if not isinstance(n, JoinAcc))


_LED_TO = {"started", "settled", "edited", "fork", "done"}


class TimeTravel:
    """Mixed into `Run`: history, state_at, checkpoint, rewind, edit_state, fork, diff."""

    def history(self: Run, *, all_branches: bool = False) -> History:  # type: ignore[misc]
        """The checkpoints of the current branch, root to head; or the whole tree, by seq.

        Each record has `parent_seq`, so a view can draw the tree."""
        store = self.lab.store
        if all_branches:
            return History(store, self.id, store.seqs(self.id))
        if self._head is None:
            return History(store, self.id, [])
        return History(store, self.id, store.branch(self.id, self._head))

    def _record(self: Run, seq: int) -> CheckpointRecord:  # type: ignore[misc]
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise TypeError(f"a checkpoint is named by its sequence number (an int), got {seq!r}")
        rec = self.lab.store.checkpoint(self.id, seq)
        if rec is None:
            last = self._next_cp - 1
            raise CheckpointError(
                f"no checkpoint {seq} in this run (it has 0..{last}); run.history(all_branches=True) lists them",
                run_id=self.id,
            )
        return rec

    def state_at(self: Run, seq: int) -> Any:  # type: ignore[misc]
        """The validated state object at checkpoint `seq`."""
        rec = self._record(seq)
        return self._built.codec.decode_state(rec.state, run_id=self.id, seq=seq)

    def checkpoint(self: Run, seq: int) -> Checkpoint:  # type: ignore[misc]
        """Checkpoint `seq` decoded, with its next stations, status, time and the events that led to it."""
        rec = self._record(seq)
        codec = self._built.codec
        events = tuple(e for e in self.lab.store.events_at(self.id, seq) if e.kind in _LED_TO)
        return Checkpoint(
            run_id=self.id,
            seq=seq,
            parent_seq=rec.parent_seq,
            status=rec.status,
            state=codec.decode_state(rec.state, run_id=self.id, seq=seq),
            next=tuple(decode_pending(self._built, rec)),
            output=codec.decode_output(rec.output, run_id=self.id) if rec.status == "done" else None,
            created_at=rec.created_at,
            events=events,
        )

    def rewind(self: Run, seq: int) -> Run:  # type: ignore[misc]
        """Move the head to checkpoint `seq`; the next step starts a new branch from there."""
        with self._exclusive("rewind"):
            rec = self._record(seq)
            codec = self._built.codec
            state = codec.decode_state(rec.state, run_id=self.id, seq=seq)
            pending = decode_pending(self._built, rec)
            store = self.lab.store
            old_head = self._head
            abandoned = [s for s in store.branch(self.id, old_head) if s not in set(store.branch(self.id, seq))] if old_head is not None else []
            may_repeat = [
                e.node_id for e in store.events(self.id, kind="settled") if e.checkpoint_seq in set(abandoned)
            ]
            status = rec.status if rec.status in ("created", "running", "done") else "running"
            self._write(
                [
                    self._event_row(
                        "rewind",
                        checkpoint_seq=seq,
                        payload={
                            "from": old_head,
                            "to": seq,
                            "status_before": self._status,
                            "may_repeat_effects_of": may_repeat,
                        },
                    ),
                    store.update_row(self.id, status=status, head_seq=seq, output=rec.output if status == "done" else None),
                ],
                sync=True,
            )
            self._head = seq
            self._state, self._state_json, self._pending = state, rec.state, pending
            self._status = status  # type: ignore[assignment]
            self._error = None
            self._output_json = rec.output if status == "done" else None
            self._output = codec.decode_output(rec.output, run_id=self.id) if status == "done" else None
        return self

    def edit_state(self: Run, update: Callable[[Any], Any] | None = None, /, **fields: Any) -> CheckpointRecord:  # type: ignore[misc]
        """Write a new checkpoint (parent: the head) with an edited, validated state.

        Pass a function of the current state (`lambda s: replace(s, count=0)`) or fields
        (`count=0`). A state that does not validate is refused with pydantic's message and
        nothing is written.
        """
        if (update is None) == (not fields):
            raise TypeError("edit_state takes a function of the state or field=value keywords (one of them)")
        with self._exclusive("edit the state of"):
            codec = self._built.codec
            if self._status in ("done", "cancelled"):
                raise RunStateError(
                    f"run {self.id} is {self._status}; rewind to an earlier checkpoint (run.rewind(seq)) or fork it, then edit"
                )
            current = codec.decode_state(self._state_json, run_id=self.id, seq=self._head)
            if update is not None:
                candidate = _plain(update(copy.deepcopy(current)))
            else:
                base = _plain(current)
                if not isinstance(base, dict):
                    raise StateEditError(
                        f"state of type {type(current).__qualname__} has no fields to set; pass a function instead"
                    )
                unknown = sorted(set(fields) - set(base))
                if unknown:
                    raise StateEditError(
                        f"state {type(current).__qualname__} has no field(s) {unknown}; its fields are {sorted(base)}"
                    )
                candidate = {**base, **fields}
            try:
                new_state = codec.validate_state(candidate)
            except ValidationError as exc:
                raise StateEditError(f"the edited state does not validate, nothing was written:\n{exc}") from None
            new_json = codec.encode_state(new_state)
            change = diff_json(self._state_json, new_json, left=f"{self._head}", right="edit")
            seq = self._next_cp
            store = self.lab.store
            status = self._status if self._status in ("created", "running") else "running"
            cp = CheckpointRecord(
                run_id=self.id,
                seq=seq,
                parent_seq=self._head,
                status=status,  # type: ignore[arg-type]
                state=new_json,
                next=tuple(codec.encode_node(n) for n in self._pending),
            )
            self._write(
                [
                    store.checkpoint_row(cp),
                    self._event_row("edited", checkpoint_seq=seq, payload={"parent": self._head, "diff": change.to_json()}),
                ],
                sync=True,
            )
            self._next_cp = seq + 1
            self._head = seq
            self._state, self._state_json = new_state, new_json
            self._status = status  # type: ignore[assignment]
            self._error = None
        return cp

    def fork_stream(  # type: ignore[misc]
        self: Run, seq: int | None = None, *, state: Any = None, revision: int | str | None = None, **stream: Any
    ) -> ColdStream:
        """`fork(seq, ...)` and `stream(...)` of the fork in one call, cold: nothing is forked until it is
        iterated, and each iteration forks anew (seed 003 forkStream). `stream` takes `run.stream`'s
        `max_steps`, `step_limit` and `timeout`."""
        return ColdStream(lambda: self.fork(seq, state=state, revision=revision), lambda run: run.stream(**stream))

    def fork(self: Run, seq: int | None = None, *, state: Any = None, revision: int | str | None = None) -> Run:  # type: ignore[misc]
        """A new run whose first checkpoint copies `seq` (default: the head), with lineage.

        `revision="current"` moves the fork onto the graph as defined now: fix a node's code in a
        cell and re-run from the middle. `state=` replaces the copied state (validated).
        """
        seq = self._head if seq is None else seq
        assert seq is not None
        rec = self._record(seq)
        target = self._fork_target(revision)
        codec = target.codec
        check_cursors(target, rec)
        try:
            pending = [codec.decode_node(p, run_id=self.id, seq=seq) for p in rec.next]
        except CheckpointError as exc:
            missing = [p.node_id for p in rec.next if p.node_id not in target.nodes]
            if missing:
                raise GraphDefinitionError(
                    f"cannot fork run {self.id} at checkpoint {seq} onto {target.key}@{target.revision}: that "
                    f"revision lacks the pending station(s) {missing}; declare them again or fork from another checkpoint"
                ) from None
            raise GraphDefinitionError(
                f"cannot fork run {self.id} at checkpoint {seq} onto {target.key}@{target.revision}: {exc}"
            ) from None
        if state is None:
            new_state = codec.decode_state(rec.state, run_id=self.id, seq=seq)
        else:
            try:
                new_state = codec.validate_state(_plain(state))
            except ValidationError as exc:
                raise StateEditError(f"the fork's state does not validate, nothing was written:\n{exc}") from None
        codec.check_contract(new_state)
        state_json = codec.encode_state(new_state)
        status = "done" if rec.status == "done" else ("created" if rec.status == "created" else "running")
        child_id = new_run_id()
        store = self.lab.store
        child = RunRecord(
            run_id=child_id,
            graph_key=target.key,
            revision=target.revision,
            digest=target.manifest.digest,
            status=status,  # type: ignore[arg-type]
            head_seq=0,
            durability=self.durability,
            output=rec.output if status == "done" else None,
            parent_run_id=self.id,
            parent_seq=seq,
        )
        cp = CheckpointRecord(
            run_id=child_id,
            seq=0,
            parent_seq=None,
            status=status,  # type: ignore[arg-type]
            state=state_json,
            next=tuple(codec.encode_node(n) for n in pending),
            output=rec.output if status == "done" else None,
            counters={"budgets": self._counters["budgets"]} if self._counters.get("budgets") else None,
        )
        fork_payload = {"parent_run": self.id, "parent_seq": seq, "revision": target.revision, "state_edited": state is not None}
        child_event = EventRecord(run_id=child_id, seq=0, kind="fork", checkpoint_seq=0, payload=fork_payload)
        rows = [store.run_row(child), store.checkpoint_row(cp), store.event_row(child_event)]
        if self.replay != "auto":  # the fork keeps the parent's replay mode, stored as its own choice
            mode_event = EventRecord(run_id=child_id, seq=1, kind="replay", checkpoint_seq=0, payload={"mode": self.replay})
            rows.append(store.event_row(mode_event))
        if self._writer is None:  # the parent's own events are numbered by the process that advances it
            rows.append(self._event_row("fork", checkpoint_seq=seq, payload={"child_run": child_id, "revision": target.revision}))
        store.write(rows)
        run = type(self)(
            self.lab,
            self.graph,
            target,
            child,
            state=new_state,
            deps=self._deps,
            pending=pending,
            state_json=state_json,
            next_cp=1,
            next_ev=2 if self.replay != "auto" else 1,
            batch_size=self.batch_size,
            counters=cp.counters,  # a fork starts a fresh budget with the same limits
        )
        run.restore_replay(self.replay)
        self.lab.store.live_runs[child_id] = run
        note_run(run)
        return run

    def diff(self: Run, a: int, b: int) -> StateDiff:  # type: ignore[misc]
        """Field-by-field difference of the states at checkpoints `a` and `b`."""
        ra, rb = self._record(a), self._record(b)
        return diff_json(ra.state, rb.state, left=f"{self.id}@{a}", right=f"{self.id}@{b}")

    # -- helpers -------------------------------------------------------------------------

    def _fork_target(self: Run, revision: int | str | None) -> BuiltGraph:  # type: ignore[misc]
        if revision is None or revision == self._built.revision:
            return self._built
        current = self.graph.build()
        if revision == "current" or revision == current.revision:
            return current
        raise GraphDefinitionError(
            f"can fork onto the run's own revision ({self._built.revision}) or the graph as defined now "
            f"(revision='current', {current.revision}); got {revision!r}"
        )


def _plain(value: Any) -> Any:
    """A state object as something pydantic validates afresh (not an instance it would trust)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, BaseModel):
        return dict(value)
    return value


class StoredRun:
    """A run read from the store alone, without its graph's code: `lab.read(run_id)`.

    Its record, history, state at any checkpoint (the stored JSON), events and waits need no node
    classes, so a second notebook can read a run the first one declared (issue 25 item 8). To
    step, answer or fork it, define its graph there and `lab.resume(run_id)`. Each read goes to
    the store, so a run another process advances reads as it is now.
    """

    def __init__(self, store: Store, run_id: str):
        self._store = store
        self.id = run_id
        store.get_run(run_id)  # RunNotFoundError now, naming the run, rather than on first read

    @property
    def record(self) -> RunRecord:
        return self._store.get_run(self.id)

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def head(self) -> int | None:
        return self.record.head_seq

    @property
    def graph(self) -> str:
        """The run's graph, `name@revision`."""
        rec = self.record
        return f"{rec.graph_key}@{rec.revision}"

    @property
    def output(self) -> Any:
        """End data as stored JSON, once done."""
        return self.record.output

    @property
    def state(self) -> Any:
        """The head checkpoint's state as stored JSON."""
        head = self.head
        return None if head is None else self.state_at(head)

    def history(self, *, all_branches: bool = False) -> History:
        """The checkpoints of the head's branch, root to head; or the whole tree, by seq."""
        if all_branches:
            return History(self._store, self.id, self._store.seqs(self.id))
        head = self.head
        return History(self._store, self.id, [] if head is None else self._store.branch(self.id, head))

    def state_at(self, seq: int) -> Any:
        """The state at checkpoint `seq`, as stored (JSON: dicts, lists, strings, numbers)."""
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise TypeError(f"a checkpoint is named by its sequence number (an int), got {seq!r}")
        rec = self._store.checkpoint(self.id, seq)
        if rec is None:
            raise CheckpointError(
                f"no checkpoint {seq} in this run; .history(all_branches=True) lists them", run_id=self.id
            )
        return rec.state

    def events(self, kind: str | None = None) -> list[EventRecord]:
        """Everything observed during the run, in order; `kind` filters (say `"failed"`)."""
        return self._store.events(self.id, kind=kind)

    def event_rows_json(self) -> str:
        """The run's events, in order, as one JSON text of rows (`records.EVENT_ROW`), made by the store
        in one read: what an exported page embeds, without a record per event (docs/share.md)."""
        return self._store.event_rows_json(self.id)

    def waits(self) -> list[Any]:
        """Every wait of the run, oldest first, with its answer once given."""
        return self._store.waits(self.id)

    def settled_stations(self) -> dict[int, str]:
        """Checkpoint seq -> the station that settled into it."""
        return self._store.settled_stations(self.id)

    def calls(self) -> list[Any]:
        """The recorded calls of the run's stations, oldest first (docs/replay.md)."""
        return self._store.calls(self.id) if hasattr(self._store, "calls") else []

    def manifest(self) -> Any:
        """The pinned manifest of the run's graph revision (stations and edges), or None."""
        rec = self.record
        return self._store.manifest(rec.graph_key, rec.revision)

    def read(self, run_id: str) -> StoredRun:
        """Another run of the same store, read-only (a fork's parent, a subgraph's child)."""
        return StoredRun(self._store, run_id)

    def export_html(self, path: Any) -> Any:
        """Write this run as one self-contained HTML file (docs/share.md); returns the path."""
        return show("share.export_html", self, path)

    def __repr__(self) -> str:
        rec = self.record
        return f"<StoredRun {self.id} of {rec.graph_key}@{rec.revision}: {rec.status}, head {rec.head_seq} (read-only)>"
