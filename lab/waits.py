"""Parking and answering: the run's side of gates, `interrupt()`, breakpoints and capabilities.

A park always writes a *waiting checkpoint* (parent: the head, the state the station received,
the same next station) and a wait record bound to it, in one journal transaction, then the run
holds nothing: no task, thread or lock (seed 001 "Durable Stasis"). An answer (verdict,
`resume_with` value, grant, or "continue" for a breakpoint) is recorded once against the wait's
owner id and moves the run to `queued`; the next step runs the parked station again from the
top with the answer in its `StationContext`.

Rules worth knowing:

- Only the wait bound to the head checkpoint counts. Rewinding, editing the state or forking
  moves the head off it, and the station parks again when it is reached again.
- Continuing from a wait at a boundary skips a before-breakpoint at that same boundary (one
  stop per boundary).
- Capability budgets (seed 001): a park for a capability counts as one resume (by default at
  most 8 per run) and one consecutive request for that capability (by default at most 3; a
  settled station resets it). Both counters are written in every checkpoint, so a restart
  cannot reset them. The limits are defaults: `Lab(budgets=Budgets(...))` or
  `lab.graph(..., budgets=Budgets(...))` set others, and a run records the limits it started
  with beside its counters, so a resume after a restart (or a fork) keeps them.
"""

from __future__ import annotations

import inspect
import re
import secrets
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic_core import PydanticSerializationError, to_jsonable_python

from .budgets import (
    MAX_CAPABILITY_RESUMES,
    MAX_CONSECUTIVE_REQUESTS,
    Budgets,
    capabilities_named,
    counted_request,
)
from .engine.tasks import JoinAcc, node_id_of
from .errors import (
    GraphDefinitionError,
    LabError,
    RevisionMismatchError,
    WaitError,
    WaitOwnerError,
    WaitReentryError,
)
from .gates import (
    CapabilityRequired,
    StationContext,
    Verdict,
    WaitSignal,
    asks_tool_approval,
    mirrors_subgraph,
    refuse_misplaced_consent,
)
from .records import CheckpointRecord, PendingStation, WaitKind, WaitRecord
from .run_values import StepResult

if TYPE_CHECKING:
    from .run import Run

__all__ = ("Waits", "Budgets", "MAX_CAPABILITY_RESUMES", "MAX_CONSECUTIVE_REQUESTS", "context_for", "task_of")

When = Literal["before", "after"]
_ANSWER_HINT: dict[str, str] = {
    "consent": "run.approve(note=...) or run.deny(note=...)",
    "interrupt": "run.resume_with(answer)",
    "breakpoint": "run.run() or run.step() (a breakpoint continues when stepped)",
    "capability": "run.grant(name) (or register a provider with lab.provide(name, fn))",
    "delegate": "run.job.retry(), run.job.cancel() or run.job.provide(result) (docs/agents.md)",
}


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _json(value: Any, what: str) -> Any:
    try:
        return to_jsonable_python(value)
    except PydanticSerializationError as exc:
        raise TypeError(f"{what} must be JSON-serialisable (str, numbers, lists, dicts, dataclasses): {exc}") from None


