"""One self-contained HTML page from plain data: pure functions, no store, no kernel, no network.

`page_html(title, runs, drawings, comparison=...)` writes the whole file: a Content-Security-Policy
that allows no network at all and runs only the page's own script (by its SHA-256), the style,
one section per run (its drawing inline, empty panels the script fills), the comparison as
escaped HTML (`comparison_html`, which the compare widget shows too), the data as a JSON block
with `<`, `>` and `&` escaped (no value can close the block), and the script.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from html import escape
from typing import Any

import orjson

from .page_script import SCRIPT, STYLE

__all__ = (
    "page_html", "page_data", "json_block", "comparison_html", "csp", "COMPARISON_STYLE", "EVENT_COLUMNS", "JsonRows",
)  # fmt: skip

EVENT_COLUMNS = ("seq", "kind", "node", "attempt", "cp", "payload", "at")
"""An event's keys in the order the page's data block stores them (the store's rows,
`records.EVENT_ROW`, in the same order): each event is written as a row of values,
`{"columns": EVENT_COLUMNS, "rows": [[...], ...]}`, not as an object repeating its seven keys (a
long parallel run has ~9 events a step); the page's script rebuilds the objects once, when it loads."""



@dataclass(frozen=True, slots=True)
class JsonRows:
    """Rows already written as one JSON array text (a run's events as the store built them,
    `StoredRun.event_rows_json`): the page's data block embeds the text as it is, so a long run's
    events are neither decoded into objects nor encoded again."""

    text: str


_JSON_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


_ORJSON_AS_JSON = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
"""Dates and dataclasses go to `str` as `json.dumps(default=str)` writes them, not orjson's own way."""


def _orjson_default(value: Any) -> Any:
    return orjson.Fragment(value.text) if isinstance(value, JsonRows) else str(value)


def _json_default(value: Any) -> Any:
    return json.loads(value.text) if isinstance(value, JsonRows) else str(value)


def json_block(data: Any) -> str:
    """JSON for a `<script type="application/json">` block: no `</script>` or `<!--` can appear in it.

    Written by orjson (compiled: a tenth of `json.dumps`'s time on a long run's page); a value it
    refuses (an int past 64 bits, a lone surrogate, a key that is not a string) writes the whole
    block with `json.dumps` instead, as before. Both read back the same values."""
    try:
        text = orjson.dumps(data, default=_orjson_default, option=_ORJSON_AS_JSON).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=_json_default)
    for bad, escaped in _JSON_ESCAPES:  # str.replace per character: far faster than str.translate
        if bad in text:
            text = text.replace(bad, escaped)
    return text


def _packed(run: dict[str, Any]) -> dict[str, Any]:
    events = run.get("events")
    if isinstance(events, JsonRows):  # the store's rows, in EVENT_COLUMNS' order already
        return {**run, "events": {"columns": list(EVENT_COLUMNS), "rows": events}}
    if not isinstance(events, list):
        return run
    rows = [[e.get(k) for k in EVENT_COLUMNS] for e in events]
    return {**run, "events": {"columns": list(EVENT_COLUMNS), "rows": rows}}


def page_data(html: str) -> dict[str, Any]:
    """The data block of a page `page_html` wrote, as `collect` made it (events as objects again)."""
    start = html.index('id="gl-data">') + len('id="gl-data">')
    data = json.loads(html[start : html.index("</script>", start)])
    for run in data.get("runs", []):
        events = run.get("events")
        if isinstance(events, dict):
            run["events"] = [dict(zip(events["columns"], row, strict=True)) for row in events["rows"]]
    return data


def csp(script: str = SCRIPT) -> str:
    """No fetch of any kind; only the page's own script runs; inline styles (the SVG's) apply."""
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


