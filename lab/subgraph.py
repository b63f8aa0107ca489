"""Subgraphs: a node runs another lab graph as one station of its own run (seed 003 "Subgraphs").

Seed 003: "A node added with StateGraph.subgraph runs another graph. That graph takes its own
steps inside one step of this graph. When one of its nodes calls interrupt, this run pauses as
well, and resume continues inside the subgraph, at the node that paused."

Inside a node, `await run_subgraph(child_graph, ...)` starts a child run of a declared or adopted
graph and drives it to its end; its output is the call's value. The child is a run of its own:
its steps are checkpointed under its own run id, with lineage to the parent (`parent_run_id`,
and `parent_seq`: the parent's checkpoint the station started from; `lab.lineage(parent_id)`
lists it) and a `subgraph` event on the parent naming it.

When the child parks (a gate, `interrupt()`, a breakpoint, a capability), the parent parks too,
on a wait that mirrors the child's: a gate's consent as consent, anything else as an interrupt
whose details name the child's wait. Answer the *parent* (`parent.approve()`,
`parent.resume_with(x)`); its station runs again from the top, `run_subgraph` finds the child
that parked (named in the answered wait), hands it the answer and continues it at the node that
paused: no step of the child runs twice (LangGraph #8458 is the bug this avoids).

Anything else the child ends with (failed, cancelled) fails the parent's station with
`SubgraphError` naming the child; the child stays in the store as it was. A retry of the parent,
or a time travel of the parent to before the station (a rewind, a fork), starts a fresh child: the
old child's branch is no longer followed, and its history stays. A stream of the parent has the
child's events, each inside a `SubgraphEvent` naming the station and the child run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import LabError, RunStateError
from .events import SubgraphBatch, running_run
from .gates import ConsentRequired, InterruptRequested, child_slot, slot_child, station_context

if TYPE_CHECKING:
    from collections.abc import Callable

    from .records import EventRecord, WaitRecord
    from .run import Run

__all__ = ("SubgraphError", "run_subgraph")


class SubgraphError(LabError, RuntimeError):
    """A subgraph's child run ended without reaching End (failed or cancelled); names the child."""

    def __init__(self, message: str, *, child_run_id: str):
        super().__init__(message)
        self.child_run_id = child_run_id


async def run_subgraph(
    graph: Any, node: Any = None, *, inputs: Any = None, state: Any = None, deps: Any = None
) -> Any:
    """Run `graph` (a lab graph, declared or adopted) as a child of the running station; its output.

    `node` / `inputs` / `state` / `deps` are what `graph.start(...)` takes (deps default to the
    parent's). Call it with `await` inside a node's `run`.
    """
    station = station_context.get()
    parent = running_run.get()
    if station is None or parent is None:
        raise RunStateError("run_subgraph() is awaited inside a node's run() while a lab run steps it")
    child = _child_for_call(parent, station, lambda: _start_child(parent, station.node_id, graph, node, inputs, state, deps))
    stop = child.watch(_forwarder(parent, station.node_id, child.id))
    try:
        if child.status in ("created", "running", "queued", "waiting"):
            await child.arun(raise_on_failure=False)
    finally:
        stop()
    if child.status == "done":
        return child.output
    if child.status == "waiting" and child.wait is not None:
        raise _mirror(child, child.wait, station)
    err = child.error or {}
    raise SubgraphError(
        f"subgraph run {child.id} of graph {child.graph.name!r} (station {station.node_id}) ended {child.status}"
        + (f": {err.get('type', '')}: {err.get('message', '')}" if err else "")
        + f"; look at it with lab.resume({child.id!r}), then retry this run (a retry starts a fresh child)",
        child_run_id=child.id,
    )


