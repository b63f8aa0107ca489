"""The run view's agent panel: a delegated station's job, its messages as they arrive, tokens, and
Retry / Cancel / Provide result when the job is LOST.

It reads the job through `run.job` (an `lab.agents.AgentJob`); the run widget redraws it when the
board reports a change of the job (`lab.agents.on_change`).
"""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from . import html as H

if TYPE_CHECKING:
    from .run_widget import RunWidget

__all__ = ("AgentJobView", "job_html")

_SHOWN = 40
"""Messages shown (the latest); the job keeps all of them (`run.job.messages()`)."""
_BADGE = {
    "SUCCEEDED": "#166534", "FAILED": "#9f1239", "CANCELLED": "#6b7280", "TIMED_OUT": "#9a3412",
    "LOST": "#b45309", "RUNNING": "#1d4ed8", "CANCELLING": "#6b7280",
}  # fmt: skip


def _part_html(part: dict[str, Any]) -> str:
    kind = part.get("kind", "")
    if kind == "tool-call":
        args = json.dumps(part.get("args"), ensure_ascii=False, default=str)
        return f'<div class="gl-agent-call">→ <b>{escape(str(part.get("tool")))}</b>({escape(H.clip(args, 300))})</div>'
    if kind == "tool-return":
        content = part.get("content")
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        return f'<div class="gl-agent-return">← {escape(str(part.get("tool")))}: {escape(H.clip(text, 300))}</div>'
    content = part.get("content")
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    return f'<div class="gl-agent-{escape(kind)}"><i>{escape(kind)}</i> {escape(H.clip(text, 600))}</div>'


def job_html(job: Any) -> str:
    """The job's head line (id, runtime, status, tokens) and its latest messages, escaped."""
    rec = job.record
    usage = job.usage
    tokens = usage.get("total_tokens")
    color = _BADGE.get(rec.status, "#374151")
    head = (
        f'<div class="gl-agent-head">agent job <code>{escape(rec.request_id)}</code> · runtime '
        f"<b>{escape(rec.runtime)}</b> ({escape(rec.runner)}) · "
        f'<span class="gl-job-status" data-status="{escape(rec.status)}" style="color:{color};font-weight:600">'
        f"{escape(rec.status)}</span>"
        + (f' · <span class="gl-job-tokens">{int(tokens)} tokens</span>' if tokens else "")
        + (f" · {int(usage.get('requests', 0))} requests" if usage.get("requests") else "")
        + "</div>"
    )
    if rec.error and rec.status != "SUCCEEDED":
        head += f'<div class="gl-error">{escape(str(rec.error.get("message", "")))}</div>'
    messages = job.messages()[-_SHOWN:]
    body = "".join(
        f'<div class="gl-agent-msg gl-agent-{escape(m.get("role", ""))}">' + "".join(_part_html(p) for p in m.get("parts", [])) + "</div>"
        for m in messages
    )
    return f'<div class="gl-panel gl-agent">{head}{body or "<i>no messages yet</i>"}</div>'


class AgentJobView(widgets.VBox):
    """The agent panel of one run view (hidden while the run has no delegated job)."""

    def __init__(self, owner: RunWidget):
        super().__init__()
        self.add_class("gl-agent-view")
        self._owner = owner
        self.info = widgets.HTML()
        self.result = widgets.Textarea(
            placeholder="the result, as JSON (it is checked against the station's result type)",
            layout=widgets.Layout(width="100%", height="4em"),
        )
        self.result.add_class("gl-job-result")
        self.retry_btn = self._button("Retry job", "gl-job-retry", "redo", "warning")
        self.cancel_btn = self._button("Cancel job", "gl-job-cancel", "stop", "")
        self.provide_btn = self._button("Provide result", "gl-job-provide", "check", "info")
        self.retry_btn.tooltip = "submit the request again as a new job (a new request id)"
        self.cancel_btn.tooltip = "record the job cancelled; the station fails, naming CANCELLED"
        self.provide_btn.tooltip = "answer the station with the result typed above; the job stays LOST"
        self.retry_btn.on_click(lambda _b: self._do("Retry job", lambda job: job.retry()))
        self.cancel_btn.on_click(lambda _b: self._do("Cancel job", lambda job: job.cancel()))
        self.provide_btn.on_click(lambda _b: self._do("Provide result", self._provide))
        self.lost = widgets.VBox(
            [widgets.HTML("<b>The agent's runner died: what it did is unknown, so nothing is submitted again "
                          "on its own.</b> Choose:"),  # fmt: skip
             widgets.HBox([self.retry_btn, self.cancel_btn, self.provide_btn]), self.result]
        )
        self.lost.add_class("gl-job-lost")
        self.children = [self.info, self.lost]
        self.layout.display = "none"

    @staticmethod
    def _button(label: str, cls: str, icon: str, style: str) -> widgets.Button:
        b = widgets.Button(description=label, icon=icon, button_style=style, layout=widgets.Layout(width="auto"))
        b.add_class(cls)
        return b

    def show(self, run: Any) -> None:
        job = run.job
        if job is None:
            self.layout.display = "none"
            return
        self.layout.display = None
        self.info.value = job_html(job)
        wait = run.wait
        lost = job.status == "LOST" and wait is not None and wait.kind == "delegate" and wait.resolution is None
        self.lost.layout.display = None if lost else "none"
        busy = self._owner.busy
        for b in (self.retry_btn, self.cancel_btn, self.provide_btn):
            b.disabled = busy

    def _provide(self, job: Any) -> Any:
        text = self.result.value.strip()
        if not text:
            raise ValueError("type the result as JSON first (say {\"title\": \"...\"})")
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"the result is not JSON ({exc}); type it as JSON") from None
        out = job.provide(value, note="provided in the run view")
        self.result.value = ""
        return out

    def _do(self, name: str, act: Any) -> None:
        """A job action, then the run goes on (the station routes, fails, or awaits the new job)."""
        owner = self._owner
        run = owner.run
        job = run.job
        try:
            if job is None:
                raise ValueError("the run has no agent job")
            act(job)
        except Exception as exc:
            owner.set_alert(H.alert("error", f"{name} failed:", f"{type(exc).__name__}: {exc}"))
            return
        owner.start_action("Run", lambda: run.arun())