class Waits:
    """Mixed into `Run`: the wait a run is parked on, answering it, and breakpoints."""

    # -- what a person reads -------------------------------------------------------------

    @property
    def wait(self: Run) -> WaitRecord | None:  # type: ignore[misc]
        """The wait the run is parked on (or that was just answered and will be continued)."""
        if self._status in ("waiting", "queued") and self._wait is not None and self._wait.checkpoint_seq == self._head:
            return self._wait
        return None

    @property
    def job(self: Run) -> Any:  # type: ignore[misc]
        """The agent job of the delegated station this run waits on (or last delegated to), else None.

        An `lab.agents.AgentJob`: its status, messages and usage, and `retry()`, `cancel()`,
        `provide(result)` for a LOST job (docs/agents.md).
        """
        try:
            board = self.lab.agents
        except LookupError:  # AgentRuntimeError: a store that keeps no agent jobs
            return None
        return board.job_of_run(self)

    def waits(self: Run) -> list[WaitRecord]:  # type: ignore[misc]
        """Every wait of this run, answered ones included (the evidence), oldest first."""
        return self.lab.store.waits(self.id)

    @property
    def breakpoints(self: Run) -> dict[str, set[str]]:  # type: ignore[misc]
        """Stations this run parks before / after: `{"before": {...}, "after": {...}}` (a copy)."""
        return {k: set(v) for k, v in self._breakpoints.items()}

    # -- answering -----------------------------------------------------------------------

    def approve(self: Run, note: str | None = None, *, owner: str | None = None) -> WaitRecord:  # type: ignore[misc]
        """Approve the gate the run waits on; the next step runs its `decide` with the verdict."""
        return self._answer("consent", {"approved": True, "note": _note(note)}, owner, "approve")

    def deny(self: Run, note: str | None = None, *, owner: str | None = None) -> WaitRecord:  # type: ignore[misc]
        """Deny the gate the run waits on; the next step runs its `decide` with the verdict."""
        return self._answer("consent", {"approved": False, "note": _note(note)}, owner, "deny")

    def resume_with(self: Run, answer: Any, *, owner: str | None = None) -> WaitRecord:  # type: ignore[misc]
        """Answer the `interrupt()` the run waits on; the node runs again and `interrupt` returns it.

        The answer is stored as JSON and the node receives the JSON form, in this process and
        after a restart alike.
        """
        return self._answer("interrupt", {"answer": _json(answer, "the answer to interrupt()")}, owner, "resume_with")

    def grant(self: Run, capability: str, value: Any = None, *, owner: str | None = None) -> WaitRecord:  # type: ignore[misc]
        """Grant the capability the run waits on; the node runs again and `granted(name)` returns `value`."""
        wait = self.wait
        if wait is not None and wait.kind == "capability" and wait.details.get("capability") != capability:
            raise WaitError(
                f"run {self.id} waits for capability {wait.details.get('capability')!r}, not {capability!r}; "
                f"grant that one"
            )
        resolution = {"granted": capability, "value": _json(value, "a capability grant's value"), "by": "person"}
        return self._answer("capability", resolution, owner, "grant")

    def answer(self: Run, kind: WaitKind, resolution: dict[str, Any], *, owner: str | None = None, action: str = "answer") -> WaitRecord:  # type: ignore[misc]
        """Answer the run's wait of `kind` with `resolution`, checked and recorded as `approve()`, `resume_with()`
        and `grant()` do theirs (one answer per wait, across processes): how a kind answers a wait of its own
        (a delegated station's job outcome given by a person). `action` names the call in errors."""
        return self._answer(kind, resolution, owner, action)

    def _answer(self: Run, kind: WaitKind, resolution: dict[str, Any], owner: str | None, action: str) -> WaitRecord:  # type: ignore[misc]
        self._let_the_park_finish()  # one answer wins across processes: checked and written with the store held
        with self.lab.store.held():
            if self._writer is not None:
                self._reload()
            elif self._status == "waiting" and not self._busy.locked():
                self._take_in_answers()
            with self._exclusive(action, answering=True):
                wait = self._check_answerable(kind, owner, action)
                return self._resolve(wait, resolution)

    def _take_in_answers(self: Run) -> bool:  # type: ignore[misc]
        """The writer's side of an answer given in another process: record its verdict event, go on queued."""
        store = self.lab.store
        if not store.writer_records_answers:
            return False  # the answering process recorded its verdict event itself
        with store.held():  # one thread at a time: a view's poll, a step, an answer
            if self._status != "waiting":
                return False
            return self._record_answers_given_elsewhere(store)

    def _record_answers_given_elsewhere(self: Run, store: Any) -> bool:  # type: ignore[misc]
        stored = {w.owner: w for w in store.waits(self.id) if w.checkpoint_seq == self._head}
        mine = self.head_waits
        if not mine:
            return False
        fresh = [stored[w.owner] for w in mine if w.resolution is None and w.owner in stored and stored[w.owner].resolution is not None]
        if not fresh:
            return False
        several = [next((f for f in fresh if f.owner == w.owner), w) for w in mine]
        still_open = [w for w in several if w.resolution is None]
        status = "waiting" if still_open else "queued"
        rows = [
            self._event_row(
                "verdict",
                node_id=w.node_id,
                attempt=self._wait_attempt(w.owner),
                checkpoint_seq=w.checkpoint_seq,
                payload={"kind": w.kind, "owner": w.owner, **(w.resolution or {}), "answered_elsewhere": True},
            )
            for w in fresh
        ]
        rows.append(store.update_row(self.id, status=status, head_seq=self._head))
        self._write(rows, sync=True)
        if len(several) > 1:
            self._head_waits = several
        self._wait = still_open[0] if still_open else several[-1]
        self._status = status  # type: ignore[assignment]
        return True

    def _check_answerable(self: Run, kind: WaitKind, owner: str | None, action: str) -> WaitRecord:  # type: ignore[misc]
        several = self.head_waits
        if len(several) > 1 and self._status in ("waiting", "queued"):
            return self._pick_wait(several, kind, owner, action)
        wait = self.wait
        if self._status == "queued" and wait is not None:
            raise WaitError(
                f"run {self.id}'s {wait.kind} wait at {wait.node_id} was already answered "
                f"({_describe(wait.resolution)}); a wait takes one answer. run.run() continues it"
            )
        if self._status != "waiting" or wait is None:
            raise WaitError(f"run {self.id} is {self._status}, not waiting; there is nothing to {action}")
        if wait.kind != kind:
            raise WaitError(
                f"run {self.id} waits on a {wait.kind} at {wait.node_id}, which {action}() does not answer; "
                f"use {_ANSWER_HINT[wait.kind]}"
            )
        if owner is not None and owner != wait.owner:
            raise WaitOwnerError(
                f"the verdict names wait {owner!r}, but run {self.id}'s current wait is {wait.owner!r} "
                f"(at {wait.node_id}, checkpoint {wait.checkpoint_seq}); refresh the view and answer the current wait"
            )
        current = self.graph.build()
        if current.manifest.digest != self._built.manifest.digest:
            raise RevisionMismatchError(self.lab.mismatch_message(self.id, self._built.manifest, current.manifest))
        return wait

    def _resolve(self: Run, wait: WaitRecord, resolution: dict[str, Any]) -> WaitRecord:  # type: ignore[misc]
        at = _now()
        store = self.lab.store
        done = replace(wait, resolution=resolution, resolved_at=at)
        several = [done if w.owner == wait.owner else w for w in self.head_waits]
        still_open = [w for w in several if w.resolution is None]
        status = "waiting" if still_open else "queued"  # a parallel step goes on once every branch is answered
        if self._writer is not None:
            # answered from a process that does not advance the run: only the answer is written here
            # (event numbers are the writer's); the fold makes the run queued, the writer records the verdict
            store.write([store.resolution_row(wait.owner, resolution, at)])
        else:
            self._write(
                [
                    store.resolution_row(wait.owner, resolution, at),
                    self._event_row(
                        "verdict",
                        node_id=wait.node_id,
                        attempt=self._wait_attempt(wait.owner),
                        checkpoint_seq=wait.checkpoint_seq,
                        payload={"kind": wait.kind, "owner": wait.owner, **resolution},
                    ),
                    store.update_row(self.id, status=status, head_seq=self._head),
                ],
                sync=True,
            )
        if several:
            self._head_waits = several
        self._wait = still_open[0] if still_open else done
        self._status = status  # type: ignore[assignment]
        return done

    @property
    def head_waits(self: Run) -> list[WaitRecord]:  # type: ignore[misc]
        """Every wait bound to the head checkpoint: several when parallel branches parked in one step."""
        several = [w for w in self._head_waits if w.checkpoint_seq == self._head]
        if several:
            return several
        wait = self.wait
        return [wait] if wait is not None else []

    def _pick_wait(self: Run, several: list[WaitRecord], kind: WaitKind, owner: str | None, action: str) -> WaitRecord:  # type: ignore[misc]
        """The wait an answer is for when several branches wait: named by owner, or the only one open."""
        open_ = [w for w in several if w.resolution is None]
        if owner is not None:
            wait = next((w for w in several if w.owner == owner), None)
            if wait is None:
                raise WaitOwnerError(
                    f"the verdict names wait {owner!r}, but run {self.id} waits on "
                    + ", ".join(f"{w.owner} ({w.kind} at {w.node_id})" for w in several)
                    + "; refresh the view and answer one of those"
                )
        elif len(open_) == 1:
            wait = open_[0]
        elif not open_:
            raise WaitError(f"run {self.id}'s {len(several)} waits are all answered; run.run() continues them")
        else:
            raise WaitOwnerError(
                f"run {self.id} waits on {len(open_)} branches at once: "
                + ", ".join(f"{w.owner} ({w.kind} at {w.node_id})" for w in open_)
                + f"; name the one you answer: run.{action}(..., owner=...)"
            )
        if wait.resolution is not None:
            raise WaitError(
                f"run {self.id}'s {wait.kind} wait at {wait.node_id} ({wait.owner}) was already answered "
                f"({_describe(wait.resolution)}); a wait takes one answer"
            )
        if wait.kind != kind:
            raise WaitError(
                f"wait {wait.owner} is a {wait.kind} at {wait.node_id}, which {action}() does not answer; "
                f"use {_ANSWER_HINT[wait.kind]}"
            )
        current = self.graph.build()
        if current.manifest.digest != self._built.manifest.digest:
            raise RevisionMismatchError(self.lab.mismatch_message(self.id, self._built.manifest, current.manifest))
        return wait

    # -- breakpoints ---------------------------------------------------------------------

    def set_breakpoint(self: Run, node_id: str, when: When = "before") -> None:  # type: ignore[misc]
        """Park this run before (or after) station `node_id` from now on."""
        self._change_breakpoint(node_id, when, add=True)

    def clear_breakpoint(self: Run, node_id: str, when: When | None = None) -> None:  # type: ignore[misc]
        """Remove the breakpoint(s) on `node_id` (`when=None`: both before and after)."""
        for w in ("before", "after") if when is None else (when,):
            self._change_breakpoint(node_id, w, add=False)

    def _change_breakpoint(self: Run, node_id: str, when: str, *, add: bool) -> None:  # type: ignore[misc]
        if when not in ("before", "after"):
            raise ValueError(f"a breakpoint is 'before' or 'after' a station, got when={when!r}")
        if add and node_id not in self._built.manifest.station_ids:
            raise GraphDefinitionError(
                f"graph {self._built.key!r} has no station {node_id!r}; its stations are {list(self._built.manifest.station_ids)}"
            )
        with self._exclusive("change the breakpoints of"):
            current = self._breakpoints[when]
            if (node_id in current) == add:
                return
            (current.add if add else current.discard)(node_id)
            store = self.lab.store
            self._write(
                [
                    store.breakpoints_row(self.id, self._breakpoints_json()),
                    self._event_row(
                        "breakpoint", node_id=node_id, checkpoint_seq=self._head,
                        payload={"action": "set" if add else "clear", "when": when},
                    ),
                ],
                sync=True,
            )

    def _breakpoints_json(self: Run) -> dict[str, list[str]]:  # type: ignore[misc]
        return {k: sorted(v) for k, v in self._breakpoints.items()}

    # -- engine hooks ----------------------------------------------------------------------

    def station_before(self: Run, node_id: str, first: bool) -> StationContext | None:  # type: ignore[misc]
        """The context of `node_id` about to run (`SerialHooks.enter` asks when it is the drive's `first`, or a
        breakpoint is set before it): a resumed wait's, a new one, or None when the run parks first."""
        if first and self._resume is not None:
            self._station = self._resume
            self._resume.run = self
            return self._resume
        held = self.wait if first and self._status == "waiting" else None
        if held is not None and held.kind == "delegate" and held.resolution is None:
            # the station's agent job has no adopted outcome (it was LOST while awaited): stay parked,
            # never submit again on our own (seed 001: LOST never authorizes automatic repetition)
            self._last = StepResult(held.node_id, "waiting", self._head, self.next_stations)
            return None
        if node_id in self._breakpoints["before"]:
            self._park("breakpoint", node_id, prompt=None, details={"when": "before", "station": node_id})
            return None
        # positional (node_id, verdict, answers, grants, used, notes, run): half the cost of the keywords, per station
        station = self._station = StationContext(node_id, None, [], {}, 0, [], self)
        return station

    def park_after(self: Run, node_id: str) -> None:  # type: ignore[misc]
        """`EngineHooks.park_after`: the breakpoint after `node_id` (`settled` found it set) parks the run."""
        self._park("breakpoint", node_id, prompt=None, details={"when": "after", "station": node_id})

    def parked(self: Run, *, attempt: int, node_id: str, signal: WaitSignal) -> None:  # type: ignore[misc]
        self.parked_tasks([(None, attempt, node_id, signal)])

    def parked_tasks(self: Run, parked: list[tuple[int | None, int, str, WaitSignal]]) -> None:  # type: ignore[misc]
        """Park on one or more waits at once (a parallel step's branches): `(task id, attempt, station, signal)`."""
        self._restore_head_state()  # the stations' partial work is not saved
        items: list[dict[str, Any]] = []
        for task, attempt, node_id, signal in parked:
            try:
                prompt = signal.prompt
                if prompt is not None and not isinstance(prompt, str):
                    raise TypeError(f"a wait's prompt must be a string, got {type(prompt).__name__}")
                details = _json(signal.details, f"the details of {node_id}'s {signal.kind} wait")
                prior: list[Any] = list(getattr(signal, "prior", None) or [])  # the station's answer log so far
                refuse_misplaced_consent(node_id, self._built.manifest.station(node_id), signal)  # only a gate asks consent
                if isinstance(signal, CapabilityRequired):
                    names = capabilities_named(signal)
                    details = {"capability": signal.capability, "details": details, **({"also": names[1:]} if names[1:] else {})}
                    self._count_capability_request(node_id, names)
                signal.check(self, node_id)
            except (TypeError, LabError) as exc:
                self.failed(attempt=attempt, node_id=node_id, error=exc)
                return
            items.append(
                {"kind": signal.kind, "node_id": node_id, "prompt": prompt, "details": details, "prior": prior,
                 "attempt": attempt, "task": task, "signal": signal}
            )
        self._park_all(items)

    def _count_capability_request(self: Run, node_id: str, capabilities: Sequence[str]) -> None:  # type: ignore[misc]
        self._counters = counted_request(self._counters, capabilities, node_id=node_id, run_id=self.id)

    def _park(  # type: ignore[misc]
        self: Run,
        kind: WaitKind,
        node_id: str,
        *,
        prompt: str | None,
        details: Any,
        prior: list[Any] | None = None,
        attempt: int | None = None,
    ) -> None:
        """Write the waiting checkpoint, the wait and the `waiting` event in one transaction."""
        self._park_all(
            [{"kind": kind, "node_id": node_id, "prompt": prompt, "details": details, "prior": prior, "attempt": attempt, "task": None}]
        )

    def _park_all(self: Run, items: list[dict[str, Any]]) -> None:  # type: ignore[misc]
        """One waiting checkpoint with a wait per item (a parallel step may park several branches)."""
        codec = self._built.codec
        store = self.lab.store
        seq = self._next_cp
        waits: list[WaitRecord] = []
        for item in items:
            task = f"-t{item['task']}" if item["task"] is not None else ""
            waits.append(
                WaitRecord(
                    run_id=self.id,
                    owner=f"wait-{self.id[4:]}-{seq}{task}-{secrets.token_hex(2)}",
                    kind=item["kind"],
                    node_id=item["node_id"],
                    checkpoint_seq=seq,
                    prompt=item["prompt"],
                    details=item["details"],
                    prior=list(item["prior"] or []),
                    created_at=_now(),
                )
            )
        for i, (item, wait) in enumerate(zip(items, waits, strict=True)):
            if item.get("signal") is not None:  # a delegated job is stored before the park that waits on it
                waits[i] = replace(wait, details=item["signal"].before_park(self, wait))
        by_task = {item["task"]: w.owner for item, w in zip(items, waits, strict=True) if item["task"] is not None}
        cp = CheckpointRecord(
            run_id=self.id,
            seq=seq,
            parent_seq=self._head,
            status="waiting",
            state=self._state_json,
            next=tuple(_with_wait(codec.encode_node(n), by_task) for n in self._pending),
            counters=self._counters or None,
        )
        rows = [store.checkpoint_row(cp)]
        for item, wait in zip(items, waits, strict=True):
            rows.extend(item["signal"].ride if item.get("signal") is not None else ())  # a delegated job's rows
            rows.append(store.wait_row(wait))
            rows.append(
                self._event_row(
                    "waiting",
                    node_id=wait.node_id,
                    attempt=item["attempt"],
                    checkpoint_seq=seq,
                    payload={"kind": wait.kind, "owner": wait.owner, "prompt": wait.prompt, "details": wait.details,
                             **({"task": item["task"]} if item["task"] is not None else {})},
                )
            )
        self._write(rows, sync=True)
        self._park_attempts = {wait.owner: item["attempt"] for item, wait in zip(items, waits, strict=True)}
        self._unflushed = 0
        self._next_cp = seq + 1
        self._head = seq
        self._status = "waiting"
        self._wait = waits[0]
        self._head_waits = waits if len(waits) > 1 else []
        self._resume = None
        self._last = StepResult(waits[0].node_id, "waiting", seq, self.next_stations, tasks=tuple(w.node_id for w in waits))
        for item, wait in zip(items, waits, strict=True):
            if item.get("signal") is not None:
                item["signal"].after_park(self, wait)

    # -- continuing ------------------------------------------------------------------------

    def refresh(self: Run) -> WaitRecord | None:  # type: ignore[misc]
        """Re-read this run's wait from the store: an answer given in another process (a shared store).

        A run parked here and approved by a colleague (`Lab("postgresql://...")`, their
        `run.approve()`) continues with `run.run()`, which refreshes by itself; this says
        what the store holds now. A run another process moved past the wait is refused.
        """
        if self._writer is not None:  # a run another process advances (DuckDB): read it again
            self._reload()
            return self.wait
        if self._status == "waiting":
            self._take_in_answers()
        if self._status not in ("waiting", "queued"):
            return self.wait
        rec = self.lab.store.get_run(self.id)
        if rec.head_seq != self._head or rec.status not in ("waiting", "queued"):
            raise WaitError(
                f"run {self.id} moved on in another process (it is {rec.status} at checkpoint {rec.head_seq}; this "
                f"handle is at {self._head}); step a run in one process: resume it there, or restart this kernel "
                "and lab.resume(run_id)"
            )
        several = [w for w in self.lab.store.waits(self.id) if w.checkpoint_seq == self._head]
        if several:
            open_ = [w for w in several if w.resolution is None]
            self._head_waits = several if len(several) > 1 else []
            self._wait = open_[0] if open_ else several[-1]
        self._status = rec.status
        self._journal.next_ev = max(self._journal.next_ev, self.lab.store.next_seqs(self.id)[1])
        return self.wait

    def _prepare_continue(self: Run) -> None:  # type: ignore[misc]
        """Before stepping: refuse an unanswered wait, continue a breakpoint, arm the answer."""
        self._resume = None
        self._resume_tasks = {}
        if self._status == "waiting":
            self._take_in_answers()  # answered in another process meanwhile
        wait = self._wait if self._wait is not None and self._wait.checkpoint_seq == self._head else None
        if self._status == "waiting" and wait is not None and wait.resolution is None and wait.kind != "breakpoint":
            wait = self.refresh()  # answered in another process sharing the store?
        if self._status == "waiting":
            if wait is None:  # a waiting checkpoint without its wait: re-enter the station
                return
            if wait.kind == "breakpoint":
                self._resolve(wait, {"continued": True})
                wait = self._wait
            elif wait.kind == "capability" and wait.details.get("capability") in self.lab.providers:
                return  # granted by the provider in `_provide` before the engine starts
            elif wait.kind == "delegate":
                self.lab.agents.check_continuable(self, wait)  # refuses a LOST job: a person chooses
                return  # the job's outcome is awaited and adopted in `_provide`
            else:
                raise WaitError(
                    f"run {self.id} is waiting on a {wait.kind} at {wait.node_id}"
                    + (f" ({wait.prompt!r})" if wait.prompt else "")
                    + f"; answer it first with {_ANSWER_HINT[wait.kind]}"
                )
        if wait is None or wait.resolution is None:
            return
        several = self.head_waits
        if len(several) > 1:
            self._resume_tasks = {task_of(w.owner): context_for(w) for w in several}
            return
        if wait.kind == "delegate" and self._status != "queued" and wait.resolution.get("status") != "SUCCEEDED":
            return  # run.retry() after the station's job failed: the station delegates afresh (a new request id)
        if wait.kind != "breakpoint":  # a breakpoint after a station continues at its successor
            self._check_reentry(wait)
        self._resume = context_for(wait)

    def _check_reentry(self: Run, wait: WaitRecord) -> None:  # type: ignore[misc]
        """The answer goes to the wait's own station, or nowhere (seed 001 "Consent re-entry").

        Before the first node executes, the station the head would re-enter must be the wait's
        station, of the kind that waits so (a consent wait's station is a gate), and a pending
        entry that retains an owner id must retain this wait's. A mismatch (a hand-edited head,
        say) is refused before anything is written.
        """
        pending = [n for n in self._pending if not isinstance(n, JoinAcc)]
        ids = [node_id_of(n) for n in pending]
        problem = None
        station = self._built.manifest.station(wait.node_id)
        if ids != [wait.node_id]:
            problem = f"its head checkpoint {self._head} would enter {', '.join(ids) or 'nothing'}"
        elif (
            wait.kind == "consent"
            and (station is None or station.kind != "gate")
            and not mirrors_subgraph(wait.details)
            and not (station is not None and station.kind == "delegated" and asks_tool_approval(wait.details))
        ):
            problem = f"station {wait.node_id} is a {station.kind if station else 'missing'} station, not a gate"
        elif wait.kind == "delegate" and (station is None or station.kind != "delegated"):
            problem = f"station {wait.node_id} is a {station.kind if station else 'missing'} station, not a delegated one"
        else:
            retained = _retained_owner(self, wait)
            if retained is not None and retained != wait.owner:
                problem = f"its head checkpoint {self._head} retains wait owner {retained!r}"
        if problem is not None:
            raise WaitReentryError(
                f"run {self.id}'s answered {wait.kind} wait {wait.owner} belongs to station {wait.node_id}, but "
                f"{problem}; the answer is not handed to another station and nothing was changed. The head was "
                f"edited outside the lab: rewind or fork the run from checkpoint {wait.checkpoint_seq - 1 if wait.checkpoint_seq else 0} "
                "(lab.fork(run_id, seq)) and answer the gate when it parks again"
            )

    async def _provide(self: Run) -> bool:  # type: ignore[misc]
        """Grant a capability wait at the head from a registered provider, or adopt a delegated
        station's job outcome (awaiting the job); True if it did."""
        wait = self.wait
        if wait is not None and wait.kind == "delegate" and wait.resolution is None and self._status == "waiting":
            return await self.lab.agents.settle(self, wait)
        if wait is None or wait.kind != "capability" or wait.resolution is not None:
            return False
        name = wait.details.get("capability")
        provider = self.lab.providers.get(name)
        if provider is None:
            return False
        value = provider(wait)
        if inspect.isawaitable(value):
            value = await value
        self.adopt_answer(wait, {"granted": name, "value": _json(value, f"provider {name!r}'s value"), "by": "provider"})
        return True

    def adopt_answer(self: Run, wait: WaitRecord, resolution: dict[str, Any]) -> WaitRecord:  # type: ignore[misc]
        """Record `resolution` as the answer to `wait` (at the head) and hand it to the station when it
        runs again in this drive: how a provider's grant or a delegated station's job outcome goes on."""
        done = self._resolve(wait, resolution)
        self._resume = context_for(self._wait)
        return done

    def _settled_counters(self: Run) -> dict[str, Any] | None:  # type: ignore[misc]
        """A settled station ends a run of consecutive requests; resumes are kept."""
        if self._counters.get("consecutive"):
            self._counters = {
                "capability_resumes": self._counters.get("capability_resumes", 0),
                "consecutive": {},
                **_limits(self._counters),
            }
        return self._counters or None

    @property
    def budgets(self: Run) -> Budgets:  # type: ignore[misc]
        """The capability budgets this run started with (kept across restarts and forks)."""
        return Budgets.from_counters(self._counters)