def _child_for_call(parent: Run, station: Any, start: Callable[[], Run]) -> Run:
    """The child run of this `run_subgraph()` call: the one its slot in the answer log names, else a new one.

    The station's answer log (`StationContext.answers`, kept in every wait's `prior`) has one entry
    per call in the order the node made them: an `interrupt()`'s answer, or a `child_slot` naming
    the child a `run_subgraph()` started. A station that runs again after a wait finds each call's
    own entry, so the child that parked gets the answer its parent received (and only that answer),
    a child that finished gives its output again without running, and the node's own `interrupt()`
    calls after it get their own answers.
    """
    log, slot = station.answers, station.used
    asked = _answered_mirror(parent, station.node_id)  # the parent's answered wait that mirrors a child's
    claimed = slot_child(log[slot]) if slot < len(log) else None
    named = asked.details["subgraph"].get("run") if asked is not None else None
    if claimed is None and isinstance(named, str) and not any(slot_child(e) is not None for e in log):
        # a park written before the answer log kept child slots: the answered wait names the child
        claimed = named
        del log[slot:]
        log.append(child_slot(claimed))
    elif claimed is None and slot < len(log):
        raise RunStateError(
            f"station {station.node_id} calls run_subgraph() where it called interrupt() before it parked "
            f"(call {slot + 1} of its run); a node asks its questions and runs its subgraphs in the same order "
            "every time it runs: make that order depend on the state, not on anything that changes"
        )
    station.used = slot + 1
    if claimed is None:
        child = start()
        log.append(child_slot(child.id))
        return child
    names_it = asked is not None and named == claimed
    if names_it and asked.kind == "interrupt":
        del log[slot + 1 :]  # the answer the parent got is the child's, not one for the node's own interrupt()
    child = _resume_child(parent, claimed)
    if names_it:
        _hand_answer(child, asked)
    if child.status in ("failed", "cancelled"):  # the parent's station is tried again: a fresh child
        child = start()
        log[slot] = child_slot(child.id)
    return child


def _start_child(parent: Run, node_id: str, graph: Any, node: Any, inputs: Any, state: Any, deps: Any) -> Run:
    from .lab import current_run, note_run  # noqa: I001

    shown = current_run()  # a child must not become the notebook's current run
    base = _base_seq(parent)
    try:
        kwargs: dict[str, Any] = {"state": state, "deps": parent.deps if deps is None else deps, "parent": (parent.id, base)}
        child = graph.start(node, **kwargs) if node is not None else graph.start(inputs=inputs, **kwargs)
    finally:
        note_run(shown)
    parent.record_event("subgraph", node_id=node_id, payload={"child_run": child.id, "child_graph": graph.name, "parent_seq": base})
    return child


def _base_seq(parent: Run) -> int | None:
    """The parent's checkpoint the station started from: below the waiting checkpoints it parked on."""
    seq = parent.head
    store = parent.lab.store
    while seq is not None:
        cp = store.checkpoint(parent.id, seq)
        if cp is None or cp.status != "waiting":
            return seq
        seq = cp.parent_seq
    return seq


def _answered_mirror(parent: Run, node_id: str) -> WaitRecord | None:
    """The answered wait at the parent's head that mirrored a child's park at this station, if any."""
    for w in reversed(parent.waits()):
        if (
            w.checkpoint_seq == parent.head and w.node_id == node_id and w.resolution is not None
            and isinstance(w.details, dict) and isinstance(w.details.get("subgraph"), dict)
        ):  # fmt: skip
            return w
    return None


def _resume_child(parent: Run, child_id: str) -> Run:
    from .lab import current_run, note_run

    shown = current_run()
    try:
        return parent.lab.resume(child_id, deps=parent.deps)
    finally:
        note_run(shown)


def _hand_answer(child: Run, asked: WaitRecord) -> None:
    """Give the parked child the answer its parent received on the wait that mirrored the child's."""
    wait = child.wait
    link = asked.details["subgraph"]
    if child.status != "waiting" or wait is None or wait.resolution is not None or wait.owner != link.get("owner"):
        return  # answered on the child itself (or it asks something else now): it goes on as it is
    res = asked.resolution or {}
    if wait.kind == "consent" and "approved" in res:
        (child.approve if res["approved"] else child.deny)(res.get("note"), owner=wait.owner)
    elif wait.kind == "interrupt":
        child.resume_with(res.get("answer"), owner=wait.owner)
    elif wait.kind == "capability":
        child.grant(wait.details.get("capability"), res.get("answer"), owner=wait.owner)
    # a breakpoint continues when the child is driven again


def _mirror(child: Run, wait: WaitRecord, station: Any) -> Exception:
    """The parent's wait for a parked child: consent as consent, everything else as an interrupt.

    Either keeps the station's answer log (its child slot last), for the station to run again with.
    """
    link = {"run": child.id, "graph": child.graph.name, "node": wait.node_id, "kind": wait.kind, "owner": wait.owner}
    details = {"subgraph": link, "prompt": wait.prompt, "details": wait.details}
    if wait.kind == "consent":
        prompt = wait.prompt or f"subgraph {child.graph.name}: {wait.node_id} asks for consent"
        return ConsentRequired(prompt, details, prior=list(station.answers))
    return InterruptRequested(details, list(station.answers))


def _forwarder(parent: Run, node_id: str, child_id: str) -> Any:
    """A sink on the child that hands its batches to the parent's streams, marked as a subgraph's."""

    def forward(batch: list[EventRecord]) -> None:
        parent.relay(SubgraphBatch(parent.id, node_id, child_id, batch))

    return forward
