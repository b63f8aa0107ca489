"""Which of the run view's actions are possible now, and why not: each button's tooltip.

Pure functions of the run (and of what the view is doing): a disabled button always says why.
"""

from __future__ import annotations

from typing import Any

from .consent_panel import choices_of

__all__ = ("TIPS", "why_not")

TIPS = {
    "step": "run the next station",
    "run": "run until End, a failure, a wait, or Pause",
    "pause": "stop the Run at the next boundary",
    "cancel": "cancel the run (a station in flight is cancelled)",
    "retry": "attempt the failed station again",
    "rewind": "make the selected checkpoint the head; the next step starts a new branch",
    "fork": "start a new run from the selected checkpoint",
}
"""What each button does, its tooltip when it is possible."""


def why_not(run: Any, action: str, *, busy_with: str | None, selected: int | None) -> str | None:
    """Why `action` is not possible on `run` now, or None when it is. `busy_with` names the action
    the view has in progress (None: nothing); `selected` is the checkpoint the timeline points at."""
    status = run.status
    if run.writer is not None and action not in ("fork",):
        return f"{run.writer} advances this run; {action} it there (this view follows it and can answer its wait)"
    if action == "pause":
        return None if busy_with else "nothing is running from this view; Pause stops a Run at the next boundary"
    if busy_with:
        return f"{busy_with} is in progress; press Pause (or Cancel) first"
    if action == "cancel":
        return f"the run is {status}; there is nothing to cancel" if status in ("done", "cancelled") else None
    if action == "retry":
        return None if status == "failed" else "nothing failed; Retry attempts a failed station again"
    if action in ("rewind", "fork"):
        if selected is None:
            return "no checkpoint is selected"
        if action == "rewind" and selected == run.head:
            return "this checkpoint is already the head; move the timeline back to rewind"
        return None
    return _why_not_advance(run)


def _why_not_advance(run: Any) -> str | None:
    """Why Step / Run cannot go on from the head now."""
    status = run.status
    if status == "done":
        return "the run is done; pick a checkpoint on the timeline and Rewind or Fork there"
    if status == "cancelled":
        return "the run was cancelled; Fork a checkpoint to run again"
    if status == "failed":
        return f"station {(run.error or {}).get('node_id')} failed; press Retry to attempt it again"
    if status == "interrupted":
        return f"the process stopped while a station ran; lab.resume({run.id!r}) runs it again"
    wait = getattr(run, "wait", None)
    if status == "waiting" and wait is not None and wait.kind == "delegate":
        job = run.job
        if job is not None and job.status == "LOST":
            return f"{wait.node_id}'s agent job is LOST: Retry job, Cancel job or Provide result below"
        return None  # Step / Run await the agent's job, then route its result
    if status == "waiting" and wait is not None and wait.kind != "breakpoint":
        if choices_of(wait):
            return f"{wait.node_id} waits for a choice: pick one below"
        what = {
            "consent": "a verdict: Approve or Deny below",
            "interrupt": "an answer: answer below",
            "capability": "a capability: grant it below",
        }
        return f"{wait.node_id} waits for {what.get(wait.kind, wait.kind)}"
    return None
