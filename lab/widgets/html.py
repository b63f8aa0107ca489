"""HTML fragments of the run widget's panels: pure functions, every value escaped.

State, prompts, notes, details and node names are data from the run, never markup: they pass
through `html.escape` before they reach an `HTML` widget (which sets `innerHTML`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from html import escape
from typing import Any

from ..diff import StateDiff
from ..records import EventRecord

__all__ = ("CSS", "clip", "json_tree", "events_table", "diff_table", "alert", "wait_panel", "status_line")

CSS = """<style>
.gl-run .gl-panel{font:12px/1.45 var(--jp-code-font-family,monospace);max-height:22em;overflow:auto;
  border:1px solid var(--jp-border-color2,#ddd);border-radius:4px;padding:4px 6px;margin:2px 0}
.gl-run .gl-panel h4{margin:0 0 4px;font:600 12px var(--jp-ui-font-family,sans-serif)}
.gl-run .gl-tree ul{list-style:none;margin:0;padding-left:1.2em}
.gl-run .gl-tree summary{cursor:pointer}
.gl-run .gl-k{color:#1d4ed8}.gl-run .gl-s{color:#166534}.gl-run .gl-n{color:#9a3412}
.gl-run .gl-long>summary{display:inline}
.gl-run .gl-long pre{white-space:pre-wrap;word-break:break-all;margin:2px 0}
.gl-run table{border-collapse:collapse}.gl-run td,.gl-run th{padding:1px 6px;text-align:left;vertical-align:top}
.gl-run .gl-error{color:#9f1239;background:#fff1f2;border:1px solid #fecdd3;border-radius:4px;padding:4px 8px;margin:2px 0}
.gl-run .gl-info{color:#1e3a8a;background:#eff6ff;border:1px solid #bfdbfe;border-radius:4px;padding:4px 8px;margin:2px 0}
.gl-run tr.gl-ev-warning td{background:#fffbeb;color:#92400e}
.gl-run .gl-wait{background:#fffbeb;border:2px dotted #E69F00;border-radius:4px;padding:6px 8px}
.gl-run .gl-status{font:13px var(--jp-ui-font-family,sans-serif)}
.gl-run .gl-agent-msg{border-left:3px solid #d1d5db;padding-left:6px;margin:3px 0}
.gl-run .gl-agent-response{border-left-color:#60a5fa}.gl-run .gl-agent-call{color:#1d4ed8}
.gl-run .gl-job-lost{background:#fffbeb;border:2px dotted #b45309;border-radius:4px;padding:6px 8px}
</style>"""

LONG = 80
"""Strings longer than this are truncated, with a disclosure to show all of it."""
MAX_ITEMS = 200


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        if len(value) <= LONG:
            return f'<span class="gl-s">{escape(json.dumps(value, ensure_ascii=False))}</span>'
        head = escape(json.dumps(value[:LONG], ensure_ascii=False)[:-1]) + "…&quot;"
        return (
            f'<details class="gl-long"><summary><span class="gl-s">{head}</span> '
            f"<i>({len(value)} chars, show all)</i></summary><pre>{escape(value)}</pre></details>"
        )
    return f'<span class="gl-n">{escape(json.dumps(value, default=str))}</span>'


def json_tree(value: Any, *, open_depth: int = 2, _depth: int = 0) -> str:
    """A collapsible tree of a JSON value: objects and arrays fold, long strings expand on click."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = list(value.items())
        rows = [
            f'<li><span class="gl-k">{escape(str(k))}</span>: {json_tree(v, open_depth=open_depth, _depth=_depth + 1)}</li>'
            for k, v in items[:MAX_ITEMS]
        ]
        summary = f"{{…}} {len(value)} key{'s' if len(value) != 1 else ''}"
    elif isinstance(value, list):
        if not value:
            return "[]"
        rows = [
            f"<li>{json_tree(v, open_depth=open_depth, _depth=_depth + 1)}</li>" for v in value[:MAX_ITEMS]
        ]
        summary = f"[…] {len(value)} item{'s' if len(value) != 1 else ''}"
        items = value
    else:
        return _scalar(value)
    if len(items) > MAX_ITEMS:
        rows.append(f"<li><i>… {len(items) - MAX_ITEMS} more</i></li>")
    opened = " open" if _depth < open_depth else ""
    tree = f"<details{opened}><summary>{summary}</summary><ul>{''.join(rows)}</ul></details>"
    return f'<div class="gl-tree">{tree}</div>' if _depth == 0 else tree


def clip(text: str, limit: int = 140) -> str:
    """`text` cut to `limit` characters, ending in "…" when it was longer."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _event_summary(ev: EventRecord) -> str:
    p = ev.payload or {}
    kind = ev.kind
    if kind == "settled":
        return f"→ {', '.join(p.get('next') or []) or 'End'} ({p.get('ms', '?')} ms)"
    if kind == "verdict":
        if "approved" in p:
            word = "approved" if p.get("approved") else "denied"
            return word + (f" · note: {p['note']}" if p.get("note") else "")
        return json.dumps({k: v for k, v in p.items() if k not in ("owner", "kind")}, default=str)
    if kind == "waiting":
        return f"{p.get('kind', '')}: {_question(p.get('prompt'), p.get('details'))}"
    if kind == "warning":
        return f"⚠ {p.get('message', '')}"
    if kind == "failed":
        return f"{p.get('type', '')}: {p.get('message', '')}"
    if kind == "rewind":
        return f"head {p.get('from')} → {p.get('to')}"
    if kind == "fork":
        return (
            f"child {p['child_run']}"
            if "child_run" in p
            else f"from {p.get('parent_run')}@{p.get('parent_seq')}"
        )
    if kind == "done":
        return f"output {json.dumps(p.get('output'), default=str)}"
    if kind == "started":
        return f"entry {p.get('entry', '')}"
    return _control_summary(kind, p)


def _question(prompt: Any, details: Any) -> str:
    """What a wait asks: its prompt; else an `interrupt()`'s question, kept under `details` (its
    `prompt` or `question` when a dict says one, else the details as JSON)."""
    if prompt:
        return str(prompt)
    if isinstance(details, dict):
        for key in ("prompt", "question"):
            if isinstance(details.get(key), str) and details[key]:
                return details[key]
    if isinstance(details, str):
        return details
    return "" if details is None else json.dumps(details, ensure_ascii=False, default=str)


def _control_summary(kind: str, p: dict[str, Any]) -> str:
    """Run-control events (docs/run-control.md): a retry policy's failed try, progress, a subgraph's child,
    a recorded call (live, or replayed with the tokens it saved)."""
    if kind == "retry":
        if p.get("by") != "policy":
            return "attempted again (run.retry())"
        err = p.get("error") or {}
        return f"try {p.get('try')} of {p.get('of')} failed: {err.get('type', '')}: {err.get('message', '')} · tried again"
    if kind == "progress":
        extra = f" {json.dumps(p['details'], default=str)}" if p.get("details") else ""
        return f"progress {json.dumps(p.get('value'), default=str)}{extra}"
    if kind == "subgraph":
        return f"child run {p.get('child_run')} of {p.get('child_graph')}"
    if kind == "recorded":  # a recorded call (docs/replay.md)
        what = f"{p.get('kind', 'call')} {p.get('name', '')} #{p.get('index', '')}"
        if p.get("mode") == "replayed":
            return f"↺ replayed {what} · {p.get('saved_tokens', 0)} tokens saved"
        return f"● live {what} · {p.get('tokens', 0)} tokens"
    return ""


def events_table(events: Iterable[EventRecord], *, total: int | None = None) -> str:
    """The event log, newest first: seq, time, kind, station and a one-line summary."""
    evs = list(events)
    rows = "".join(
        f'<tr class="gl-ev gl-ev-{escape(ev.kind)}"><td>{ev.seq}</td><td>{escape(ev.created_at.strftime("%H:%M:%S"))}</td>'
        f"<td><b>{escape(ev.kind)}</b></td><td>{escape(ev.node_id or '')}</td>"
        f"<td>{escape(clip(_event_summary(ev)))}</td></tr>"
        for ev in reversed(evs)
    )
    more = f" (last {len(evs)} of {total})" if total is not None and total > len(evs) else ""
    return f'<div class="gl-panel gl-events"><h4>Events{more}</h4><table>{rows}</table></div>'


def diff_table(diff: StateDiff | None, *, title: str) -> str:
    """The selected checkpoint's state against its parent's."""
    if diff is None:
        body = "<i>the first checkpoint of the branch: nothing to compare</i>"
    elif not diff.changes:
        body = "<i>no differences</i>"
    else:
        body = (
            "<table><tr><th>field</th><th></th><th>before</th><th>after</th></tr>"
            + "".join(
                f"<tr><td><code>{escape(c.path)}</code></td><td>{escape(c.kind)}</td>"
                f"<td>{json_tree(c.old) if c.kind != 'added' else ''}</td>"
                f"<td>{json_tree(c.new) if c.kind != 'removed' else ''}</td></tr>"
                for c in diff.changes
            )
            + "</table>"
        )
    return f'<div class="gl-panel gl-diff"><h4>{escape(title)}</h4>{body}</div>'


def alert(kind: str, title: str, message: str = "", *, detail: str = "") -> str:
    """An error or info box; `detail` (a traceback) folds away."""
    more = f"<details><summary>details</summary><pre>{escape(detail)}</pre></details>" if detail else ""
    return f'<div class="gl-{escape(kind)}"><b>{escape(title)}</b> {escape(message)}{more}</div>'


def wait_panel(kind: str, node_id: str, prompt: str | None, details: Any) -> str:
    """What the run waits for: the gate's prompt and details."""
    what = {
        "consent": "waits for your verdict",
        "interrupt": "asks for an answer",
        "capability": "needs a capability",
        "breakpoint": "stopped at a breakpoint",
    }.get(kind, "waits")
    body = f'<div class="gl-prompt"><b>{escape(prompt)}</b></div>' if prompt else ""
    if details is not None:
        body += f'<div class="gl-details">{json_tree(details)}</div>'
    return f'<div class="gl-wait"><div>‖ <b>{escape(node_id)}</b> {escape(what)}</div>{body}</div>'


def status_line(
    run_id: str,
    graph: str,
    revision: int,
    status: str,
    head: Any,
    nxt: Iterable[str],
    note: str = "",
    *,
    label: str | None = None,
    bounds: str = "",
) -> str:
    """The widget's header; `label` is the status in words (`paused` for an idle `running` run);
    `bounds` the run's step limit and timeout."""
    marks = {
        "created": "○",
        "running": "▶",
        "paused": "❚❚",
        "waiting": "‖",
        "queued": "→",
        "done": "✔",
        "failed": "✖",
        "cancelled": "⊘",
        "interrupted": "⚠",
        "lab closed": "⏏",
    }
    word = label or status
    nexts = ", ".join(nxt) or "End"  # the timeline's word for a checkpoint with nothing after it
    extra = f" · {escape(note)}" if note else ""
    return (
        f'{CSS}<div class="gl-status"><b>{escape(graph)}@{revision}</b> · <code>{escape(run_id)}</code> · '
        f'<span class="gl-run-status" data-status="{escape(status)}" data-label="{escape(word)}">'
        f"{marks.get(word, '')} {escape(word)}</span>"
        f" · head {escape(str(head))} · next {escape(nexts)}"
        + (f' · <span class="gl-bounds">{escape(bounds)}</span>' if bounds else "")
        + f"{extra}</div>"
    )
