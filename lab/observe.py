"""A run's trace for OpenTelemetry: Logfire, Jaeger or any OTLP collector shows it (docs/observe.md).

Built only from the rows a run's journal writes (`lab.run_writes.Journal.write` hands every
transaction to the run's `RunTracer` just before it is stored), so no engine knows about traces:

* a **segment** of a run (from the first station it enters, or the answer that lets it go on, to
  the next stop: `waiting`, `done`, `failed`, `cancelled`, `interrupted`) is a span
  `run graph {graph}`. The first segment a process sees is the root of the run's trace (or a child
  of the caller's current span, if one is active); a later segment of the same run object in the
  same process is a child of that root; a segment in another process (after a kernel restart,
  `lab.resume` elsewhere) starts a new trace **linked** to the previous segment, whose span
  context is read from the run's events (the payload of a segment's first event keeps it under
  `"trace"`);
* each station attempt (each try of a retried station, each task of a parallel step) is a span
  `run node {node_id}` under its segment: parallel tasks are siblings; a failed try records its
  exception (an `exception` event with type, message and traceback) and an ERROR status; a wait
  is a `wait` event on the station that parked; progress and warnings are events too.

Times come from the rows themselves, so a settlement written late (it rides with the next
station's write) still ends its span when the station ended.

When: automatic when a tracer provider is configured (`logfire.configure()`, or
`opentelemetry.trace.set_tracer_provider(...)`), as pydantic-graph's own `auto_instrument` and
Logfire's instrumentations are; `lab.observe(tracer_provider=...)` sends a lab's runs to a provider
of its own, `lab.observe(enabled=False)` turns them off. The decision is taken when a run object
is made (`start`, `resume`, `lab.get`...). Off, a run holds `None` and each write pays one
`is not None`: nothing measurable (`python -m lab.bench`, docs/benchmarks.md).
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import sys
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, TracerProvider

    from .lab import Lab
    from .records import RunRecord

__all__ = ("observe", "run_tracer", "RunTracer", "TRACE_KEY", "SCOPE")

TRACE_KEY = "trace"
"""Key, in the payload of a segment's first event, of its span context: `{"trace_id", "span_id"}` (hex)."""

SCOPE = "graph-lab"
"""The instrumentation scope (tracer name) of the lab's spans."""

log = logging.getLogger("lab.observe")

