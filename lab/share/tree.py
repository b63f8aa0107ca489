"""A run's checkpoint tree for a shared page: every branch, and a parallel run's frontier per checkpoint.

`tree_data` reads the whole tree once (`history(all_branches=True)`) and returns the checkpoints
(by seq; each with its parent, status, the station that settled it, its next stations and state)
and the branches the page's picker offers (`lab.share.branches`, the run widget's rule: one per
leaf), the head's branch first. Exporting one branch (`(run, seq)`) gives that branch alone.

A parallel run's checkpoint is a super-step: it is drawn as the run widget draws it
(lab/render/steps.py): every pending task lit (`▶ ×5` on a mapped step), each open join's
`k of n`, the stations earlier steps settled, the edges taken with their counts. The data holds
what each step settled and left pending (`step_data`, read with the renderer's own code) and the
graph's flow; the page's script counts each step's overlay from them as lab/render/frontier.py
does, when the step is shown (a long run's page would otherwise carry ~460 B of drawing a step).
`lit_data` is that count in Python, the reference the tests hold the script and the widget to.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from ..errors import ArgumentError
from ..history import StoredRun
from ..records import CheckpointRecord
from ..render import GraphSpec
from ..render.dot import mark_line
from ..render.frontier import flow_json, join_counts
from ..render.steps import StepView, frontier_of, next_summary
from .branches import branches

__all__ = ("tree_data", "lit_data", "step_data")


def _at(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="milliseconds")


def _branch(tree: dict[int, CheckpointRecord], tip: int) -> list[int]:
    seqs: list[int] = []
    seq: int | None = tip
    while seq is not None and len(seqs) <= len(tree):
        seqs.append(seq)
        seq = tree[seq].parent_seq
    return seqs[::-1]


def tree_data(
    run: StoredRun, upto: int | None = None, spec: GraphSpec | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any] | None]:
    """(checkpoints, branches, flow) of the run; `upto`: only the branch ending at that checkpoint.

    With `spec` (a parallel run's graph), each checkpoint also holds its super-step (`step`) and
    `flow` is the graph's, from which the page's script draws each frontier (`step_data`); else None.
    """
    tree = {r.seq: r for r in run.history(all_branches=True)}
    head = run.head
    if upto is not None:
        if upto not in tree:
            raise ArgumentError(
                f"run {run.id} has no checkpoint {upto}; .history(all_branches=True) lists its checkpoints"
            )
        keep = _branch(tree, upto)
        tree = {s: tree[s] for s in keep}
        found = [{"label": f"0…{upto}" if upto else "0", "tip": upto, "seqs": keep, "head": head in keep}]
    else:
        parents = {s: r.parent_seq for s, r in tree.items()}
        found = [
            {"label": b.label, "tip": b.tip, "seqs": _branch(tree, b.tip), "head": b.has_head}
            for b in sorted(branches(parents, head), key=lambda b: not b.has_head)  # the head's first
        ]
    settled = run.settled_stations()
    flow, steps = step_data(run, tree, spec) if spec is not None else (None, {})
    checkpoints = []
    for seq in sorted(tree):
        r = tree[seq]
        cp: dict[str, Any] = {
            "seq": r.seq,
            "parent": r.parent_seq,
            "status": r.status,
            "station": settled.get(r.seq),
            "next": [{"node": p.node_id, "fields": p.fields} for p in r.next],
            "state": r.state,
            "at": _at(r.created_at),
        }
        if seq in steps:
            cp["step"] = steps[seq]
            cp["station"] = _counted_pairs(steps[seq]["did"]) or None
        checkpoints.append(cp)
    return checkpoints, found, flow


def _pairs(names: Any) -> list[list[Any]]:
    """`[[name, count], ...]` in order of first appearance."""
    return [[s, n] for s, n in Counter(names).items()]


def _counted_pairs(pairs: list[list[Any]]) -> str:
    return ", ".join(f"{s} ×{n}" if n > 1 else s for s, n in pairs)


def step_data(
    run: StoredRun, tree: dict[int, CheckpointRecord], spec: GraphSpec
) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """A parallel run's graph flow and, per checkpoint, its super-step: what the page's script draws
    each frontier from, counting as `lit_data` (the renderer's `overlay_from_frontier`) does.

    The flow is `flow_json(spec)` with the run's `failed` station and `parked` ones (lit at the head
    only); a step is `{"did": [[station, tasks it settled], ...], "tasks": [[station, pending tasks],
    ...], "next": "square ×5"}`, with `"open": [join, ...]` (the joins' accumulators) and `"joins":
    {join: [k, n]}` when it has them. A checkpoint's tally is its parent's plus its step (`did`); a
    root's is empty. The script's drawing of every step equals `lit_data`'s (tests/browser)."""
    view = StepView(spec, lambda seqs: {s: tree[s] for s in seqs})
    rec = run.record
    flow: dict[str, Any] = flow_json(spec)
    flow["failed"] = (rec.error or {}).get("node_id") if rec.status == "failed" else None
    flow["parked"] = [w.node_id for w in run.waits() if w.open] if rec.status == "waiting" else []
    out: dict[int, dict[str, Any]] = {}
    for seq in sorted(tree):
        cp = tree[seq]
        parent = tree.get(cp.parent_seq) if cp.parent_seq is not None else None
        tasks, accs = frontier_of(cp)
        step: dict[str, Any] = {
            "did": _pairs(view.settled_in(parent, cp)) if parent is not None else [],
            "tasks": _pairs(t.node_id for t in tasks),
            "next": next_summary(cp, (tasks, accs)),
        }
        if accs:
            step["open"] = list(dict.fromkeys(a.join_id for a in accs))
            if cp.status != "done":
                step["joins"] = {j: list(kn) for j, kn in join_counts(tasks, accs, {}).items()}
        out[seq] = step
    return flow, out


def _counted(names: Any) -> str:
    return ", ".join(f"{s} ×{n}" if n > 1 else s for s, n in Counter(names).items())


def _parents_first(tree: dict[int, CheckpointRecord]) -> list[int]:
    """The tree's seqs, each after its parent (a checkpoint whose parent is not in `tree` is a root)."""
    children: dict[int | None, list[int]] = {}
    for seq in sorted(tree):
        parent = tree[seq].parent_seq
        children.setdefault(parent if parent in tree else None, []).append(seq)
    order: list[int] = []
    todo = list(reversed(children.get(None, [])))
    while todo:
        seq = todo.pop()
        order.append(seq)
        todo.extend(reversed(children.get(seq, [])))
    return order


def lit_data(run: StoredRun, tree: dict[int, CheckpointRecord], spec: GraphSpec) -> dict[int, dict[str, Any]]:
    """Per checkpoint of a parallel run: its drawing's node classes and mark lines, edge counts, words.

    `{"nodes": {station: [classes, mark line]}, "edges": {"a→b": n}, "next": "square ×5",
    "settled": "a, b, c"}`; a node or edge not listed is drawn plain (its kind mark, idle).
    """
    view = StepView(spec, lambda seqs: {s: tree[s] for s in seqs})
    rec = run.record
    failed = (rec.error or {}).get("node_id") if rec.status == "failed" else None
    parked = [w.node_id for w in run.waits() if w.open] if rec.status == "waiting" else []
    out: dict[int, dict[str, Any]] = {}
    for seq in _parents_first(tree):
        cp = tree[seq]
        parent = tree.get(cp.parent_seq) if cp.parent_seq is not None else None
        tally = view.step(parent, cp)  # the branch's steps up to here: its parent's and this one
        at_head = seq == rec.head_seq
        frontier = frontier_of(cp)
        overlay = view.overlay_for(
            tally,
            cp,
            failed=failed if at_head else None,
            parked=parked if at_head else (),
            frontier=frontier,
        )
        nodes = {}
        for node in spec.nodes:
            classes = overlay.node_classes(node.id)
            if classes or overlay.marks(node.id):
                nodes[node.id] = [" ".join(classes), mark_line(node, overlay).strip()]
        out[seq] = {
            "nodes": nodes,
            "edges": {f"{a}→{b}": n for (a, b), n in overlay.traversed.items() if n},
            "next": next_summary(cp, frontier),
            "settled": _counted(tally.last),
        }
    return out
