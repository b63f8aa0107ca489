"""How lab objects look in a notebook: escaped HTML tables, each with a plain-text twin.

Two kinds live here. Renderers for the lab's own types (runs, graphs, checkpoints,
histories, run records), registered as IPython formatters while the extension is loaded; and
small result types the magics return (`RunList`, `EventList`, `StepList`, `SqlResult`), which
carry their own `_repr_html_`. Every value that reaches HTML goes through `html.escape`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from html import escape
from typing import Any

from pydantic_core import to_jsonable_python

from lab import Checkpoint, CheckpointRecord, EventRecord, LabGraph, Run, RunRecord, StepResult, WaitRecord
from lab.history import History
from lab.run_list import RunList

__all__ = (
    "HTML_FORMATTERS",
    "TEXT_FORMATTERS",
    "RunList",
    "EventList",
    "StepList",
    "SqlResult",
    "run_html",
    "graph_html",
    "checkpoint_html",
    "checkpoint_text",
    "history_html",
    "run_record_html",
    "wait_html",
)

STATUS_MARK = {
    "created": "○",
    "running": "▶",
    "waiting": "⏸",
    "queued": "⏵",
    "done": "✔",
    "failed": "✖",
    "cancelled": "⊘",
    "interrupted": "⚠",
}

HISTORY_ROWS = 60
"""A history longer than this shows its first and last halves (it is read in pages)."""

_TABLE = "graphlab-table"
_CELL = "style='text-align:left;padding:0 .8em 0 0;vertical-align:top'"


def short(value: Any, limit: int = 200) -> str:
    """A value as one short line of JSON (strings as they are)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(to_jsonable_python(value), default=str)
        except Exception:
            text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def _mark(status: str) -> str:
    return f"{STATUS_MARK.get(status, '')} {status}".strip()