def _run_section(index: int, run: dict[str, Any], drawing: str) -> str:
    title = f"Run {escape(run['id'])}"
    body = (
        f'<div class="gl-head"></div>'
        f'<div class="gl-timeline"><button class="gl-prev" title="previous checkpoint">◀</button>'
        f'<input class="gl-scrub" type="range" aria-label="checkpoint of run {escape(run["id"])}">'
        f'<button class="gl-next" title="next checkpoint">▶</button>'
        f'<label class="gl-branch-pick" hidden>branch <select class="gl-branch" aria-label="branch of run {escape(run["id"])}">'
        f"</select></label></div>"
        f'<p class="gl-selected gl-label"></p>'
        f'<div class="gl-cols"><div class="gl-drawing">{drawing}</div>'
        f'<div class="gl-side"><div class="gl-state"></div><div class="gl-diff"></div></div></div>'
        f'<div class="gl-waits"></div><div class="gl-calls"></div><div class="gl-children"></div>'
        f'<h3>Event log</h3><label><input type="checkbox" class="gl-events-all"> every event of the run</label>'
        f'<div class="gl-events"></div>'
    )
    attrs = f'id="run-{escape(run["id"])}" class="gl-run" data-run-index="{index}"'
    if run.get("child_of"):
        return f"<details {attrs}><summary>Subgraph child: {title} ({escape(run['graph'])})</summary>{body}</details>"
    return f"<section {attrs}><h2>{title}</h2>{body}</section>"


def _code(value: Any, limit: int = 2000) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=1, default=str)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f'<code class="gl-json">{escape(text)}</code>'


def _where(side: dict[str, Any] | None) -> str:
    if side is None:
        return '<span class="gl-note">(no checkpoint)</span>'
    station = f" · {escape(side['station'])}" if side.get("station") else ""
    if "frontier" in side:  # a super-step: what it settled, then its frontier
        station = f" · settled {escape(side['station'] or 'nothing')} · next {escape(side['frontier'])}"
    return f"{escape(side['run'])}@{side['seq']}{station} · {escape(side['status'])}"


def _first(side: str, first: dict[str, Any] | None) -> str:
    if first is None:
        return f"<p><b>{side}</b>: no station settled after the divergence</p>"
    where = f"(run {escape(first['run'])}, checkpoint {first['from_seq']} → {first['seq']})"
    if "tasks" in first:  # a super-step: each task it settled, with its inputs
        tasks = "".join(
            f"<li><b>{escape(t['node'])}</b> (task {escape(str(t['task']))}): {_code(t['fields'])}</li>"
            for t in first["tasks"]
        )
        return (
            f"<p><b>{side}</b>: super-step settling <b>{escape(first['station'])}</b> {where}</p>"
            f"<p>its tasks' inputs (node fields):</p><ul>{tasks}</ul>"
            f"<p>the state they started from:</p>{_code(first['state_before'])}"
        )
    return (
        f"<p><b>{side}</b>: station <b>{escape(first['station'])}</b> {where}</p>"
        f"<p>its node fields:</p>{_code(first['fields'])}<p>the state it started from:</p>{_code(first['state_before'])}"
        f"{_calls(first.get('calls') or [])}"
    )


def _calls(calls: list[dict[str, Any]]) -> str:
    """A station's recorded calls (collect.call_data rows): live or replayed, tokens and tokens saved."""
    if not calls:
        return '<p class="gl-note">its recorded calls: none</p>'
    rows = "".join(
        f'<tr class="gl-call-{escape(c["mode"])}"><td>{_entered(c["attempt"])}</td>'
        f"<td>{escape(c['kind'])} {escape(c['name'])} #{c['index']}</td>"
        f"<td>{'↺ replayed' if c['mode'] == 'replayed' else '● live'}</td>"
        f"<td>{c['tokens']}</td><td>{c['saved_tokens']}</td></tr>"
        for c in calls
    )
    return (
        f'<p>its recorded calls ({len(calls)}):</p><table class="gl-calls-first"><tr><th>entered</th><th>call</th>'
        f"<th>mode</th><th>tokens</th><th>tokens saved</th></tr>{rows}</table>"
    )


def _entered(attempt: object) -> str:
    """The station try a call belongs to, as the event log numbers it: its `entered` event (not a try count)."""
    return "-" if attempt is None else f"event {escape(str(attempt))}"


COMPARISON_STYLE = """
.gl-comparison .gl-cols{display:flex;gap:16px;flex-wrap:wrap;align-items:flex-start}
.gl-comparison .gl-drawing{flex:0 1 420px;min-width:240px;overflow:auto}
.gl-comparison .gl-side{flex:1 1 420px;min-width:300px}
.gl-comparison .gl-legend span{display:inline-block;margin-right:14px}
.gl-comparison .gl-swatch{display:inline-block;width:22px;height:0;border-top:3px solid;vertical-align:middle;margin-right:4px}
.gl-comparison table{border-collapse:collapse;margin:4px 0}
.gl-comparison th,.gl-comparison td{border:1px solid #e5e5e5;padding:3px 6px;text-align:left;vertical-align:top}
.gl-comparison .gl-note{color:#666;font-style:italic}
.gl-comparison .gl-json{white-space:pre-wrap;word-break:break-all}
""".strip()
"""The comparison's own layout (legend, columns, table): the page's style has it; the widget adds it."""


