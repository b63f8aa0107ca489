"""A run read into plain JSON data for a shared page: checkpoints, events, waits, children, drawing.

Everything is read through the public API: `lab.read(run_id)` (a `StoredRun`: record, history,
events, waits, settled stations, manifest), so a run another process advances, or one whose graph
code is not defined here, exports the same. The result is the page's data model (docs/share.md):

    {"id", "graph", "revision", "status", "head", "parent_run", "parent_seq", "error", "output",
     "drawing": key into the page's drawings, "marks": {station: its kind mark}, "parallel",
     "flow" (a parallel run's graph flow, from which the page's script draws each step: step_data),
     "checkpoints": [{"seq", "parent", "status", "station", "next": [{"node", "fields"}], "state",
                      "step" (a parallel run's super-step: lab/share/tree.py step_data)}] (every checkpoint
                      of the tree, by seq),
     "branches": [{"label", "tip", "seqs", "head"}] (the head's branch first),
     "events": [{"seq", "kind", "node", "attempt", "cp", "payload", "at"}] (read as the store's rows,
                `JsonRows`, that the page embeds as they are: lab/share/page.py EVENT_COLUMNS),
     "waits": [{"owner", "kind", "node", "cp", "prompt", "details", "at", "resolved_at", "resolution"}],
     "calls": [{"call", "node", "cp", "attempt", "index", "kind", "name", "mode", "tokens",
                "saved_tokens", "replayed_from", "ms", "at"}] (recorded calls, docs/replay.md),
     "children": [{"run", "graph", "node"}]}

A section another part adds (recorded model calls, say) is one more key per run, filled by one more
reader in `SECTIONS`, and one more panel in the page script (`page_script.PANELS`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from html import escape
from typing import Any

from ..errors import ArgumentError
from ..history import StoredRun
from ..records import CheckpointRecord
from ..render import GraphSpec, GraphvizError, edge_labels, layout, spec_from_manifest
from ..render.dot import mark_line
from ..render.steps import frontier_of, is_parallel, next_summary, settled_tasks
from .page import JsonRows
from .tree import tree_data

__all__ = ("stored", "run_data", "drawing_of", "calls_of", "call_data", "SECTIONS", "Drawings")

Drawings = dict[str, str]
"""Drawing key -> the inline SVG (or an escaped note saying why there is none)."""


def stored(run: Any) -> StoredRun:
    """The read-only view of a run handle (`Run`, `StoredRun`, or anything with `.lab.read`)."""
    if isinstance(run, StoredRun):
        return run
    lab = getattr(run, "lab", None)
    read = getattr(lab, "read", None)
    run_id = getattr(run, "id", None)
    if callable(read) and isinstance(run_id, str):
        return read(run_id)
    raise ArgumentError(
        f"cannot export or compare {run!r}: pass a run (g.start(...), lab.resume(id)) or lab.read(run_id)"
    )


def labels_of(run: Any) -> dict[tuple[str, str], str]:
    """Edge labels from the graph's code when the handle has it (a live run), else none."""
    graph = getattr(run, "graph", None)
    if graph is None or isinstance(graph, str):
        return {}
    return edge_labels(graph)


def drawing_of(
    run: StoredRun, drawings: Drawings, labels: dict[tuple[str, str], str] | None = None
) -> tuple[str, dict[str, str], GraphSpec | None]:
    """The drawing key of the run's graph revision (laid out by `dot` once), each station's kind
    mark, and the graph's spec when the run is parallel (its checkpoints are drawn as frontiers)."""
    rec = run.record
    key = f"{rec.graph_key}@{rec.revision}"
    manifest = run.manifest()
    if manifest is None:
        drawings.setdefault(key, f'<p class="gl-note">no stored manifest for {escape(key)}: no drawing</p>')
        return key, {}, None
    spec = spec_from_manifest(manifest, labels)
    if key not in drawings:
        try:
            drawings[key] = layout(spec).svg(None)
        except GraphvizError as exc:
            drawings[key] = f'<pre class="gl-note">{escape(str(exc))}</pre>'
    marks = {n.id: mark_line(n, None).strip() for n in spec.nodes}
    return key, {k: v for k, v in marks.items() if v}, spec if is_parallel(manifest) else None


def _at(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="milliseconds")


def checkpoints_of(run: StoredRun, upto: int | None = None) -> list[dict[str, Any]]:
    """The branch ending at `upto` (default: the head), root first, with the station that settled each."""
    if upto is None:
        records = list(run.history())
    else:
        tree = {r.seq: r for r in run.history(all_branches=True)}
        if upto not in tree:
            raise ArgumentError(
                f"run {run.id} has no checkpoint {upto}; .history(all_branches=True) lists its checkpoints"
            )
        records = []
        seq: int | None = upto
        while seq is not None:
            records.append(tree[seq])
            seq = tree[seq].parent_seq
        records.reverse()
    if is_parallel(run.manifest()):
        return _steps_of(records)
    settled = run.settled_stations()
    return [
        {
            "seq": r.seq,
            "parent": r.parent_seq,
            "status": r.status,
            "station": settled.get(r.seq),
            "next": [{"node": p.node_id, "fields": p.fields} for p in r.next],
            "state": r.state,
            "at": _at(r.created_at),
        }
        for r in records
    ]


