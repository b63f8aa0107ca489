"""Handles on stored runs: reopening one to resume or fork it, and marking what dead writers left.

The `Lab` facade asks; these functions read the store, check the run's graph revision and build the
`Run` handle (docs/store.md "Who holds what, when"). They hold no state of their own.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .cursors import decode_pending
from .errors import CheckpointError, RevisionMismatchError
from .records import EventRecord, RunRecord
from .run import Run
from .store.jobs import JobTables

if TYPE_CHECKING:
    from .lab import Lab
    from .store import Store


def open_stored(lab: Lab, run_id: str, deps: Any) -> Run:
    """A handle on a stored run: this process's to advance, or, when a live process advances it, to read."""
    store = lab.store
    writer = store.writer(run_id)
    rec = store.get_run(run_id)
    g = lab.graph_of(rec, "resume")
    built = g.build()
    if built.manifest.digest != rec.digest:
        pinned = store.manifest(rec.graph_key, rec.revision)
        raise RevisionMismatchError(lab.mismatch_message(run_id, pinned, built.manifest))
    codec = built.codec
    head = store.checkpoint(run_id, rec.head_seq) if rec.head_seq is not None else None
    if head is None:
        raise CheckpointError(
            "the run's head checkpoint is missing from the store; fork the run from an earlier checkpoint "
            "(lab.fork(run_id, seq)), or restore the store file from a backup",
            run_id=run_id,
            seq=rec.head_seq,
        )
    state = codec.decode_state(head.state, run_id=run_id, seq=head.seq)
    pending = decode_pending(built, head)
    next_cp, next_ev = store.next_seqs(run_id)
    wait = store.wait_at(run_id, head.seq) if head.status == "waiting" else None
    run = Run(
        lab,
        g,
        built,
        rec,
        state=state,
        deps=deps,
        pending=pending,
        state_json=head.state,
        next_cp=next_cp,
        next_ev=next_ev,
        batch_size=lab.batch_size,
        wait=wait,
        counters=head.counters,
    )
    keep_replay_mode(store, run)
    if head.status == "waiting":
        several = [w for w in store.waits(run_id) if w.checkpoint_seq == head.seq]
        if len(several) > 1:  # parallel branches parked in one step
            run.set_head_waits(several)
    if writer is not None:
        run.advanced_by(writer)
        return run
    store.claim(run_id)
    run.record_resumed(rec.status)
    store.live_runs[run_id] = run
    return run


def fork_stored(lab: Lab, run_id: str, seq: int | None, state: Any, revision: int | str | None, deps: Any) -> Run:
    """`lab.fork` of a run with no live handle here: only checkpoint `seq` is decoded."""
    store = lab.store
    writer = store.writer(run_id)
    rec = store.get_run(run_id)
    g = lab.graph_of(rec, "fork")
    built = g.build()
    if built.manifest.digest != rec.digest and revision not in ("current", built.revision):
        pinned = store.manifest(rec.graph_key, rec.revision)
        raise RevisionMismatchError(lab.mismatch_message(run_id, pinned, built.manifest))
    next_cp, next_ev = store.next_seqs(run_id)
    # a private handle, only to fork from: neither its head nor its output is decoded
    parent = Run(
        lab,
        g,
        built,
        dataclasses.replace(rec, status="created", output=None),
        state=None,
        deps=deps,
        pending=[],
        state_json=None,
        next_cp=next_cp,
        next_ev=next_ev,
        batch_size=lab.batch_size,
    )
    keep_replay_mode(store, parent)  # the fork keeps it
    if writer is not None:  # a run another process advances gains no `fork` event from here
        parent.advanced_by(writer)
    return parent.fork(seq, state=state, revision=revision)


def keep_replay_mode(store: Store, run: Run) -> None:
    """The replay mode the run last chose (its latest `replay` event; docs/replay.md), else `auto`."""
    chosen = store.events(run.id, kind="replay")
    if chosen:
        run.restore_replay((chosen[-1].payload or {}).get("mode"))


def recover_interrupted(store: Store) -> None:
    """Runs left `running` by a dead process: an attempt in flight becomes `interrupted`.

    It never guesses a replay (seed 001): the station runs again only after `resume()`.
    """
    with store.held():  # one process at a time marks what the gone ones left
        for listed in store.list_runs(status="running"):
            if store.abandoned(listed.run_id):  # no live process writes it
                rec = store.get_run(listed.run_id)  # as its writer left it (issue 24 item 2), not as listed
                if rec.status == "running":
                    interrupt_left(store, rec)


def unfinished_jobs(store: Store) -> bool:
    """An agent job on the store has not ended: opening a Lab has work for `lab.agents` (`recover_jobs`)."""
    return isinstance(store, JobTables) and not all(j.terminal for j in store.jobs())


def interrupt_left(store: Store, rec: RunRecord) -> None:
    """Mark `rec` interrupted when its writer died with a station in flight.

    Every attempt in flight gets its `interrupted` event: a super-step has one per task. An
    attempt left open by an earlier stop (a timeout or cancel names one task of its step) was
    not in flight when the process died: only attempts entered after the last stop count.
    """
    events = store.events(rec.run_id)
    open_attempts: dict[int, EventRecord] = {}
    last_stop = -1
    for ev in events:
        if ev.kind in ("failed", "interrupted", "cancelled"):
            last_stop = ev.seq
        if ev.kind == "entered" and ev.attempt is not None:
            open_attempts[ev.attempt] = ev
        elif ev.kind in ("settled", "failed", "interrupted", "cancelled", "waiting", "dropped", "retry") and ev.attempt is not None:
            open_attempts.pop(ev.attempt, None)
    open_attempts = {a: ev for a, ev in open_attempts.items() if ev.seq > last_stop}
    if not open_attempts:
        return
    seq = (events[-1].seq + 1) if events else 0
    rows = []
    for i, (attempt, entered) in enumerate(sorted(open_attempts.items())):
        task = {"task": entered.payload["task"]} if "task" in entered.payload else {}
        ev = EventRecord(
            run_id=rec.run_id,
            seq=seq + i,
            kind="interrupted",
            node_id=entered.node_id,
            attempt=attempt,
            checkpoint_seq=rec.head_seq,
            payload={"reason": "the process died while the station was in flight", **task},
        )
        rows.append(store.event_row(ev))
    store.write([*rows, store.update_row(rec.run_id, status="interrupted", head_seq=rec.head_seq)])
