"""HTML summaries of lab objects for the notebook. Every value is escaped."""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import Any

from lab import LabGraph, Run

__all__ = ("FORMATTERS", "run_html", "graph_html")

_STATUS_MARK = {
    "created": "○",
    "running": "▶",
    "waiting": "⏸",
    "done": "✔",
    "failed": "✖",
    "cancelled": "⊘",
    "interrupted": "⚠",
}


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def run_html(run: Run) -> str:
    """A compact run card: graph revision, status, head, next stations, state and output."""
    mark = _STATUS_MARK.get(run.status, "")
    rows = [
        ("run", run.id),
        ("graph", f"{run.graph.name}@{run.revision}"),
        ("status", f"{mark} {run.status}"),
        ("head", str(run.head)),
        ("next", ", ".join(run.next_stations) or "—"),
        ("state", _short(run._state_json)),
    ]
    if run.status == "done":
        rows.append(("output", _short(run._output_json)))
    if run.error:
        rows.append(("error", f"{run.error.get('type')}: {run.error.get('message')}"))
    body = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{escape(k)}</th><td><code>{escape(v)}</code></td></tr>"
        for k, v in rows
    )
    return f"<table class='graphlab-run'>{body}</table>"


def graph_html(graph: LabGraph) -> str:
    """The declared stations and their permitted successors."""
    try:
        m = graph.manifest
        rows = "".join(
            f"<tr><td><code>{escape(s.node_id)}</code></td><td>{escape(', '.join(m.successors(s.node_id)) or '—')}</td></tr>"
            for s in m.stations
        )
        head = f"{escape(graph.name)}@{m.revision}"
    except Exception as exc:  # a graph mid-declaration still displays, with what is missing
        rows = "".join(f"<tr><td><code>{escape(n)}</code></td><td>?</td></tr>" for n in graph.nodes)
        head = f"{escape(graph.name)} (not buildable yet: {escape(str(exc))})"
    return f"<div><b>{head}</b><table><tr><th>station</th><th>may go to</th></tr>{rows}</table></div>"


FORMATTERS: dict[type, Callable[[Any], str]] = {Run: run_html, LabGraph: graph_html}