_OFF = "off"
_settings: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""Per store (every `Lab` on one store shares it): a tracer provider, or `_OFF`. Absent: automatic."""

_open_segments: set[RunTracer] = set()
"""Tracers with a segment open, held until it ends (or the interpreter exits) even if their run is gone."""
_atexit_armed = False

_BEGINS = frozenset(
    {"entered", "verdict", "resumed", "retry", "failed", "done", "waiting", "cancelled", "interrupted"}
)
"""Events that open a segment when none is open (bookkeeping such as `rewind` or `fork` does not)."""


def observe(lab: Lab, tracer_provider: TracerProvider | None = None, *, enabled: bool = True) -> None:
    """Trace `lab`'s runs: automatically (no provider given), to `tracer_provider`, or not at all.

    Applies to run objects made from now on (a run already open keeps its choice).
    """
    if tracer_provider is not None and not hasattr(tracer_provider, "get_tracer"):
        from .errors import ArgumentError

        raise ArgumentError(
            f"lab.observe(tracer_provider=...) takes an OpenTelemetry TracerProvider, not {type(tracer_provider).__name__}; "
            "pass e.g. opentelemetry.sdk.trace.TracerProvider(), or nothing to follow the global provider"
        )
    if not enabled:
        _settings[lab.store] = _OFF
    elif tracer_provider is None:
        _settings.pop(lab.store, None)
    else:
        _settings[lab.store] = tracer_provider


def run_tracer(lab: Lab, run_id: str, next_ev: int = 2, record: RunRecord | None = None) -> RunTracer | None:
    """The tracer of a run object being made, or None when its lab's runs are not traced (cheap).

    `next_ev` is the run's next event number: at most 1 (only its `started` event) means a run
    created just now, with no earlier trace to look up. `record` (the run's row, when the caller
    has it) spares a read of the store for the graph and revision.
    """
    setting = _settings.get(lab.store) if _settings else None
    if setting is None:
        trace = sys.modules.get("opentelemetry.trace")
        if trace is None:  # nobody imported OpenTelemetry, so nobody configured a provider
            return None
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return None  # the API's defaults: no provider configured
    elif setting is _OFF:
        return None
    else:
        provider = setting
    tracer = RunTracer(lab, run_id, provider, fresh=next_ev <= 1)
    if record is not None:
        tracer.describe(record)
    return tracer


@functools.cache
def _lab_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("graph-lab")
    except metadata.PackageNotFoundError:
        return None


def _ns(row: dict[str, Any]) -> int:
    return int(float(row.get("created_at") or time.time()) * 1e9)


_TEXT_LIMIT = 4096
"""Longest text attribute the lab sets (a wait's details, an answer): a span is not a store."""


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= _TEXT_LIMIT else text[: _TEXT_LIMIT - 1] + "…"


class RunTracer:
    """The spans of one run object's life in this process, fed with its journal's rows."""

    __slots__ = (
        "lab", "run_id", "_api", "_tracer", "_meta", "_digest", "_root", "_last", "_looked",
        "_segment", "_segments", "_open", "_opened", "_next_try", "_tries", "_current", "_entered_now",
    )  # fmt: skip

    def __init__(self, lab: Lab, run_id: str, provider: TracerProvider, *, fresh: bool = False):
        from opentelemetry import trace

        self.lab = lab
        self.run_id = run_id
        self._api = trace
        self._tracer = provider.get_tracer(SCOPE, _lab_version())
        self._meta: dict[str, Any] | None = None
        """Attributes of every span of the run: run id, graph, revision (and a child run's parent)."""
        self._digest = ""
        self._root: SpanContext | None = None
        """The first segment's span context in this process: later segments are its children."""
        self._last: SpanContext | None = None
        """The previous segment's span context (this process), which the next one links to."""
        self._looked = fresh
        """Whether the run's events were searched for an earlier process's span context (a new run has none)."""
        self._segment: Span | None = None
        self._segments = 0
        self._open: dict[int, Span] = {}
        """Station spans by attempt (the `entered` event's seq)."""
        self._opened: dict[int, dict[str, Any]] = {}
        """The attributes each open station span started with."""
        self._next_try: dict[int, tuple[dict[str, Any], int]] = {}
        """A try that follows a retried one with no `entered` of its own (a super-step task is tried
        again inside its step): its attributes and start, opened when a later event names it."""
        self._tries: dict[str | None, int] = {}
        """Failed tries of a station since it last settled or failed: its next try's `graph_lab.retries`
        (per station, not per checkpoint: a delegated station's tries each park on a job)."""
        self._current: tuple[int, Any, Any] | None = None
        """The station span made current while its node runs: (attempt, context token, context)."""
        self._entered_now: list[int] = []
        _arm_atexit()

    def __call__(self, rows: Sequence[dict[str, Any]]) -> None:
        """One journal transaction, just before it is stored: its events become spans and span events.

        A trouble here is logged, never raised: tracing must not stop a run.
        """
        try:
            self._feed(rows)
        except Exception:
            log.exception("tracing run %s failed; its trace may miss spans", self.run_id)

    def _feed(self, rows: Sequence[dict[str, Any]]) -> None:
        entered = self._entered_now
        entered.clear()
        for row in rows:
            if row.get("t") != "ev" or row.get("run_id") != self.run_id:
                continue
            kind = row["kind"]
            if self._segment is None:
                if kind not in _BEGINS:
                    continue
                self._begin(row)
            handler = self._HANDLERS.get(kind)
            if handler is not None:
                handler(self, row)
            elif self._segment is not None:
                self._segment.add_event(kind, self._event_attrs(row), timestamp=_ns(row))
        if len(entered) == 1 and entered[0] in self._open:
            self._make_current(entered[0])

    def _make_current(self, attempt: int) -> None:
        """Make the station's span the current span of the drive, so the node's own spans (a
        pydantic-ai agent's, `logfire.span`) are its children: the node's task copies the context
        when it starts, as it copies the station's context. Only for one station at a time: a
        super-step's tasks share the drive's context, so their spans stay children of the run's."""
        from opentelemetry import context

        self._release()
        ctx = self._api.set_span_in_context(self._open[attempt])
        self._current = (attempt, context.attach(ctx), ctx)

    def _release(self) -> None:
        """Put back the drive's context as it was before the station (in the drive that set it only)."""
        current, self._current = self._current, None
        if current is None:
            return
        from opentelemetry import context

        if context.get_current() is current[2]:
            context.detach(current[1])

    # -- segments ---------------------------------------------------------------------------

    def describe(self, rec: RunRecord) -> None:
        """Take the run's graph, revision and digest from its row."""
        self._meta = {
            "graph_lab.run_id": self.run_id,
            "graph_lab.graph": rec.graph_key,
            "graph_lab.revision": rec.revision,
        }
        self._digest = rec.digest
        if rec.parent_run_id:
            self._meta["graph_lab.parent_run_id"] = rec.parent_run_id

    def _attrs(self) -> dict[str, Any]:
        if self._meta is None:
            self.describe(self.lab.store.get_run(self.run_id))
        assert self._meta is not None
        return self._meta

    def _begin(self, row: dict[str, Any]) -> None:
        trace = self._api
        attrs = self._attrs()
        links = []
        earlier = self._last
        if earlier is None and not self._looked:
            self._looked = True
            earlier = self._stored_context()
        if earlier is not None:
            links.append(trace.Link(earlier, {"graph_lab.link": "earlier segment of this run"}))
        if self._root is not None:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(self._root))
        elif trace.get_current_span().get_span_context().is_valid:
            parent = None  # the caller's current span (theirs: an experiment, a request) holds the run
        else:
            from opentelemetry.context import Context

            parent = Context()  # a trace of its own
        self._segments += 1
        span = self._tracer.start_span(
            f"run graph {attrs['graph_lab.graph']}",
            context=parent,
            kind=trace.SpanKind.INTERNAL,
            attributes={
                **attrs,
                "graph_lab.digest": self._digest,
                "graph_lab.segment": self._segments,
                "graph_lab.resumed": earlier is not None,
                "graph_lab.checkpoint_seq": row.get("checkpoint_seq"),
            },
            links=links,
            start_time=_ns(row),
        )
        ctx = span.get_span_context()
        if self._root is None:
            self._root = ctx
        self._segment = span
        _open_segments.add(self)
        # kept with the event, so the process that resumes this run links to this segment
        row["payload"] = {
            **(row.get("payload") or {}),
            TRACE_KEY: {"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"},
        }

    def _stored_context(self) -> SpanContext | None:
        """The span context of the run's latest segment, as its events keep it (another process's)."""
        for ev in reversed(self.lab.store.events(self.run_id)):
            kept = (ev.payload or {}).get(TRACE_KEY)
            if isinstance(kept, dict):
                try:
                    trace_id, span_id = int(kept["trace_id"], 16), int(kept["span_id"], 16)
                except (KeyError, TypeError, ValueError):
                    continue
                return self._api.SpanContext(
                    trace_id,
                    span_id,
                    is_remote=True,
                    trace_flags=self._api.TraceFlags(self._api.TraceFlags.SAMPLED),
                )
        return None

    def _end_segment(self, row: dict[str, Any] | None, status: str) -> None:
        span, self._segment = self._segment, None
        if span is None:
            return
        _open_segments.discard(self)
        end = _ns(row) if row is not None else time.time_ns()
        for attempt in list(self._open):
            self._end_station(attempt, "unsettled", end)
        self._next_try.clear()
        self._release()
        span.set_attribute("graph_lab.status", status)
        if row is not None and row.get("checkpoint_seq") is not None:
            span.set_attribute("graph_lab.head_seq", row["checkpoint_seq"])
        self._last = span.get_span_context()
        span.end(end_time=end)

    def end_open(self) -> None:
        """End what is still open (at interpreter exit: a run paused mid-way)."""
        self._end_segment(None, "paused")

    # -- stations ---------------------------------------------------------------------------

    def _event_attrs(self, row: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if row.get("node_id") is not None:
            out["graph_lab.node_id"] = row["node_id"]
        if row.get("checkpoint_seq") is not None:
            out["graph_lab.checkpoint_seq"] = row["checkpoint_seq"]
        for key, value in (row.get("payload") or {}).items():
            if key != TRACE_KEY and value is not None:
                out[f"graph_lab.{key}"] = value if isinstance(value, bool | int | float) else _text(value)
        return out

    def _entered(self, row: dict[str, Any]) -> None:
        node_id, payload = row.get("node_id"), row.get("payload") or {}
        retries = self._tries.get(node_id, 0)
        attrs = {
            **self._attrs(),
            "graph_lab.node_id": node_id,
            "graph_lab.attempt": row.get("attempt"),
            "graph_lab.checkpoint_seq": row.get("checkpoint_seq"),
            "graph_lab.try": retries + 1,
            "graph_lab.retries": retries,
        }
        for key in ("task", "step"):
            if key in payload:
                attrs[f"graph_lab.{key}"] = payload[key]
        if self._next_try:  # a serial retry: this `entered` is the next try, not a try without one
            cp = row.get("checkpoint_seq")
            for attempt, (was, _) in list(self._next_try.items()):
                if was["graph_lab.node_id"] == node_id and was["graph_lab.checkpoint_seq"] == cp:
                    del self._next_try[attempt]
        self._open_station(row.get("attempt"), attrs, _ns(row), from_entered=True)

    def _open_station(
        self, attempt: int | None, attrs: dict[str, Any], start: int, *, from_entered: bool = False
    ) -> None:
        assert self._segment is not None
        span = self._tracer.start_span(
            f"run node {attrs['graph_lab.node_id']}",
            context=self._api.set_span_in_context(self._segment),
            attributes=attrs,
            start_time=start,
        )
        if attempt is not None:
            self._open[attempt] = span
            self._opened[attempt] = attrs
            if from_entered:
                self._entered_now.append(attempt)

    def _next_try_of(self, row: dict[str, Any]) -> None:
        """Open the try that follows a retried one in its step, now that an event names it."""
        attempt = row.get("attempt")
        if self._next_try and attempt in self._next_try and attempt not in self._open:
            attrs, start = self._next_try.pop(attempt)
            self._open_station(attempt, attrs, start)

    def _end_station(
        self,
        attempt: int | None,
        status: str,
        end: int,
        error: dict[str, Any] | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> bool:
        span = self._open.pop(attempt, None) if attempt is not None else None
        self._opened.pop(attempt, None)  # type: ignore[arg-type]
        if span is None:
            return False
        if self._current is not None and self._current[0] == attempt:
            self._release()
        span.set_attributes({**attrs, "graph_lab.status": status} if attrs else {"graph_lab.status": status})
        if error is not None:
            _record_error(self._api, span, error, end)
        span.end(end_time=end)
        return True

    def _settled(self, row: dict[str, Any]) -> None:
        self._next_try_of(row)
        self._tries.pop(row.get("node_id"), None)
        nxt = [str(n) for n in (row.get("payload") or {}).get("next") or ()]
        attrs = {"graph_lab.settled_seq": row.get("checkpoint_seq"), "graph_lab.next": nxt}
        self._end_station(row.get("attempt"), "settled", _ns(row), attrs=attrs)

    def _retry(self, row: dict[str, Any]) -> None:
        self._next_try_of(row)
        payload, attempt, at = row.get("payload") or {}, row.get("attempt"), _ns(row)
        key = row.get("node_id")
        tried = self._tries[key] = int(payload["try"]) if "try" in payload else self._tries.get(key, 0) + 1
        attrs = self._opened.get(attempt)  # type: ignore[arg-type]
        if not self._end_station(attempt, "retried", at, payload.get("error") or {}):
            assert self._segment is not None
            self._segment.add_event("retry", self._event_attrs(row), timestamp=at)
        elif attrs is not None and attempt is not None:
            self._next_try[attempt] = ({**attrs, "graph_lab.try": tried + 1, "graph_lab.retries": tried}, at)

    def _failed(self, row: dict[str, Any]) -> None:
        self._next_try_of(row)
        self._tries.pop(row.get("node_id"), None)
        payload = row.get("payload") or {}
        end = _ns(row)
        if not self._end_station(row.get("attempt"), "failed", end, payload):
            assert self._segment is not None  # a run-level failure (a limit, a timeout): the segment's
            _record_error(self._api, self._segment, payload, end)
        segment = self._segment
        if segment is not None:
            segment.set_status(
                self._api.Status(self._api.StatusCode.ERROR, str(payload.get("message", ""))[:500])
            )
        self._end_segment(row, "failed")

    def _waiting(self, row: dict[str, Any]) -> None:
        self._next_try_of(row)
        end = _ns(row)
        span = self._open.get(row.get("attempt"))  # type: ignore[arg-type]
        target = span if span is not None else self._segment
        assert target is not None
        target.add_event("wait", self._event_attrs(row), timestamp=end)
        self._end_station(row.get("attempt"), "waiting", end)
        self._end_segment(row, "waiting")

    def _stop(self, row: dict[str, Any]) -> None:
        self._next_try_of(row)
        end = _ns(row)
        kind = row["kind"]
        if kind != "done":
            self._end_station(row.get("attempt"), kind, end)
        assert self._segment is not None
        if kind == "interrupted":
            self._segment.add_event("interrupted", self._event_attrs(row), timestamp=end)
        self._end_segment(row, kind)

    def _note(self, row: dict[str, Any]) -> None:
        """Progress and warnings: events on the station's span (the segment's if none is open)."""
        self._next_try_of(row)
        node_id = row.get("node_id")
        span = next(
            (s for a, s in reversed(self._open.items()) if self._opened[a]["graph_lab.node_id"] == node_id),
            None,
        )
        target = span if span is not None else self._segment
        assert target is not None
        target.add_event(row["kind"], self._event_attrs(row), timestamp=_ns(row))

    def _dropped(self, row: dict[str, Any]) -> None:
        self._next_try_of(row)
        if not self._end_station(row.get("attempt"), "dropped", _ns(row)):
            assert self._segment is not None
            self._segment.add_event("dropped", self._event_attrs(row), timestamp=_ns(row))

    _HANDLERS: ClassVar[dict[str, Callable[[RunTracer, dict[str, Any]], None]]] = {
        "entered": _entered,
        "settled": _settled,
        "retry": _retry,
        "failed": _failed,
        "waiting": _waiting,
        "done": _stop,
        "cancelled": _stop,
        "interrupted": _stop,
        "progress": _note,
        "warning": _note,
        "dropped": _dropped,
    }


def _record_error(api: Any, span: Span, error: dict[str, Any], at: int) -> None:
    """What `span.record_exception` records, from the stored error (type, message, traceback)."""
    span.add_event(
        "exception",
        {
            "exception.type": str(error.get("type", "")),
            "exception.message": str(error.get("message", "")),
            "exception.stacktrace": str(error.get("traceback", "")),
            "exception.escaped": False,
        },
        timestamp=at,
    )
    span.set_status(api.Status(api.StatusCode.ERROR, str(error.get("message", ""))[:500]))


def _arm_atexit() -> None:
    """End the segments still open at exit (before the SDK's own exit hook flushes: atexit is LIFO)."""
    global _atexit_armed
    if not _atexit_armed:
        _atexit_armed = True
        atexit.register(_end_all)


def _end_all() -> None:
    for tracer in list(_open_segments):
        try:
            tracer.end_open()
        except Exception:  # exiting: a tracer's trouble must not hide another's spans
            pass