def counted(names: Any) -> str:
    """ "a, square ×5": stations with their task counts, in order of first appearance."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{s} ×{n}" if n > 1 else s for s, n in counts.items())


def _steps_of(records: list[CheckpointRecord]) -> list[dict[str, Any]]:
    """A parallel branch's checkpoints as super-steps: each names the tasks its step settled
    (`settled`, and `station` as words: "a, b, c"), its frontier (`tasks`, `frontier` as the
    timeline words it) and each pending task's id (`next[i]["task"]`)."""
    out: list[dict[str, Any]] = []
    for i, r in enumerate(records):
        done = settled_tasks(records[i - 1], r) if i else []
        tasks, _joins = frontier_of(r)
        out.append(
            {
                "seq": r.seq,
                "parent": r.parent_seq,
                "status": r.status,
                "station": counted(sid for _t, sid in done) or None,
                "settled": [sid for _t, sid in done],
                "settled_tasks": [t for t, _sid in done],
                "tasks": [t.node_id for t in tasks],
                "frontier": next_summary(r),
                "next": [
                    {"node": p.node_id, "fields": p.fields, "task": (p.meta or {}).get("task")}
                    for p in r.next
                ],
                "state": r.state,
                "at": _at(r.created_at),
            }
        )
    return out


def events_of(run: StoredRun) -> JsonRows:
    """Every event of the run as the store wrote the rows (`page.EVENT_COLUMNS`), in one read: a long
    run's events go into the page without a record or a dict each."""
    return JsonRows(run.event_rows_json())


def waits_of(run: StoredRun) -> list[dict[str, Any]]:
    return [
        {
            "owner": w.owner,
            "kind": w.kind,
            "node": w.node_id,
            "cp": w.checkpoint_seq,
            "prompt": w.prompt,
            "details": w.details,
            "at": _at(w.created_at),
            "resolved_at": _at(w.resolved_at),
            "resolution": w.resolution,
        }
        for w in run.waits()
    ]


def call_data(c: Any) -> dict[str, Any]:
    """One recorded call (`CallRecord`) as the page shows it: no request or response, only what it was."""
    return {
        "call": c.call_id,
        "node": c.node_id,
        "cp": c.checkpoint_seq,
        "attempt": c.attempt,
        "index": c.call_index,
        "kind": c.kind,
        "name": c.name,
        "mode": c.mode,
        "tokens": c.tokens,
        "saved_tokens": c.tokens if c.mode == "replayed" else 0,
        "replayed_from": c.replayed_from,
        "ms": None if c.ms is None else round(c.ms, 3),
        "at": _at(c.created_at),
    }


def calls_of(run: StoredRun) -> list[dict[str, Any]]:
    """The run's recorded calls (model requests, `@lab.recorded` functions), live or replayed, oldest first."""
    return [call_data(c) for c in run.calls()]


SECTIONS: dict[str, Callable[[StoredRun], Any]] = {"events": events_of, "waits": waits_of, "calls": calls_of}
"""Per-run sections read besides the checkpoints: name -> reader. A new section plugs in here."""


def run_data(
    run: StoredRun,
    drawings: Drawings,
    *,
    upto: int | None = None,
    labels: dict[tuple[str, str], str] | None = None,
) -> dict[str, Any]:
    """One run as the page's plain JSON data (the module docstring names every key)."""
    rec = run.record
    key, marks, parallel = drawing_of(run, drawings, labels)
    checkpoints, found, flow = tree_data(run, upto, parallel)
    data: dict[str, Any] = {
        "id": run.id,
        "graph": rec.graph_key,
        "revision": rec.revision,
        "status": rec.status,
        "head": rec.head_seq,
        "upto": upto,
        "parent_run": rec.parent_run_id,
        "parent_seq": rec.parent_seq,
        "error": rec.error,
        "output": rec.output,
        "drawing": key,
        "marks": marks,
        "parallel": parallel is not None,
        "checkpoints": checkpoints,
        "branches": found,
    }
    if flow is not None:
        data["flow"] = flow
    for name, read in SECTIONS.items():
        data[name] = read(run)
    data["children"] = [
        {"run": e.payload.get("child_run"), "graph": e.payload.get("child_graph"), "node": e.node_id}
        for e in run.events(kind="subgraph")
        if isinstance(e.payload, dict) and e.payload.get("child_run")
    ]
    return data


def family_data(
    run: StoredRun,
    drawings: Drawings,
    *,
    upto: int | None = None,
    labels: dict[tuple[str, str], str] | None = None,
    depth: int = 3,
) -> list[dict[str, Any]]:
    """The run, then its subgraph children (and theirs, `depth` levels down), each once."""
    out = [run_data(run, drawings, upto=upto, labels=labels)]
    seen = {run.id}
    frontier = [(out[0], 0)]
    while frontier:
        parent, level = frontier.pop(0)
        if level >= depth:
            continue
        for child in parent["children"]:
            if child["run"] in seen:
                continue
            seen.add(child["run"])
            data = run_data(run.read(child["run"]), drawings)
            data["child_of"] = {"run": parent["id"], "node": child["node"]}
            out.append(data)
            frontier.append((data, level + 1))
    return out
