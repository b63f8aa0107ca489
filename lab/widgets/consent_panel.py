"""The run view's answer panels: Approve / Deny with a note, a workflow checkpoint's choices, and
the Answer / Grant box for an `interrupt()` or a capability.

A panel never lies about what it can do (issue 25 items 1 and 2):
- its buttons disable in the click handler, before any work, so a double-click or a stray Enter
  on the focused button sends nothing more; a late click for a wait this panel already answered
  does nothing and shows no failure, and the outcome is reported once;
- a wait answered elsewhere (another cell, view, process or kernel) is said so ("answered
  elsewhere: now queued"), and a click that lands on a wait that moved on says that, not a
  failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..errors import WaitAnsweredError, WaitError, WaitOwnerError
from . import html as H

if TYPE_CHECKING:
    from .run_widget import RunWidget

__all__ = ("AnswerPanel", "choices_of", "make_button")


def make_button(label: str, cls: str, icon: str = "", style: str = "") -> widgets.Button:
    b = widgets.Button(description=label, icon=icon, button_style=style, layout=widgets.Layout(width="auto"))
    b.add_class(cls)
    return b


class AnswerPanel:
    """The consent panel (`consent`) and the asking panel (`asking`) of one run view."""

    def __init__(self, view: RunWidget):
        self._view = view
        self.shown_owner: str | None = None
        """The wait this panel shows: an answer from it names that wait, so a stale view cannot
        answer a newer wait (seed 001 "single current wait owner")."""
        self.sent: str | None = None
        """The wait this panel answered: its buttons stay disabled for it, a late click is ignored."""
        self.elsewhere: str | None = None
        """The wait this panel showed that was answered elsewhere (not from this panel)."""
        self._choices_key: tuple[Any, ...] | None = None

        self.wait_info = widgets.HTML()
        self.note = widgets.Textarea(
            placeholder="note (optional): why you approve or deny",
            layout=widgets.Layout(width="100%", height="3.5em"),
        )
        self.note.add_class("gl-note")
        self.approve_btn = make_button("Approve", "gl-approve", "check", "success")
        self.deny_btn = make_button("Deny", "gl-deny", "times", "danger")
        self.approve_btn.on_click(lambda _b: self._verdict(True))
        self.deny_btn.on_click(lambda _b: self._verdict(False))
        self.answer = widgets.Text(placeholder="answer (JSON, or plain text)", layout=widgets.Layout(width="60%"))
        self.answer_btn = make_button("Answer", "gl-answer", "reply")
        self.answer_btn.on_click(lambda _b: self._answer())
        self.verdicts = widgets.HBox([self.approve_btn, self.deny_btn])
        self.choices = widgets.HBox(layout=widgets.Layout(flex_flow="row wrap"))
        """A workflow checkpoint's choices, one button each (the wait's details list them)."""
        self.choices.add_class("gl-choices")
        self.consent = widgets.VBox([self.wait_info, self.note, self.verdicts, self.choices])
        self.consent.add_class("gl-consent")
        self.asking = widgets.VBox([widgets.HTML(), widgets.HBox([self.answer, self.answer_btn])])
        self.asking.add_class("gl-asking")

    @property
    def buttons(self) -> tuple[widgets.Button, ...]:
        return (self.approve_btn, self.deny_btn, self.answer_btn, *self.choices.children)  # type: ignore[return-value]

    # -- drawing ---------------------------------------------------------------------------

    def show(self, run: Any) -> None:
        """Show what the run waits for now; note a shown wait that was answered elsewhere."""
        wait = getattr(run, "wait", None)
        waiting = wait is not None and run.status == "waiting"
        choices = choices_of(wait) if waiting else []
        consent = waiting and (wait.kind == "consent" or bool(choices))
        asking = waiting and wait.kind in ("interrupt", "capability") and not choices
        # only a wait this panel offers to answer (not a breakpoint or an agent job, which the
        # view's own Step / Run continue) can be "answered elsewhere"
        owner = wait.owner if consent or asking else None
        before = self.shown_owner
        if before is not None and before != owner and before != self.sent and _answered(run, before):
            self.elsewhere = before  # answered, and not from here (a rewind or a cancel is no answer)
        if owner is not None and owner != before:
            self.elsewhere = None  # a new wait to answer: the old news is over
        self.shown_owner = owner
        if waiting:
            html = H.wait_panel(wait.kind, wait.node_id, wait.prompt, wait.details)
            self.wait_info.value = html
            self.asking.children[0].value = html  # type: ignore[attr-defined]
            granting = wait.kind == "capability"
            self.answer_btn.description = "Grant" if granting else "Answer"
            self.answer.placeholder = (
                "value to hand the node (JSON, or plain text; empty for none)"
                if granting
                else "answer (JSON, or plain text)"
            )
        self._show_choices(choices, owner)
        self.consent.layout.display = None if consent else "none"
        self.asking.layout.display = None if asking else "none"

    def elsewhere_alert(self, status_label: str) -> str:
        """The view's note that the wait it showed was answered elsewhere, with the run's status now."""
        if self.elsewhere is None:
            return ""
        return H.alert("info", "answered elsewhere:", f"now {status_label}")

    def _show_choices(self, choices: list[dict[str, Any]], owner: str | None) -> None:
        """A checkpoint's choices as buttons in the consent panel (Approve / Deny and the note hide)."""
        self.verdicts.layout.display = "none" if choices else None
        self.note.layout.display = "none" if choices else None
        key = (owner, tuple(c["id"] for c in choices))
        if self._choices_key == key:
            return
        self._choices_key = key
        buttons = []
        for c in choices:
            b = make_button(str(c.get("label") or c["id"]), "gl-choice", style="info")
            b.tooltip = f"choose {c['id']}"
            b.on_click(lambda _b, cid=c["id"]: self._choose(cid))
            buttons.append(b)
        self.choices.children = tuple(buttons)

    def enable(self, why_not: str | None) -> None:
        """Disable the answer buttons when `why_not` says why (an action in progress, a closed lab),
        or when the shown wait was answered from here."""
        if why_not is None and self.shown_owner is not None and self.shown_owner == self.sent:
            why_not = "your answer was sent; the run goes on"
        for btn in self.buttons:
            btn.disabled = why_not is not None
            btn.tooltip = why_not or ""

    # -- answering --------------------------------------------------------------------------

    def _send(self, name: str, answer: Callable[[str | None], Any], done: str, after: Callable[[], None]) -> None:
        """Answer the shown wait once: buttons off first, then the answer, then the run goes on."""
        view = self._view
        owner = self.shown_owner
        if owner is None and (self.sent or self.elsewhere) or owner is not None and owner == self.sent:
            return  # a late click (or Enter) for a wait answered here or elsewhere: nothing to do
        if self.sent is not None and view.busy:
            # the Run this panel's answer started still holds the run: no wait of it can be answered
            # now (the answer would fail "running in another task" and, forgetting `sent`, call the
            # panel's own answer one given elsewhere), whatever wait a refresh shows meanwhile
            return
        for btn in self.buttons:  # before any work: a click that follows finds them off
            btn.disabled = True
        if view.closed:
            view.refresh()  # says the lab is closed and keeps everything off
            return
        self.sent = owner
        try:
            answer(owner)
        except (WaitAnsweredError, WaitOwnerError) as exc:
            self.sent = None
            self.elsewhere = owner
            view.refresh()
            view.set_alert(H.alert("info", "answered elsewhere:", f"now {view.status_label} ({exc})"))
            return
        except WaitError as exc:
            self.sent = None
            if owner is not None and view.run.status != "waiting":  # it moved on before this click
                self.elsewhere = owner
                view.refresh()
                view.set_alert(H.alert("info", "answered elsewhere:", f"now {view.status_label}"))
                return
            view.set_alert(H.alert("error", f"{name} failed:", f"{type(exc).__name__}: {exc}"))
            return
        except Exception as exc:
            self.sent = None
            view.set_alert(H.alert("error", f"{name} failed:", f"{type(exc).__name__}: {exc}"))
            return
        after()
        view.start_action("Run", lambda: view.run.arun(), alert=H.alert("info", done, "the run goes on"))

    def _verdict(self, approved: bool) -> None:
        run = self._view.run
        note = self.note.value.strip() or None
        name = "Approve" if approved else "Deny"
        done = ("Approved" if approved else "Denied") + (f" (note: {note})" if note else "") + ":"
        act = run.approve if approved else run.deny
        self._send(name, lambda owner: act(note, owner=owner), done, lambda: setattr(self.note, "value", ""))

    def _choose(self, choice: str) -> None:
        """A choice button: answer the checkpoint with its id, then run on."""
        run = self._view.run
        self._send("Choice", lambda owner: run.resume_with(choice, owner=owner), f"Chose {choice}:", lambda: None)

    def _answer(self) -> None:
        run = self._view.run
        text = self.answer.value
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        wait = getattr(run, "wait", None)
        granting = wait is not None and wait.kind == "capability"

        def answer(owner: str | None) -> Any:
            if granting:
                return run.grant(wait.details.get("capability"), value if text.strip() else None, owner=owner)
            return run.resume_with(value, owner=owner)

        what = "Grant" if granting else "Answer"
        self._send(what, answer, "Granted:" if granting else "Answered:", lambda: setattr(self.answer, "value", ""))


def _answered(run: Any, owner: str) -> bool:
    """Whether the run's wait `owner` has its answer in the store (read only when a shown wait went away)."""
    return any(w.owner == owner and w.resolution is not None for w in run.waits())


def choices_of(wait: Any) -> list[dict[str, Any]]:
    """The choices a wait offers (a workflow checkpoint's), or [] for any other wait."""
    details = getattr(wait, "details", None)
    if getattr(wait, "kind", None) != "interrupt" or not isinstance(details, dict):
        return []
    choices = details.get("choices")
    if not isinstance(choices, list):
        return []
    return [c for c in choices if isinstance(c, dict) and isinstance(c.get("id"), str)]
