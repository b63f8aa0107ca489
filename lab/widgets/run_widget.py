"""`RunWidget`: the run view. Graph, controls, timeline, state, diff, events, and the consent panel.

Long actions (Step, Run, Retry, and continuing after a verdict) run on the lab's private event
loop (`lab.engine.loop.lab_loop`), not in the button's handler, so the kernel stays free: Pause
and Cancel are handled while a Run goes on, and other cells execute. The run's events
(`Run.on_event`) mark the view dirty; a timer redraws it at most every `interval` seconds, and
once more when the action ends. Every action's error is shown in the widget.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..diff import diff_json
from ..engine.loop import submit
from ..errors import LabError
from ..records import CheckpointRecord, EventRecord
from ..render import END, Overlay, edge_labels, overlay_from_path, spec_from_manifest
from ..render.steps import StepView, is_parallel, next_summary
from ..share.branches import Branch, branches
from . import html as H
from .actions import TIPS, why_not
from .agent_view import AgentJobView
from .consent_panel import AnswerPanel, make_button
from .graph_view import GraphView
from .watch import watch

if TYPE_CHECKING:
    from ..run import Run

__all__ = ("RunWidget",)

_EVENTS_SHOWN = 200
_widgets: weakref.WeakValueDictionary[str, RunWidget] = weakref.WeakValueDictionary()


class RunWidget(widgets.VBox):
    """A live view of one run; `display(run)` shows one (the same widget for the same run)."""

    interval = 0.15
    """Seconds between live redraws while the run moves."""

    @classmethod
    def for_run(cls, run: Run) -> RunWidget:
        w = _widgets.get(run.id)
        if w is None or w.run is not run:
            w = cls(run)
            _widgets[run.id] = w
        return w

    def __init__(self, run: Run, **kwargs: Any):
        super().__init__(**kwargs)
        self.add_class("gl-run")
        self._run = run
        self._lock = threading.RLock()
        self._feed = threading.Lock()
        """Guards what the run's events feed the view (the event log, settled stations, subgraph
        links, the redraw timer). A leaf lock, never held while waiting for another: an event
        arrives on the thread that wrote it, maybe with the store held, while a redraw holds
        `_lock` and reads the store (waiting there for `_lock` deadlocked a view and its lab)."""
        self._task: concurrent.futures.Future[Any] | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._action: str | None = None
        self._timer: threading.Timer | None = None
        self._alert = ""
        self._updating: int | None = None
        """The thread moving the timeline itself (its slider changes are not the person's)."""
        self._follow = True
        self._seqs: list[int] = []
        self._tip: int | None = None  # the branch picked in the picker; None: the head's branch
        self._branches: list[Branch] = []
        self._records: dict[int, CheckpointRecord] = {}
        self._event_count, tail = run.event_tail(_EVENTS_SHOWN)  # a long run: read only what is shown
        self._events: deque[EventRecord] = deque(tail, maxlen=_EVENTS_SHOWN)
        self._settled_by: dict[int | None, str] = dict(run.settled_stations())
        self._subgraphs: list[tuple[str, str, str | None]] = [_child_link(e) for e in run.events("subgraph")]
        """(child run, child graph, station) for each child a subgraph station started, oldest first."""

        manifest = run.lab.store.manifest(run.graph.name, run.revision)
        assert manifest is not None, f"run {run.id}: its graph revision {run.revision} is not in the store"
        self.graph = GraphView(spec=spec_from_manifest(manifest, edge_labels(run.graph)))
        # a parallel run's checkpoints are super-steps: drawn as whole frontiers (lab/render/steps.py)
        self._steps = StepView(self.graph.spec, self._records_of) if is_parallel(manifest) else None
        self.graph.layout = widgets.Layout(flex="1 1 55%", min_width="260px", overflow="auto")

        self.header = widgets.HTML()
        self.message = widgets.HTML()
        self.message.add_class("gl-message")
        self.step_btn = make_button("Step", "gl-step", "step-forward")
        self.run_btn = make_button("Run", "gl-run-all", "play")
        self.pause_btn = make_button("Pause", "gl-pause", "pause")
        self.cancel_btn = make_button("Cancel", "gl-cancel", "stop")
        self.retry_btn = make_button("Retry", "gl-retry", "redo")
        self.step_btn.on_click(lambda _b: self._start("Step", lambda: run.astep()))
        self.run_btn.on_click(lambda _b: self._start("Run", lambda: run.arun()))
        self.retry_btn.on_click(lambda _b: self._start("Retry", lambda: run.aretry()))
        self.pause_btn.on_click(lambda _b: self._act("Pause", run.pause))
        self.cancel_btn.on_click(lambda _b: self._act("Cancel", run.cancel))
        controls = widgets.HBox(
            [self.step_btn, self.run_btn, self.pause_btn, self.cancel_btn, self.retry_btn]
        )

        self.answers = AnswerPanel(self)
        """Approve / Deny, a checkpoint's choices, Answer / Grant (consent_panel.py)."""
        a = self.answers
        self.wait_info, self.note, self.approve_btn, self.deny_btn = a.wait_info, a.note, a.approve_btn, a.deny_btn
        self.answer, self.answer_btn, self.verdicts, self.choices = a.answer, a.answer_btn, a.verdicts, a.choices
        self.consent, self.asking = a.consent, a.asking
        self.agent = AgentJobView(self)
        """A delegated station's agent job: state, messages, tokens; Retry / Cancel / Provide when LOST."""

        self.state_panel = widgets.HTML()
        self.state_panel.add_class("gl-state")
        self.diff_panel = widgets.HTML()
        self.diff_panel.add_class("gl-diff-panel")
        side = widgets.VBox(
            [self.state_panel, self.diff_panel], layout=widgets.Layout(flex="1 1 44%", min_width="240px")
        )
        body = widgets.HBox(
            [self.graph, side], layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start")
        )

        self.slider = widgets.IntSlider(
            min=0,
            max=0,
            value=0,
            readout=False,
            continuous_update=True,
            description="checkpoint",
            layout=widgets.Layout(width="30%"),
        )
        self.slider.add_class("gl-timeline")
        if self._steps is not None:  # one checkpoint per super-step: the timeline scrubs by step
            self.slider.description = "step"
        self.slider.observe(self._on_slide, names="value")
        self.older_btn = make_button("", "gl-older", "chevron-left")
        self.newer_btn = make_button("", "gl-newer", "chevron-right")
        self.older_btn.tooltip, self.newer_btn.tooltip = "older checkpoint", "newer checkpoint"
        self.older_btn.on_click(lambda _b: self._nudge(-1))
        self.newer_btn.on_click(lambda _b: self._nudge(+1))
        self.timeline_label = widgets.HTML()
        self.timeline_label.add_class("gl-timeline-label")
        self.branch_picker = widgets.Dropdown(
            options=[], description="branch", layout=widgets.Layout(width="auto", display="none")
        )
        self.branch_picker.add_class("gl-branches")
        self.branch_picker.observe(self._on_branch, names="value")
        self.rewind_btn = make_button("Rewind here", "gl-rewind", "undo")
        self.fork_btn = make_button("Fork here", "gl-fork", "code-fork")
        self.rewind_btn.on_click(lambda _b: self._act("Rewind", self._rewind))
        self.fork_btn.on_click(lambda _b: self._act("Fork", self._fork))
        timeline = widgets.HBox(
            [
                self.branch_picker,
                self.older_btn,
                self.slider,
                self.newer_btn,
                self.timeline_label,
                self.rewind_btn,
                self.fork_btn,
            ],
            layout=widgets.Layout(align_items="center", flex_flow="row wrap"),
        )

        self.events_panel = widgets.HTML()
        self.events_panel.add_class("gl-event-log")
        self.forks = widgets.VBox()
        self.subgraph_views = widgets.Accordion(layout=widgets.Layout(display="none"))
        self.subgraph_views.add_class("gl-subgraphs")
        self.subgraph_views.observe(self._open_subgraph, names="selected_index")
        self.children = [
            self.header,
            self.message,
            controls,
            self.consent,
            self.asking,
            self.agent,
            body,
            timeline,
            self.events_panel,
            self.subgraph_views,
            self.forks,
        ]

        on_event, schedule = weakref.WeakMethod(self._on_event), weakref.WeakMethod(self._schedule)

        def observe(ev: EventRecord) -> None:
            take = on_event()  # None once the view is gone: the run does not keep it alive
            if take is not None:
                take(ev)

        run.on_event(observe)

        def job_changed(_request_id: str) -> None:
            redraw = schedule()
            if redraw is not None:
                redraw()

        try:
            run.lab.agents.on_change(job_changed)
        except LabError:  # a store that keeps no agent jobs (not a JobTables store): no agent panel
            pass
        self.refresh()
        watch(self)

    # -- what is selected ------------------------------------------------------------------

    @property
    def run(self) -> Run:
        return self._run

    @property
    def selected_seq(self) -> int | None:
        """The checkpoint the timeline points at."""
        i = self.slider.value
        return self._seqs[i] if 0 <= i < len(self._seqs) else None

    @property
    def status_label(self) -> str:
        """The run's status in words: a `running` run that nothing is moving is `paused` (at a
        boundary, after Pause or between steps); the stored status stays `running`."""
        status = self._run.status
        moving = self.busy or self._run.busy
        return "paused" if status == "running" and not moving else status

    @property
    def busy(self) -> bool:
        """An action started from this view (Step, Run, Retry, continuing a verdict) is going on."""
        return self._task is not None

    @property
    def closed(self) -> bool:
        """The run's lab is closed: the view can show what it last read, and do nothing more."""
        return bool(self._run.lab.store.closed)

    # -- live updates ----------------------------------------------------------------------

    def _on_event(self, ev: EventRecord) -> None:
        with self._feed:
            self._events.append(ev)
            self._event_count += 1
            if ev.kind == "settled" and ev.checkpoint_seq is not None and ev.node_id:
                self._settled_by[ev.checkpoint_seq] = ev.node_id
            if ev.kind == "subgraph":
                self._subgraphs.append(_child_link(ev))
        self._schedule()

    def _schedule(self) -> None:
        """Redraw within `interval` (a run event, or a change of its agent job)."""
        with self._feed:
            if self._timer is None:
                self._timer = threading.Timer(self.interval, self._tick)
                self._timer.daemon = True
                self._timer.start()

    def poll(self) -> None:
        """Take in what another process wrote to this run (its progress, or an answer given there);
        the view's watch (watch.py) calls it while the run waits or another process advances it."""
        if self._run.follow():
            self.refresh()

    def _tick(self) -> None:
        with self._feed:
            self._timer = None
        self.refresh()

    def refresh(self) -> None:
        """Redraw everything from the run (the timeline follows the head unless scrubbed back)."""
        with self._lock:
            if self.closed:
                self._show_closed()
                return
            try:
                self._refresh()
            except Exception as exc:  # a view never breaks the run it shows
                self.message.value = H.alert(
                    "error", "the view could not refresh:", f"{type(exc).__name__}: {exc}"
                )

    def _show_closed(self) -> None:
        """The lab was closed (lab.close(), or the notebook opened a new Lab): say so, offer nothing."""
        self.message.value = H.alert("error", "this lab is closed", CLOSED)
        why = "the lab is closed: " + CLOSED
        for btn in (
            self.step_btn, self.run_btn, self.pause_btn, self.cancel_btn, self.retry_btn,
            self.rewind_btn, self.fork_btn,
        ):  # fmt: skip
            btn.disabled, btn.tooltip = True, why
        self.answers.enable(why)
        self.note.disabled = self.answer.disabled = True
        self.consent.layout.display = self.asking.layout.display = "none"
        run = self._run
        self.header.value = H.status_line(
            run.id, run.graph.name, run.revision, run.status, run.head, run.next_stations, label="lab closed"
        )

    def _refresh(self) -> None:
        seqs = self._branch_seqs()
        if seqs != self._seqs:
            known = set(seqs)
            self._records = {s: r for s, r in self._records.items() if s in known}
            self._seqs = seqs
        self._updating = threading.get_ident()
        try:
            self.slider.max = max(0, len(seqs) - 1)
            if self._follow or self.slider.value > self.slider.max:
                self.slider.value = self.slider.max
        finally:
            self._updating = None
        self._show_selected()
        self._show_run()
        self._show_subgraphs()

    # -- subgraphs: each child run nested under its parent, collapsed until opened --------------

    def _show_subgraphs(self) -> None:
        with self._feed:
            links = list(self._subgraphs)
        acc = self.subgraph_views
        if len(acc.children) == len(links):
            return
        acc.children = [*acc.children, *(widgets.VBox() for _ in links[len(acc.children) :])]
        for i, (child, graph, node) in enumerate(links):
            acc.set_title(i, f"subgraph {graph} at station {node or '?'}: run {child}")
        acc.layout.display = None if links else "none"

    def _open_subgraph(self, change: dict[str, Any]) -> None:
        """Opening a child builds its own run view there (once): a parent with many children stays cheap."""
        i = change["new"]
        with self._feed:
            links = list(self._subgraphs)
        if i is None or not 0 <= i < len(links):
            return
        box = self.subgraph_views.children[i]
        if box.children:  # type: ignore[attr-defined]
            return
        child = self._run.lab.resume(links[i][0], deps=self._run.deps)
        box.children = (RunWidget.for_run(child),)  # type: ignore[attr-defined]

    # -- the branch picker (the checkpoint tree) ----------------------------------------------

    def _branch_seqs(self) -> list[int]:
        """The timeline's checkpoints: the picked branch, else root to head. Refreshes the picker."""
        run = self._run
        store = run.lab.store
        head_branch = list(run.history().seqs)
        if self._tip is None and len(store.seqs(run.id)) == len(head_branch):
            found: list[Branch] = []  # never rewound: one branch, no picker
        else:
            found = branches(store.parents(run.id), run.head)
        if self._tip is not None and all(b.tip != self._tip for b in found):
            self._tip = None  # that branch is gone (pruned)
        if found != self._branches:
            self._branches = found
            with self._quiet():
                self.branch_picker.options = [(b.label, b.tip) for b in found]
                self.branch_picker.value = self._picked_tip()
            self.branch_picker.layout.display = None if len(found) > 1 else "none"
        elif found:
            with self._quiet():
                self.branch_picker.value = self._picked_tip()
        if self._tip is None:
            return head_branch
        return store.branch(run.id, self._tip)

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Change the picker or the timeline from code: their observers ignore it (this thread only)."""
        before, self._updating = self._updating, threading.get_ident()
        try:
            yield
        finally:
            self._updating = before

    def _picked_tip(self) -> int | None:
        if self._tip is not None:
            return self._tip
        return next((b.tip for b in self._branches if b.has_head), None)

    def _on_branch(self, change: dict[str, Any]) -> None:
        if self._updating == threading.get_ident() or change["new"] is None:
            return
        with self._lock:
            head_tip = next((b.tip for b in self._branches if b.has_head), None)
            self._tip = None if change["new"] == head_tip else change["new"]
            self._follow = self._tip is None
            if self._tip is not None:
                with self._quiet():
                    self.slider.value = 0
        self.refresh()
        if self._tip is not None:  # show the picked branch at its tip
            self.slider.value = self.slider.max

    def _record(self, seq: int) -> CheckpointRecord:
        """A checkpoint of the branch, read once (with its parent, which the diff needs)."""
        rec = self._records.get(seq)
        if rec is None:
            idx = self._seqs.index(seq)
            want = [s for s in self._seqs[max(0, idx - 1) : idx + 1] if s not in self._records]
            self._records.update({r.seq: r for r in self._run.lab.store.checkpoints_in(self._run.id, want)})
            rec = self._records[seq]
        return rec

    def _records_of(self, seqs: list[int]) -> dict[int, CheckpointRecord]:
        """Checkpoints of the branch: the cached ones, the rest read in one store call and not kept
        (the step view keeps only what each step settled, so a long run's states are not held)."""
        have = {s: self._records[s] for s in seqs if s in self._records}
        want = [s for s in seqs if s not in have]
        if want:
            have.update({r.seq: r for r in self._run.lab.store.checkpoints_in(self._run.id, want)})
        return have

    def overlay_at(self, index: int) -> Overlay:
        """The overlay of the branch up to the checkpoint at `index` of the timeline."""
        run = self._run
        seqs = self._seqs[: index + 1]
        if self._steps is not None:
            return self._step_overlay(seqs, index == len(self._seqs) - 1)
        rec = self._record(seqs[-1])
        with self._feed:
            settled_by = dict(self._settled_by)
        path = [settled_by[s] for s in seqs[1:] if s in settled_by]
        current = [END] if rec.status == "done" else [p.node_id for p in rec.next]
        is_head = index == len(self._seqs) - 1
        failed = (run.error or {}).get("node_id") if is_head and run.status == "failed" else None
        parked = rec.next[0].node_id if rec.status == "waiting" and rec.next else None
        return overlay_from_path(
            path, current, failed=failed, parked=parked, breakpoints=getattr(run, "breakpoints", None)
        )

    def _step_overlay(self, seqs: list[int], is_head: bool) -> Overlay:
        """A parallel run's overlay: every task of the checkpoint's frontier lit, open joins counted."""
        run = self._run
        assert self._steps is not None
        failed = (run.error or {}).get("node_id") if is_head and run.status == "failed" else None
        wait = getattr(run, "wait", None) if is_head else None
        parked = [wait.node_id] if wait is not None and run.status == "waiting" else []
        return self._steps.overlay(
            seqs, failed=failed, parked=parked, breakpoints=getattr(run, "breakpoints", None)
        )

    def _show_selected(self) -> None:
        if not self._seqs:
            return
        i = self.slider.value
        seq = self._seqs[i]
        rec = self._record(seq)
        self.graph.show(self.overlay_at(i))
        at_head = seq == self._run.head
        head = " (head)" if at_head else ""
        # at the head the words are the header's (a `running` run nothing moves is `paused`)
        word = self.status_label if at_head else rec.status
        sections = getattr(self._run.graph, "state_sections", None)  # a subroutine names its kinds of value
        body = (
            "".join(f'<h5 class="gl-section">{H.escape(t)}</h5>{H.json_tree(v)}' for t, v in sections(rec))
            if callable(sections)
            else H.json_tree(rec.state)
        )
        self.state_panel.value = f'<div class="gl-panel"><h4>State at checkpoint {seq}{head} · {H.escape(word)}</h4>{body}</div>'
        parent = self._seqs[i - 1] if i > 0 else None
        diff = None
        if parent is not None:  # the parent's record is read with this one: no store round trip
            run_id = self._run.id
            diff = diff_json(
                self._record(parent).state, rec.state, left=f"{run_id}@{parent}", right=f"{run_id}@{seq}"
            )
        self.diff_panel.value = H.diff_table(
            diff, title=f"Changes from checkpoint {parent} to {seq}" if parent is not None else "Changes"
        )
        nxt = next_summary(rec) if self._steps is not None else ", ".join(p.node_id for p in rec.next) or "End"
        self.timeline_label.value = (
            f'<span class="gl-selected" data-seq="{seq}">checkpoint <b>{seq}</b>{head} · {i + 1} of {len(self._seqs)} · '
            f"{H.escape(word)} · next {H.escape(nxt)}</span>"
        )

    def _show_run(self) -> None:
        run = self._run
        note = f"{self._action.lower()} in progress…" if self.busy and self._action else ""
        limits = getattr(run, "limits", None)
        bounds = ""
        if limits is not None:
            bounds = f"step limit {limits.step_limit if limits.step_limit is not None else 'none'}"
            bounds += f" · timeout {limits.timeout:g} s" if limits.timeout is not None else ""
        self.header.value = H.status_line(
            run.id, run.graph.name, run.revision, run.status, run.head, run.next_stations, note,
            label=self.status_label, bounds=bounds,
        )
        self.answers.show(run)
        msgs = [self._alert] if self._alert else []
        elsewhere = self.answers.elsewhere_alert(self.status_label)
        if elsewhere and "answered elsewhere" not in self._alert:
            msgs.append(elsewhere)
        if run.status == "failed" and run.error:
            err = run.error
            msgs.append(
                H.alert(
                    "error",
                    f"station {err.get('node_id')} failed:",
                    f"{err.get('type', '')}: {err.get('message', '')}",
                    detail=err.get("traceback", ""),
                )
            )
        self.message.value = "".join(msgs)
        self.agent.show(run)
        self._enable()
        with self._feed:
            events, total = list(self._events), self._event_count
        self.events_panel.value = H.events_table(events, total=total)

    # -- which actions are possible ---------------------------------------------------------

    def why_not(self, action: str) -> str | None:
        """Why `action` is not possible now (the button's tooltip), or None when it is."""
        return why_not(self._run, action, busy_with=self._action if self.busy else None, selected=self.selected_seq)

    def _enable(self) -> None:
        for action, btn in (
            ("step", self.step_btn),
            ("run", self.run_btn),
            ("pause", self.pause_btn),
            ("cancel", self.cancel_btn),
            ("retry", self.retry_btn),
            ("rewind", self.rewind_btn),
            ("fork", self.fork_btn),
        ):
            why = self.why_not(action)
            btn.disabled = why is not None
            btn.tooltip = why or TIPS[action]
        self.retry_btn.layout.display = None if self._run.status == "failed" else "none"
        self.answers.enable(f"{self._action} is in progress" if self.busy else None)
        self.note.disabled = self.answer.disabled = False
        i, n = self.slider.value, len(self._seqs)
        self.older_btn.disabled, self.newer_btn.disabled = i <= 0, i >= n - 1

    # -- actions -----------------------------------------------------------------------------

    def set_alert(self, html: str) -> None:
        """Show `html` (an `H.alert`) above the controls until the next action, and redraw."""
        self._alert = html
        self.refresh()

    def start_action(self, name: str, make: Callable[[], Coroutine[Any, Any, Any]], *, alert: str = "") -> None:
        """Start a long action on the lab's loop (the answer panel's run after a verdict); `alert`
        is shown meanwhile (what was just answered), unless the action fails."""
        self._start(name, make, alert=alert)

    def _act(self, name: str, fn: Callable[[], Any]) -> None:
        """Do a quick action now; show its error in the widget."""
        self._alert = ""
        if self.closed:
            self.refresh()
            return
        try:
            fn()
        except Exception as exc:
            self._alert = H.alert("error", f"{name} failed:", f"{type(exc).__name__}: {exc}")
        self.refresh()

    def _start(self, name: str, make: Callable[[], Coroutine[Any, Any, Any]], *, alert: str = "") -> None:
        """Start a long action on the lab's loop and return at once (the kernel stays free)."""
        if self.closed:
            self.refresh()
            return
        if self.busy:
            self._alert = H.alert("error", f"{name}:", f"{self._action} is still in progress; Pause it first")
            self.refresh()
            return
        self._alert = alert
        self._follow = True
        self._tip = None  # a step goes on from the head: show the head's branch
        self._action = name
        self._idle.clear()
        try:
            self._task = submit(make()).future  # released also if a station blocks the loop (lab.engine.watchdog)
        except Exception as exc:
            self._alert = H.alert("error", f"{name} failed:", f"{type(exc).__name__}: {exc}")
            self._task = None
            self._idle.set()
        else:
            self._task.add_done_callback(lambda fut: self._finished(name, fut))
        self.refresh()

    def _finished(self, name: str, fut: concurrent.futures.Future[Any]) -> None:
        exc = None if fut.cancelled() else fut.exception()
        with self._lock:
            with self._feed:  # the refresh below shows those events: wait() returns on a settled view
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
            if exc is not None:
                self._alert = H.alert("error", f"{name} failed:", f"{type(exc).__name__}: {exc}")
            self._task = None
            self._action = None
        self.refresh()
        self._idle.set()

    def wait(self, timeout: float | None = 60) -> bool:
        """Block until the action started from this view has ended and the view shows it."""
        return self._idle.wait(timeout)

    def _rewind(self) -> None:
        seq = self.selected_seq
        assert seq is not None
        self._run.rewind(seq)
        self._tip = None  # the head is on the branch shown; follow it again
        self._follow = True  # the refresh moves the timeline to the new head

    def _fork(self) -> None:
        seq = self.selected_seq
        assert seq is not None
        child = self._run.fork(seq)
        self.forks.children = (*self.forks.children, RunWidget.for_run(child))
        self._alert = H.alert("info", f"Forked checkpoint {seq} into {child.id}", "(its view is below)")

    # -- the timeline ---------------------------------------------------------------------------

    def _on_slide(self, change: dict[str, Any]) -> None:
        if self._updating == threading.get_ident():
            return
        with self._lock:
            # A live refresh may have moved the timeline while this change waited for the lock:
            # the person's choice wins.
            if self.slider.value != change["new"] and 0 <= change["new"] <= self.slider.max:
                self._updating = threading.get_ident()
                try:
                    self.slider.value = change["new"]
                finally:
                    self._updating = None
            self._follow = change["new"] >= len(self._seqs) - 1
            try:
                self._show_selected()
                self._enable()
            except Exception as exc:
                self.message.value = H.alert(
                    "error", "could not show that checkpoint:", f"{type(exc).__name__}: {exc}"
                )

    def _nudge(self, delta: int) -> None:
        self.slider.value = min(self.slider.max, max(0, self.slider.value + delta))

    def __repr__(self) -> str:
        return f"<RunWidget {self._run.id}>"


CLOSED = "reopen with Lab() and display the run again (lab.resume(run_id) gives a live handle)"
"""What a view of a closed lab tells the person to do."""


def _child_link(ev: EventRecord) -> tuple[str, str, str | None]:
    """A `subgraph` event's child run, its graph and the parent's station."""
    p = ev.payload or {}
    return str(p.get("child_run")), str(p.get("child_graph")), ev.node_id
