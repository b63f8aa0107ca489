"""Two runs or branches side by side: `lab.compare(a, b)` gives a `Comparison`.

Each side is a run (its head branch) or a `(run, checkpoint_seq)` pair (the branch ending there).
A fork's side starts with its parent's branch up to the checkpoint it was forked from (lineage),
so a fork and its parent share a prefix. Checkpoints are aligned by position along the two
branches; the shared prefix ends at the first position where the settled station or the state
differs. Two parallel runs are aligned super-step by super-step: each position names what its
step settled (`settled`, `station` as words: "square ×5") and its frontier after (`tasks`,
`frontier`), a step differs also when its pending tasks or their inputs do, the first differing
step lists every task it settled with its inputs (`tasks`), and the drawing counts each side's
steps as the run widget does (`overlay_two_steps`), lighting the tasks each side has pending.

`Comparison` holds plain data: the aligned rows with their state differences (lab/diff.py),
the first differing station on each side with its inputs (the state before it and its node
fields) and its recorded calls (live or replayed), and the two paths for the drawing. It displays as a widget (`compare.display`, registered
by lab.views) and goes into an HTML page (`lab.export_html([a, b], path)`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from ..diff import StateDiff, diff_json
from ..display_hooks import show
from ..errors import ArgumentError
from ..history import StoredRun
from ..render import END, GraphvizError, layout, overlay_two_paths, overlay_two_steps, spec_from_manifest
from .collect import call_data, checkpoints_of, labels_of, stored

__all__ = ("Side", "Aligned", "Comparison", "compare", "side_of", "ROWS_SHOWN")

ROWS_SHOWN = 200
"""Aligned rows kept from the divergence on (a 10,000-checkpoint pair stays readable)."""


@dataclass(frozen=True)
class Side:
    """One branch to compare: the run, where it ends, and its checkpoints from the lineage root."""

    run: StoredRun
    upto: int | None
    label: str
    entries: list[dict[str, Any]]
    """Checkpoints root first (`run`, `seq`, `station`, `state`, `next`), a fork's parent's prefix included."""
    labels: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def path(self) -> list[str]:
        return [e["station"] for e in self.entries if e["station"]]


@dataclass(frozen=True)
class Aligned:
    """The checkpoints at one position of both branches and how their states differ."""

    index: int
    a: dict[str, Any] | None
    b: dict[str, Any] | None
    diff: StateDiff | None


def _entries(run: StoredRun, upto: int | None, depth: int = 0) -> list[dict[str, Any]]:
    own = [dict(c, run=run.id) for c in checkpoints_of(run, upto)]
    rec = run.record
    if rec.parent_run_id is None or rec.parent_seq is None or depth > 20 or not own:
        return own
    prefix = _entries(run.read(rec.parent_run_id), rec.parent_seq, depth + 1)
    if prefix:  # the fork's first checkpoint copies the parent's: one position, the fork's state
        settled = {k: prefix[-1][k] for k in ("station", "settled", "settled_tasks") if k in prefix[-1]}
        first = dict(own[0], **settled)
        return [*prefix[:-1], first, *own[1:]]
    return own


def side_of(value: Any, name: str) -> Side:
    """A run, a `lab.read` run, or a `(run, checkpoint_seq)` pair, read into a `Side`."""
    upto: int | None = None
    run = value
    if isinstance(value, tuple):
        if len(value) != 2 or not isinstance(value[1], int) or isinstance(value[1], bool):
            raise ArgumentError(
                f"compare's {name} side {value!r}: pass a run or a (run, checkpoint_seq) pair, seq an int"
            )
        run, upto = value
    readable = stored(run)
    label = f"{name}: {readable.id}" + (f"@{upto}" if upto is not None else "")
    return Side(readable, upto, label, _entries(readable, upto), labels_of(run))


def _same(x: dict[str, Any], y: dict[str, Any]) -> bool:
    if x["station"] != y["station"] or x["state"] != y["state"]:
        return False
    if "settled" in x or "settled" in y:  # super-steps: the same tasks pending, with the same inputs
        return [(p["node"], p["fields"]) for p in x["next"]] == [(p["node"], p["fields"]) for p in y["next"]]
    return True


def _ran(entries: list[dict[str, Any]], i: int) -> bool:
    """Whether a station ran into position `i` (not a fork's copied first checkpoint, not an edit)."""
    if i >= len(entries):
        return True  # the other side may still have run one here
    e = entries[i]
    return bool(e["station"]) and not (e["seq"] == 0 and e["run"] != entries[i - 1]["run"])


def _first_position(ea: list[dict[str, Any]], eb: list[dict[str, Any]], shared: int) -> int:
    """The first position from the divergence on where a station ran on both sides' branches
    (a fork's copied checkpoint or a state edit is where the data changed, not a station)."""
    i = max(shared, 1)
    while i < max(len(ea), len(eb)) and not (_ran(ea, i) and _ran(eb, i)):
        i += 1
    return i


def _key(task: Any) -> Any:
    return tuple(task) if isinstance(task, list) else task


def _station_at(entries: list[dict[str, Any]], i: int) -> dict[str, Any] | None:
    """The station that settled into position `i`, with its inputs: the state before it and its fields."""
    if not 1 <= i < len(entries) or not entries[i]["station"]:
        return None
    station, before = entries[i]["station"], entries[i - 1]
    if "settled" in entries[i]:  # a super-step: every task it settled, each with its node fields
        ids = entries[i]["settled_tasks"]
        by_task = {_key(p.get("task")): p for p in before["next"]}
        tasks = [
            {"node": sid, "task": tid, "fields": by_task.get(_key(tid), {}).get("fields")}
            for tid, sid in zip(ids, entries[i]["settled"], strict=True)
        ]
        return {
            "station": station,
            "run": entries[i]["run"],
            "seq": entries[i]["seq"],
            "from_seq": before["seq"],
            "state_before": before["state"],
            "fields": None,
            "tasks": tasks,
        }
    fields = next((p["fields"] for p in before["next"] if p["node"] == station), None)
    return {
        "station": station,
        "run": entries[i]["run"],
        "seq": entries[i]["seq"],
        "from_seq": before["seq"],
        "state_before": before["state"],
        "fields": fields,
    }


def _with_calls(run: StoredRun, first: dict[str, Any] | None) -> dict[str, Any] | None:
    """The first differing station with its recorded calls (`calls`: live or replayed, docs/replay.md):
    those of the try that settled into its checkpoint (a rewound branch's try from the same checkpoint
    is not this one); every try from that checkpoint when no `settled` event names it."""
    if first is None:
        return None
    owner = run if first["run"] == run.id else run.read(first["run"])
    names = {t["node"] for t in first.get("tasks") or ()} or {first["station"]}  # a super-step: each task's station
    tries = {e.attempt for e in owner.events("settled") if e.checkpoint_seq == first["seq"] and e.node_id in names}
    calls = [
        call_data(c)
        for c in owner.calls()
        if c.node_id in names and c.checkpoint_seq == first["from_seq"] and (not tries or c.attempt in tries)
    ]
    return {**first, "calls": calls}


@dataclass(frozen=True)
class Comparison:
    """What `lab.compare(a, b)` returns: displays as a widget; `.to_json()` is the page's data."""

    a: Side
    b: Side
    shared: int
    """How many aligned positions the two branches share (same station, same state)."""
    rows: list[Aligned]
    """Aligned positions from the last shared one on, at most `ROWS_SHOWN`."""
    total_rows: int
    first_a: dict[str, Any] | None
    first_b: dict[str, Any] | None

    @property
    def diverged(self) -> bool:
        return self.shared < max(len(self.a.entries), len(self.b.entries))

    def paths(self) -> tuple[list[str], list[str], list[str]]:
        """The shared prefix's stations, then side A's and side B's after it."""
        cut = self.shared

        def stations(entries: list[dict[str, Any]]) -> list[str]:
            return [e["station"] for e in entries if e["station"]]

        return stations(self.a.entries[:cut]), stations(self.a.entries[cut:]), stations(self.b.entries[cut:])

    @property
    def parallel(self) -> bool:
        """Whether the two sides are parallel runs, compared super-step by super-step."""
        return any("settled" in e for e in self.a.entries[:1] + self.b.entries[:1])

    def steps(self) -> tuple[list[list[str]], list[list[str]], list[list[str]]]:
        """Two parallel runs: the shared super-steps' settled stations, then each side's after them."""
        cut = self.shared

        def steps(entries: list[dict[str, Any]], lo: int, hi: int | None) -> list[list[str]]:
            return [list(e.get("settled", ())) for e in entries[max(lo, 1) : hi]]

        return (
            steps(self.a.entries, 1, cut),
            steps(self.a.entries, cut, None),
            steps(self.b.entries, cut, None),
        )

    def svg(self) -> str:
        """Side A's graph drawn with both paths (the real `dot`, restyled by `overlay_two_paths`)."""
        manifest = self.a.run.manifest()
        if manifest is None:
            return "<p>no stored manifest: no drawing</p>"
        done_a, done_b = (bool(s.entries) and s.entries[-1]["status"] == "done" for s in (self.a, self.b))
        spec = spec_from_manifest(manifest, self.a.labels)
        if self.parallel:
            shared_steps, sa, sb = self.steps()
            tips = [s.entries[-1].get("tasks", []) if s.entries else [] for s in (self.a, self.b)]
            return layout(spec).svg(
                overlay_two_steps(spec, shared_steps, sa, sb, tips[0], tips[1], done_a, done_b)
            )
        shared, pa, pb = self.paths()
        if not self.diverged:
            shared = [*shared, END] if done_a else shared
        else:  # a side that finished reached End: its last edge and End are drawn as its own
            pa, pb = ([*pa, END] if done_a else pa), ([*pb, END] if done_b else pb)
        return layout(spec).svg(overlay_two_paths(shared, pa, pb))

    def drawing(self) -> str:
        try:
            return self.svg()
        except GraphvizError as exc:
            return f"<pre>{escape(str(exc))}</pre>"

    def to_json(self) -> dict[str, Any]:
        shared, pa, pb = self.paths()
        return {
            "a": {
                "label": self.a.label,
                "run": self.a.run.id,
                "graph": self.a.run.graph,
                "length": len(self.a.entries),
            },
            "b": {
                "label": self.b.label,
                "run": self.b.run.id,
                "graph": self.b.run.graph,
                "length": len(self.b.entries),
            },
            "shared": self.shared,
            "parallel": self.parallel,
            "paths": {"shared": shared, "a": pa, "b": pb},
            "steps": dict(zip(("shared", "a", "b"), self.steps(), strict=True)) if self.parallel else None,
            "rows": [
                {
                    "index": r.index,
                    "a": _brief(r.a),
                    "b": _brief(r.b),
                    "changes": None if r.diff is None else r.diff.to_json(),
                }
                for r in self.rows
            ],
            "total_rows": self.total_rows,
            "first": {"a": self.first_a, "b": self.first_b},
        }

    def _ipython_display_(self) -> None:
        show("compare.display", self)

    def __repr__(self) -> str:
        if not self.diverged:
            return f"<Comparison {self.a.label} vs {self.b.label}: the same {self.shared} checkpoints>"
        first = self.first_a or self.first_b or {}
        return (
            f"<Comparison {self.a.label} vs {self.b.label}: {self.shared} shared, diverged at position "
            f"{self.shared} (first differing station {first.get('station')!r})>"
        )


def _brief(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    out = {"run": entry["run"], "seq": entry["seq"], "station": entry["station"], "status": entry["status"]}
    if "settled" in entry:  # a super-step: what it settled, and its frontier after
        out["settled"] = entry["settled"]
        out["tasks"] = entry["tasks"]
        out["frontier"] = entry["frontier"]
    return out


def compare(a: Any, b: Any) -> Comparison:
    """Compare two runs or branches (a run, `lab.read(id)`, or a `(run, checkpoint_seq)` pair)."""
    left, right = side_of(a, "A"), side_of(b, "B")
    ea, eb = left.entries, right.entries
    shared = 0
    while shared < min(len(ea), len(eb)) and _same(ea[shared], eb[shared]):
        shared += 1
    start = max(0, shared - 1)
    total = max(len(ea), len(eb)) - start
    rows = []
    for i in range(start, min(start + ROWS_SHOWN, start + total)):
        x = ea[i] if i < len(ea) else None
        y = eb[i] if i < len(eb) else None
        diff = None
        if x is not None and y is not None:
            diff = diff_json(
                x["state"], y["state"], left=f"{x['run']}@{x['seq']}", right=f"{y['run']}@{y['seq']}"
            )
        rows.append(Aligned(i, x, y, diff))
    first_a = first_b = None
    if shared < max(len(ea), len(eb)):
        at = _first_position(ea, eb, shared)
        first_a, first_b = _with_calls(left.run, _station_at(ea, at)), _with_calls(right.run, _station_at(eb, at))
    return Comparison(left, right, shared, rows, total, first_a, first_b)