def _limits(counters: dict[str, Any]) -> dict[str, Any]:
    """The recorded budgets and step/time limits of `counters`, to carry into the next counters."""
    return {key: counters[key] for key in ("budgets", "limits") if counters.get(key)}


_TASK_OWNER = re.compile(r"-t(\d+)-[0-9a-f]+$")


def task_of(owner: str) -> int | None:
    """The parallel task a wait belongs to (its owner id names it), or None for a serial wait."""
    m = _TASK_OWNER.search(owner)
    return int(m.group(1)) if m else None


def _retained_owner(run: Run, wait: WaitRecord) -> str | None:
    """The wait owner the head checkpoint's pending entry retains, if it names one."""
    cp = run.lab.store.checkpoint(run.id, wait.checkpoint_seq)
    if cp is None:
        return None
    owners = {(st.meta or {}).get("wait") for st in cp.next} - {None}
    return next(iter(owners)) if len(owners) == 1 else None


def _with_wait(station: PendingStation, by_task: dict[int, str]) -> PendingStation:
    """A parked task's frontier entry names the wait it is parked on (readable in the checkpoint JSON)."""
    task = (station.meta or {}).get("task")
    if task is None or task not in by_task:
        return station
    return PendingStation(station.node_id, station.fields, {**(station.meta or {}), "wait": by_task[task]})


