"""The run's side of the serial engine: what `lab.engine.serial` reports, written to the store.

Mixed into `Run` (as `SuperSteps` is for the super-step engines). A station's attempt is an
`entered` event written through before the call; its settlement is the new checkpoint and its
`settled` event in one journal transaction; a failure, an abort (Ctrl-C, a timeout) or a
cancellation restores the head's state and records the outcome at the head.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic_graph import EndMarker

from .attempts import try_number
from .errors import LabError, StoreError
from .gates import StationContext
from .run_values import StepResult

if TYPE_CHECKING:
    from .records import Status
    from .run import Run

__all__ = ("SerialHooks",)


class SerialHooks:
    """`EngineHooks` for `Run`: enter, settled, failed, aborted; and a run stopped or cancelled at its head."""

    _held_station: tuple[int, str] | None = None
    """The station whose held-back settlement a failed write dropped (it is then recorded failed)."""

    def enter(self: Run, node_id: str, first: bool) -> tuple[StationContext, int] | Literal["waiting", "failed"]:  # type: ignore[misc]
        if first or node_id in self._breakpoints["before"]:  # a resumed or held wait, a breakpoint (lab/waits.py)
            context = self.station_before(node_id, first)
            if context is None:
                return "waiting"
        else:  # the usual station; positional (node_id, verdict, answers, grants, used, notes, run): half the cost of keywords
            context = self._station = StationContext(node_id, None, [], {}, 0, [], self)
        journal = self._journal
        attempt = journal.next_ev
        stash = journal.stash
        if stash and self._status == "running" and (last := stash[-1])["t"] == "b" and last["ev"] + 1 == attempt:
            # the held boundary row (settled above, lab/store/boundary.py) records this `entered` too
            journal.next_ev = attempt + 1
            last["entered"] = node_id
            last["entered_at"] = time.time()
            rows: list[dict[str, Any]] = []
        elif journal.observers or journal.sinks:
            rows = [journal.event_row("entered", node_id=node_id, attempt=attempt, checkpoint_seq=self._head)]
        else:  # `journal.event_row(...)` inlined (the hot path; nobody listens, so no EventRecord is kept)
            journal.next_ev = attempt + 1
            rows = [
                {"t": "ev", "run_id": journal.run_id, "seq": attempt, "kind": "entered", "node_id": node_id,
                 "attempt": attempt, "checkpoint_seq": self._head, "payload": {}, "created_at": time.time()}
            ]
        if self._status != "running":
            self._status = "running"
            rows.append(self.lab.store.update_row(self.id, status="running", head_seq=self._head))
        # Every mode records the attempt before the call (seed 001: "It never guesses a replay"): a
        # kill mid-station leaves an `entered` without a settlement, and recovery marks the run
        # interrupted. In batch mode this one `os.write` also carries the settlements buffered
        # since, so a kill loses no settled boundary either; batch saves the settlement's own write.
        # In step mode it carries the previous station's settlement (see `settled`): one write.
        # A held settlement makes this a boundary inside a running drive (`hot`): the store checks
        # its journal file once a millisecond then, not every write (lab/store/journal.py); a
        # drive's last write (`flush_settled`, or the settlement at End) is always checked.
        if self._fence:  # a loop was abandoned under this run: nothing from its thread is written
            self._check_fence()
        try:
            journal.write(rows, sync=True, hot=bool(journal.stash))
        except StoreError as exc:
            if not self._settlement_refused(exc):
                raise
            return "failed"
        self._unflushed = 0
        self._inflight_started = time.perf_counter()
        return context, attempt

    def settled(self: Run, *, attempt: int, node_id: str, successors: Sequence[Any], end: EndMarker[Any] | None) -> bool:  # type: ignore[misc]
        codec = self._built.codec
        journal = self._journal
        if len(successors) == 1:  # the usual station: one next, without three comprehensions over it
            first = codec.encode_node(successors[0])
            next_json, next_names, next_ids = [first.to_json()], [first.node_id], (first.node_id,)
        else:
            stations = [codec.encode_node(n) for n in successors]
            next_json, next_names = [st.to_json() for st in stations], [st.node_id for st in stations]
            next_ids = tuple(next_names)
        output_json = codec.encode_output(end.value) if end is not None else None
        state_json = codec.encode_state(self._state)
        seq = self._next_cp
        head = self._head
        status: Status = "done" if end is not None else "running"
        station, self._station = self._station, None
        rows = self._warning_rows(node_id, attempt, station.notes) if station is not None and station.notes else []
        now = time.time()
        # a key whose value is None is left out of the line: the store reads it as NULL either way
        cp = {"t": "cp", "run_id": self.id, "seq": seq, "parent_seq": head, "status": status, "state": state_json, "next": next_json, "created_at": now}
        if output_json is not None:
            cp["output"] = output_json
        if counters := self._counters:  # `_settled_counters()` only when there is a run of requests to end
            cp["counters"] = self._settled_counters() if counters.get("consecutive") else counters
        rows.append(cp)
        # ms to 3 decimals (round() is a slow call on the hot path)
        payload = {"ms": int((time.perf_counter() - self._inflight_started) * 1e6 + 0.5) / 1000, "next": next_names}
        if listening := journal.observers or journal.sinks:
            rows.append(journal.event_row("settled", node_id=node_id, attempt=attempt, checkpoint_seq=seq, payload=payload))
        else:  # `journal.event_row(...)` inlined, as in `entered`
            ev = journal.next_ev
            journal.next_ev = ev + 1
            hold = end is None and self._between is None
            if hold and journal.tracer is None:
                # the checkpoint and its `settled` event as one boundary row (lab/store/boundary.py), which the
                # next `entered` completes: one journal row a boundary instead of three
                cp["t"] = "b"
                cp["node_id"] = node_id
                cp["attempt"] = attempt
                cp["ev"] = ev
                cp["payload"] = payload
            else:
                rows.append(
                    {"t": "ev", "run_id": journal.run_id, "seq": ev, "kind": "settled", "node_id": node_id, "attempt": attempt,
                     "checkpoint_seq": seq, "payload": payload, "created_at": now}
                )  # fmt: skip
        if end is not None:
            rows.append(journal.event_row("done", node_id=node_id, checkpoint_seq=seq, payload={"output": output_json}))
        if end is None and self._between is None and not listening:
            # One write per boundary (issue 27 item 1), in both durabilities: batch buffered its
            # settlement in the store only to have the next `entered` write take it along, which
            # this does with one store call less. The settlement rides with the next station's
            # `entered`, in one transaction that is written (and synced) before that station's code
            # runs; when the engine stops instead it writes it alone (`flush_settled`) before anyone
            # hears of the step. In between only the lab's bookkeeping runs (no user code, no await),
            # so a kill there is a kill in this station, as before. Only while nobody listens: an
            # observer or a stream hears of a settlement once it is written.
            if self._fence:
                self._check_fence()
            # what puts the run back at its head of now, should the held settlement's write fail
            self._held_head = (self._state_json, seq, head, self._pending, self._resume, dict(self._tries) if self._tries else None, self._status, self._last_result, attempt, node_id)
            journal.stash.extend(rows)  # `journal.hold(rows, ...)`, inlined on the hot path
            journal.undo = self._forget_settlement
        else:
            self._unflushed += 1
            sync = self.durability == "step" or end is not None or self._unflushed >= self.batch_size
            self._write(rows, sync=sync)
            if sync:
                self._unflushed = 0
        self._state_json = state_json
        self._next_cp = seq + 1
        self._head = seq
        self._pending = list(successors)
        self._resume = None
        if self._tries:
            self._tries.clear()
        self._status = status
        if end is not None:
            self._output = end.value
            self._output_json = output_json
        # built into a StepResult only when read (`_last`): most settlements are never looked at
        self._last_result = (node_id, "done" if end is not None else "settled", seq, next_ids, self._output)
        return node_id in self._breakpoints["after"]  # the engine parks after it (`park_after`); ignored at End

    @property
    def _last(self: Run) -> StepResult | None:  # type: ignore[misc]
        """What the last step did (`run.step()` returns it)."""
        last = self._last_result
        if type(last) is tuple:
            last = self._last_result = StepResult(*last)
        return last

    @_last.setter
    def _last(self: Run, value: StepResult | None) -> None:  # type: ignore[misc]
        self._last_result = value

    def _forget_settlement(self: Run) -> None:  # type: ignore[misc]
        """The held settlement's write failed: the run goes back to its head of before it."""
        state_json, self._next_cp, self._head, self._pending, self._resume, tries, self._status, self._last_result, attempt, node_id = self._held_head
        self._state_json = state_json
        self._tries.clear()
        if tries:
            self._tries.update(tries)
        self._restore_head_state()
        self._held_station = (attempt, node_id)

    def _settlement_refused(self: Run, exc: StoreError) -> bool:  # type: ignore[misc]
        """A write that carried a held settlement failed: record its station failed (as when its own write
        failed before). False when the failed write carried none."""
        held, self._held_station = self._held_station, None
        if held is None:
            return False
        self.failed(attempt=held[0], node_id=held[1], error=exc)
        return True

    def flush_settled(self: Run) -> bool:  # type: ignore[misc]
        """The engine stops (or awaits): write a held settlement now. False if it was refused (recorded failed)."""
        if not self._journal.stash:
            return True
        try:
            self._write([], sync=True)
        except StoreError as exc:
            if not self._settlement_refused(exc):
                raise
            return False
        return True

    def _warning_rows(self: Run, node_id: str, attempt: int, notes: list[dict[str, Any]]) -> list[dict[str, Any]]:  # type: ignore[misc]
        """The station's `warn()` notes as `warning` events (they ride with its settlement)."""
        return [self._event_row("warning", node_id=node_id, attempt=attempt, checkpoint_seq=self._head, payload=note) for note in notes]

    def failed(self: Run, *, attempt: int, node_id: str, error: BaseException) -> None:  # type: ignore[misc]
        err = {
            "node_id": node_id,
            "attempt": try_number(  # the try, from 1
                lambda: self.lab.store.events(self.id), node_id, self._head, seen=self._tries.get(node_id, 0)
            ),
            "entered_seq": attempt,  # the event seq of its `entered` (the events' `attempt` column)
            "type": f"{type(error).__module__}.{type(error).__qualname__}",
            "message": str(error),
            "traceback": "".join(traceback.format_exception(error)),
        }
        self._restore_head_state()
        self._status = "failed"
        self._error = err
        self._failure = error
        self._write(
            [
                self._event_row("failed", node_id=node_id, attempt=attempt, checkpoint_seq=self._head, payload=err),
                self.lab.store.update_row(self.id, status="failed", head_seq=self._head, error=err),
            ],
            sync=True,
        )
        self._unflushed = 0
        self._last = StepResult(node_id, "failed", None, self.next_stations, error=f"{type(error).__name__}: {error}")

    def aborted(self: Run, *, attempt: int, node_id: str, reason: str = "cancelled in flight") -> None:  # type: ignore[misc]
        self._restore_head_state()
        if self._cancel_requested:
            self._finish_cancel(node_id=node_id, attempt=attempt)
            return
        if self._timed_out is not None:
            self._fail_run(self._timeout_error(self._timed_out, node_id), node_id=node_id, attempt=attempt)
            return
        self._status = "interrupted"
        self._write(
            [
                self._event_row("interrupted", node_id=node_id, attempt=attempt, checkpoint_seq=self._head, payload={"reason": reason}),
                self.lab.store.update_row(self.id, status="interrupted", head_seq=self._head),
            ],
            sync=True,
        )
        self._last = StepResult(node_id, "interrupted", None, self.next_stations)

    def _fail_run(self: Run, error: LabError, *, node_id: str | None = None, attempt: int | None = None) -> None:  # type: ignore[misc]
        """The run stops at its head for a reason of its own (a bound), not a station's failure."""
        nid = node_id or (self.next_stations[0] if self.next_stations else None)
        err = {
            "node_id": nid,
            "attempt": None
            if attempt is None
            else try_number(lambda: self.lab.store.events(self.id), nid, self._head, seen=self._tries.get(nid or "", 0)),
            "entered_seq": attempt,
            "type": f"{type(error).__module__}.{type(error).__qualname__}",
            "message": str(error),
            "traceback": "",
        }
        self._status = "failed"
        self._error = err
        self._failure = error
        self._write(
            [
                self._event_row("failed", node_id=err["node_id"], attempt=attempt, checkpoint_seq=self._head, payload=err),
                self.lab.store.update_row(self.id, status="failed", head_seq=self._head, error=err),
            ],
            sync=True,
        )
        self._unflushed = 0
        self._last = StepResult(err["node_id"], "failed", None, self.next_stations, error=f"{type(error).__name__}: {error}")

    def _finish_cancel(self: Run, *, node_id: str | None, attempt: int | None) -> None:  # type: ignore[misc]
        wait = self.wait
        if wait is not None and wait.kind == "delegate" and wait.resolution is None:
            self.lab.agents.contain(wait)  # cancelling the run stops its agent job first (docs/agents.md)
        self._status = "cancelled"
        self._write(
            [
                self._event_row("cancelled", node_id=node_id, attempt=attempt, checkpoint_seq=self._head),
                self.lab.store.update_row(self.id, status="cancelled", head_seq=self._head),
            ],
            sync=True,
        )
        self._unflushed = 0
        self._last = StepResult(node_id, "cancelled", None, self.next_stations)

    def _restore_head_state(self: Run) -> None:  # type: ignore[misc]
        """A failed or aborted station may have mutated state; the head checkpoint is the truth."""
        self._state = self._built.codec.decode_state(self._state_json, run_id=self.id, seq=self._head)