def html_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    note: str | None = None,
) -> str:
    """An HTML table of strings, every one escaped; `None` rows become an ellipsis row."""
    head = "".join(f"<th {_CELL}>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        if row is None:
            body.append(f"<tr><td colspan='{len(headers)}'>…</td></tr>")
        else:
            body.append("<tr>" + "".join(_td(v) for v in row) + "</tr>")
    if not body:
        body.append(f"<tr><td colspan='{len(headers)}'><i>none</i></td></tr>")
    caption = f"<b>{escape(title)}</b>" if title else ""
    foot = f"<div><small>{escape(note)}</small></div>" if note else ""
    return f"<div>{caption}<table class='{_TABLE}'><tr>{head}</tr>{''.join(body)}</table>{foot}</div>"


def _td(value: Any) -> str:
    text = str(value)
    return f"<td {_CELL}><code>{escape(text)}</code></td>" if text else f"<td {_CELL}></td>"


def text_table(
    headers: Sequence[str], rows: Iterable[Sequence[Any] | None], *, title: str | None = None
) -> str:
    """The same table as aligned plain text."""
    cells = [[str(v) for v in r] if r is not None else None for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        if r is not None:
            widths = [max(w, len(v)) for w, v in zip(widths, r, strict=True)]
    lines = [title] if title else []
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    for r in cells:
        lines.append(
            "  …" if r is None else "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
        )
    if not cells:
        lines.append("  (none)")
    return "\n".join(lines)


def key_value_html(rows: Sequence[tuple[str, str]], *, css: str = "graphlab-card") -> str:
    body = "".join(
        f"<tr><th {_CELL}>{escape(k)}</th><td {_CELL}><code>{escape(v)}</code></td></tr>" for k, v in rows
    )
    return f"<table class='{css}'>{body}</table>"


# -- runs and graphs (the fallbacks while the widget and renderer are absent) ----------------


def run_rows(run: Run) -> list[tuple[str, str]]:
    rows = [
        ("run", run.id),
        ("graph", f"{run.graph.name}@{run.revision}"),
        ("status", _mark(run.status)),
        ("head", str(run.head)),
        ("next", ", ".join(run.next_stations) or "—"),
        ("state", short(run.state_json, 300)),
    ]
    wait = getattr(run, "wait", None)
    if run.status == "waiting" and wait is not None:
        rows.append(
            (
                "waiting for",
                f"{getattr(wait, 'kind', '?')} at {getattr(wait, 'node_id', '?')}: {getattr(wait, 'prompt', '')}",
            )
        )
    if run.status == "done":
        rows.append(("output", short(run.output_json, 300)))
    if run.error:
        rows.append(("error", f"{run.error.get('type')}: {run.error.get('message')}"))
    return rows


def run_html(run: Run) -> str:
    """A compact run card: graph revision, status, head, next stations, state and output."""
    return key_value_html(run_rows(run), css="graphlab-run")


def graph_html(graph: LabGraph) -> str:
    """The declared stations and their permitted successors (or what is missing so far)."""
    try:
        m = graph.manifest
        rows = [(s.node_id, ", ".join(m.successors(s.node_id)) or "—") for s in m.stations]
        title = f"{graph.name}@{m.revision}"
    except Exception as exc:  # a graph mid-declaration still displays, with what is missing
        rows = [(n, "?") for n in graph.nodes]
        title = f"{graph.name} (not buildable yet: {exc})"
    return html_table(("station", "may go to"), rows, title=title)


# -- checkpoints and histories -------------------------------------------------------------


def _checkpoint_rows(cp: Checkpoint | CheckpointRecord) -> list[tuple[str, str]]:
    if isinstance(cp, Checkpoint):
        nxt = ", ".join(cp.next_stations)
        state, output = cp.state, cp.output
    else:
        nxt = ", ".join(p.node_id for p in cp.next)
        state, output = cp.state, cp.output
    rows = [
        ("checkpoint", f"{cp.run_id}@{cp.seq}"),
        ("parent", "—" if cp.parent_seq is None else str(cp.parent_seq)),
        ("status", _mark(cp.status)),
        ("next", nxt or "—"),
        ("state", short(state, 400)),
    ]
    if cp.status == "done":
        rows.append(("output", short(output, 300)))
    rows.append(("created", _when(cp.created_at)))
    if isinstance(cp, Checkpoint) and cp.events:
        rows.append(("led here", ", ".join(f"{e.kind} {e.node_id or ''}".strip() for e in cp.events)))
    return rows


def checkpoint_html(cp: Checkpoint | CheckpointRecord) -> str:
    return key_value_html(_checkpoint_rows(cp), css="graphlab-checkpoint")


def checkpoint_text(cp: Checkpoint | CheckpointRecord) -> str:
    rows = _checkpoint_rows(cp)
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


_HISTORY_HEADERS = ("seq", "parent", "status", "next", "state")


def _history_rows(history: History) -> list[tuple[str, ...] | None]:
    n = len(history)
    if n <= HISTORY_ROWS:
        picked: list[CheckpointRecord | None] = list(history)
    else:
        half = HISTORY_ROWS // 2
        picked = [*history[:half], None, *history[n - half :]]
    return [
        None
        if cp is None
        else (
            str(cp.seq),
            "—" if cp.parent_seq is None else str(cp.parent_seq),
            _mark(cp.status),
            ", ".join(p.node_id for p in cp.next) or "—",
            short(cp.state, 120),
        )
        for cp in picked
    ]


def history_html(history: History) -> str:
    return html_table(
        _HISTORY_HEADERS,
        _history_rows(history),
        title=f"history of {history.run_id}: {len(history)} checkpoints",
    )


def history_text(history: History) -> str:
    return text_table(
        _HISTORY_HEADERS,
        _history_rows(history),
        title=f"history of {history.run_id}: {len(history)} checkpoints",
    )


# -- waits ---------------------------------------------------------------------------------


def _wait_rows(w: WaitRecord) -> list[tuple[str, str]]:
    rows = [
        ("wait", f"{w.kind} at {w.node_id}"),
        ("run", f"{w.run_id}@{w.checkpoint_seq}"),
        ("prompt", w.prompt or "—"),
        ("details", short(w.details, 400) if w.details is not None else "—"),
        ("answer", "open" if w.resolution is None else short(w.resolution, 300)),
        ("owner", w.owner),
        ("parked", _when(w.created_at)),
    ]
    if w.resolved_at is not None:
        rows.append(("answered", _when(w.resolved_at)))
    return rows


def wait_html(w: WaitRecord) -> str:
    return key_value_html(_wait_rows(w), css="graphlab-wait")


def wait_text(w: WaitRecord) -> str:
    rows = _wait_rows(w)
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


# -- run records ---------------------------------------------------------------------------

_RUN_HEADERS = ("run", "graph", "status", "head", "started", "forked from")


def _run_record_row(r: RunRecord) -> tuple[str, ...]:
    parent = f"{r.parent_run_id}@{r.parent_seq}" if r.parent_run_id else ""
    return (
        r.run_id,
        f"{r.graph_key}@{r.revision}",
        _mark(r.status),
        str(r.head_seq),
        _when(r.created_at),
        parent,
    )


def run_record_html(r: RunRecord) -> str:
    return html_table(_RUN_HEADERS, [_run_record_row(r)])


_EVENT_HEADERS = ("seq", "kind", "node", "entered_seq", "checkpoint", "details")
"""`entered_seq`: the seq of the `entered` event a settlement or failure belongs to (the events'
`attempt` column); a failure's try number is `attempt` in its details (issue 25 item 6)."""


def _event_row(e: EventRecord) -> tuple[str, ...]:
    details = short(e.payload, 160) if e.payload else ""
    none = lambda v: "" if v is None else str(v)  # noqa: E731
    return (str(e.seq), e.kind, e.node_id or "", none(e.attempt), none(e.checkpoint_seq), details)


class EventList(list[EventRecord]):
    """`%lab events`: what was observed during a run, in order."""

    def __init__(self, events: Iterable[EventRecord], run_id: str):
        super().__init__(events)
        self.run_id = run_id

    def _repr_html_(self) -> str:
        return html_table(_EVENT_HEADERS, [_event_row(e) for e in self], title=f"events of {self.run_id}")

    def __repr__(self) -> str:
        return text_table(_EVENT_HEADERS, [_event_row(e) for e in self], title=f"events of {self.run_id}")


_STEP_HEADERS = ("station", "outcome", "checkpoint", "next", "output / error")


def _step_row(s: StepResult) -> tuple[str, ...]:
    extra = s.error or (short(s.output) if s.outcome == "done" else "")
    return (s.node_id or "—", s.outcome, "" if s.seq is None else str(s.seq), ", ".join(s.next) or "—", extra)


class StepList(list[StepResult]):
    """`%lab step N`: what each step did."""

    def __init__(self, steps: Iterable[StepResult], run: Run):
        super().__init__(steps)
        self.run_id = run.id
        self.status = run.status

    def _title(self) -> str:
        return f"{len(self)} step(s) of {self.run_id}; now {self.status}"

    def _repr_html_(self) -> str:
        return html_table(_STEP_HEADERS, [_step_row(s) for s in self], title=self._title())

    def __repr__(self) -> str:
        return text_table(_STEP_HEADERS, [_step_row(s) for s in self], title=self._title())


def _sql_cell(value: Any, sql_type: str) -> str:
    """One cell as JSON reads: a JSON column's text as it is, a list of JSON values (`JSON[]`, say
    `payload->'$.next[*]'` or `list(payload->'next')`) as one JSON array, not its items' text quoted
    again (issue 25 item 7: `["square"]`, not `["\\"square\\""]`)."""
    if value is None:
        return "NULL"
    if sql_type == "JSON[]" and isinstance(value, list):
        try:
            value = [None if v is None else json.loads(v) for v in value]
        except (TypeError, ValueError):
            pass  # not JSON text after all: shown as stored
    return short(value, 200)


class SqlResult:
    """`%%lab_sql`: the first rows of a query's result as a table; `.relation` is the DuckDB relation."""

    LIMIT = 200

    def __init__(self, relation: Any):
        self.relation = relation
        self.columns: list[str] = list(relation.columns)
        self.types: list[str] = [str(t) for t in relation.types]
        rows = relation.limit(self.LIMIT + 1).fetchall()
        self.truncated = len(rows) > self.LIMIT
        self.rows: list[tuple[Any, ...]] = [tuple(r) for r in rows[: self.LIMIT]]

    def _cells(self) -> list[tuple[str, ...]]:
        return [tuple(_sql_cell(v, t) for v, t in zip(r, self.types, strict=True)) for r in self.rows]

    def _note(self) -> str:
        return f"first {self.LIMIT} rows" if self.truncated else f"{len(self.rows)} row(s)"

    def _repr_html_(self) -> str:
        return html_table(self.columns, self._cells(), note=self._note())

    def __repr__(self) -> str:
        return text_table(self.columns, self._cells()) + f"\n({self._note()})"


HTML_FORMATTERS: dict[type, Callable[[Any], str]] = {
    Checkpoint: checkpoint_html,
    CheckpointRecord: checkpoint_html,
    History: history_html,
    RunRecord: run_record_html,
    WaitRecord: wait_html,
    Run: run_html,
    LabGraph: graph_html,
}
"""text/html formatters; Run and LabGraph only while they have no display of their own."""

TEXT_FORMATTERS: dict[type, Callable[[Any], str]] = {
    Checkpoint: checkpoint_text,
    CheckpointRecord: checkpoint_text,
    History: history_text,
    WaitRecord: wait_text,
}
"""text/plain formatters (IPython's pretty printer would print the raw dataclass)."""

FORMATTERS = HTML_FORMATTERS  # the name the first version exported