def context_for(wait: WaitRecord | None) -> StationContext | None:
    """What the station of an answered `wait` is handed when it runs again: the verdict, the answers
    it consumed plus this one, the grant, or the agent job's outcome; None while it is unanswered."""
    if wait is None or wait.resolution is None:
        return None
    res = wait.resolution
    ctx = StationContext(wait.node_id, answers=list(wait.prior))  # what the station consumed before it parked
    if wait.kind == "consent":
        ctx.verdict = Verdict(bool(res.get("approved")), res.get("note"), wait.owner, wait.resolved_at)
    elif wait.kind == "interrupt":
        ctx.answers.append(res.get("answer"))
    elif wait.kind == "capability":
        ctx.grants = {res.get("granted"): res.get("value")}
    elif wait.kind == "delegate":
        ctx.job = dict(res)
    return ctx


def _note(note: Any) -> str | None:
    if note is not None and not isinstance(note, str):
        raise WaitError(f"a verdict's note must be a string or None, got {type(note).__name__} {note!r}")
    return note


def _describe(resolution: dict[str, Any] | None) -> str:
    if not resolution:
        return "unanswered"
    if "approved" in resolution:
        word = "approved" if resolution["approved"] else "denied"
        return word + (f" with note {resolution.get('note')!r}" if resolution.get("note") else "")
    if "answer" in resolution:
        return f"answered {resolution['answer']!r}"
    if "granted" in resolution:
        return f"granted {resolution['granted']!r}"
    if "request_id" in resolution:
        return f"agent job {resolution['request_id']} {resolution.get('status')}"
    return "continued"