def comparison_html(data: dict[str, Any], drawing: str, *, styled: bool = False) -> str:
    """A comparison (`Comparison.to_json()`) as escaped HTML: legend, drawing, first station, table.

    `styled` puts `COMPARISON_STYLE` in (the widget's output has no page style around it)."""
    a, b = data["a"], data["b"]
    legend = (
        '<p class="gl-legend"><span><i class="gl-swatch" style="border-color:#0072B2"></i>A (solid): '
        f"{escape(a['label'])}</span>"
        '<span><i class="gl-swatch" style="border-color:#009E73;border-top-style:dashed"></i>B (dashed): '
        f"{escape(b['label'])}</span>"
        '<span><i class="gl-swatch" style="border-color:#9ca3af"></i>grey fill: both (shared prefix)</span>'
        '<span><i class="gl-swatch" style="border-color:#E69F00"></i>◆ where they diverged</span></p>'
    )
    same = data["shared"] >= max(a["length"], b["length"])
    summary = (
        f"<p>The two branches are the same ({data['shared']} checkpoints).</p>"
        if same
        else f"<p>{data['shared']} aligned checkpoints shared; they diverge at position {data['shared']} "
        f"(A has {a['length']}, B has {b['length']}).</p>"
    )
    rows = []
    for r in data["rows"]:
        changes = r["changes"]
        if changes is None:
            cell = '<span class="gl-note">only one side has a checkpoint here</span>'
        elif not changes:
            cell = '<span class="gl-note">same state</span>'
        else:
            cell = "<br>".join(
                f'<span class="gl-{escape(c["kind"])}"><code>{escape(c["path"])}</code> {escape(c["kind"])}: '
                f"{'' if c['kind'] == 'added' else escape(_short(c['old']))} → "
                f"{'' if c['kind'] == 'removed' else escape(_short(c['new']))}</span>"
                for c in changes[:50]
            ) + (f'<br><span class="gl-note">… {len(changes) - 50} more</span>' if len(changes) > 50 else "")
        rows.append(
            f"<tr><td>{r['index']}</td><td>{_where(r['a'])}</td><td>{_where(r['b'])}</td><td>{cell}</td></tr>"
        )
    more = data["total_rows"] - len(data["rows"])
    tail = f'<p class="gl-note">… {more} more aligned checkpoints not shown</p>' if more > 0 else ""
    first = data["first"]
    return (
        (f"<style>{COMPARISON_STYLE}</style>" if styled else "")
        + f'<div class="gl-comparison">{legend}{summary}'
        f'<div class="gl-cols"><div class="gl-drawing">{drawing}</div><div class="gl-side">'
        f"<h3>First differing station</h3>{_first('A', first['a'])}{_first('B', first['b'])}</div></div>"
        "<h3>State differences at aligned checkpoints</h3>"
        "<table><tr><th>position</th><th>A</th><th>B</th><th>state differences (A → B)</th></tr>"
        f"{''.join(rows)}</table>{tail}</div>"
    )


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def page_html(
    title: str,
    runs: list[dict[str, Any]],
    drawings: dict[str, str],
    *,
    comparison: tuple[dict[str, Any], str] | None = None,
) -> str:
    """The whole page. `runs` and `drawings` come from `collect`; `comparison` is (data, its drawing)."""
    sections = "".join(_run_section(i, run, drawings.get(run["drawing"], "")) for i, run in enumerate(runs))
    compared = ""
    if comparison is not None:
        compared = f'<section class="gl-compare"><h2>Comparison</h2>{comparison_html(*comparison)}</section>'
    data = {"version": 3, "title": title, "runs": [_packed(run) for run in runs]}
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(csp(), quote=False)}">'
        f'<meta name="generator" content="Graph Lab export"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head><body>"
        f'<h1>{escape(title)}</h1><p class="gl-sub">Exported by Graph Lab: one file, no kernel, no network. '
        "Drag the timeline (or use ◀ ▶) to see each checkpoint.</p>"
        f"{compared}{sections}"
        f'<script type="application/json" id="gl-data">{json_block(data)}</script>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )
