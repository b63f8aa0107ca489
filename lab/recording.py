"""Recorded calls: what a station asked of the outside world, kept in the store and replayed.

A station's model requests (a pydantic-ai agent whose model is wrapped: `lab.recorded(agent)`, and
every delegated station's agent) and its calls of functions marked `@lab.recorded` are written to
the store's `calls` table (lab/store/calls.py) with the run, the checkpoint the station entered
from, the station try (`attempt`), the call's index, a digest of the request, the response and the
tokens. When a station runs again (a rewind, a fork, a retry, a resume) each call looks for a
recording of the same station, the same call index and the same request digest in the run's
lineage (the run itself and the runs it was forked from): found, its response is handed back
byte for byte (`replayed`); not found, the call is made for real and recorded (`live`).

`run.replay` chooses per run: `"auto"` (the default), `"strict"` (a call with no recording raises
`ReplayMissError` with a diff against the closest recorded request) or `"off"` (every call is
real, and recorded). A call can choose for itself (`@lab.recorded(replay="off")`,
`lab.recorded(agent, replay="strict")`), which wins over the run's. Each call is also a
`recorded` event (`run.events("recorded")`) saying live or replayed and the tokens saved.
Recordings are JSON; headers, API keys and other secrets are left out of them. docs/replay.md.
"""

from __future__ import annotations

import contextvars
import difflib
import functools
import hashlib
import inspect
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_type_hints

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from .errors import ArgumentError, ReplayMissError
from .events import running_run
from .gates import station_context
from .idempotent import visit_origin
from .store.calls import CallRecord

__all__ = (
    "ReplayMode",
    "REPLAY_MODES",
    "StationCalls",
    "Plan",
    "station_calls",
    "job_calls",
    "recorded",
    "recorded_function",
    "scrub",
    "digest",
    "lineage",
    "jsonable",
)

ReplayMode = Literal["auto", "strict", "off"]
REPLAY_MODES: tuple[str, ...] = ("auto", "strict", "off")

SECRET_MARKERS: tuple[str, ...] = (
    "api_key", "apikey", "api-key", "authorization", "auth_token", "access_token", "secret", "password",
    "headers", "cookie", "credential", "bearer",
)  # fmt: skip
"""A dict key that contains one of these (lower-cased) is left out of a recording, with its value."""

_lineages: dict[str, tuple[str, ...]] = {}


def check_mode(mode: Any, what: str) -> ReplayMode | None:
    """`mode` if it is a replay mode or None, else a clear error naming `what`."""
    if mode is not None and mode not in REPLAY_MODES:
        raise ArgumentError(f"{what}: replay is 'auto', 'strict' or 'off' (or None: the run's), got {mode!r}")
    return mode


def scrub(value: Any) -> Any:
    """`value` as JSON with every secret-looking key (`SECRET_MARKERS`) left out, recursively."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if not any(m in str(k).lower() for m in SECRET_MARKERS)}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """`value` as JSON data; what JSON cannot hold becomes `<TypeName>` (never its repr: it may hold a secret)."""
    return to_jsonable_python(value, fallback=lambda v: f"<{type(v).__name__}>")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(kind: str, name: str, request: Any) -> str:
    """The sha256 of a request's canonical JSON, with its kind and name."""
    return hashlib.sha256(canonical([kind, name, request]).encode()).hexdigest()


def lineage(store: Any, run_id: str) -> tuple[str, ...]:
    """`run_id` and the runs it was forked from, nearest first: the runs whose recordings it may replay."""
    found = _lineages.get(run_id)
    if found is not None:
        return found
    out: list[str] = []
    rid: str | None = run_id
    while rid is not None and rid not in out:
        out.append(rid)
        try:
            rid = store.get_run(rid).parent_run_id
        except Exception:  # a parent deleted since: the lineage stops there
            rid = None
    _lineages[run_id] = tuple(out)
    return _lineages[run_id]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _call_id() -> str:
    return f"{time.time_ns():x}-{os.urandom(4).hex()}"


@dataclass(slots=True)
class Plan:
    """What a call does: hand back `replayed` (its live record), or run for real (`replayed` is None)."""

    kind: str
    name: str
    index: int
    request: Any
    digest: str
    replayed: CallRecord | None
    started: float


class StationCalls:
    """The recorder of one station try (or one delegated job): counts its calls, finds recordings, records.

    `run` is the live `Run` when the calls happen inside its station (its mode applies and each call
    is a `recorded` event); a delegated job's recorder has only the run's id and the job's mode.
    """

    def __init__(
        self,
        store: Any,
        run_id: str,
        node_id: str,
        origin: int | None,
        *,
        run: Any = None,
        attempt: int | None = None,
        mode: ReplayMode = "auto",
    ):
        self.store = store
        self.run_id = run_id
        self.node_id = node_id
        self.origin = origin
        self.run = run
        self.attempt = attempt
        self.mode: ReplayMode = mode
        self.counts: dict[tuple[str, str], int] = {}
        self._recordings: list[CallRecord] | None = None

    # -- finding ---------------------------------------------------------------------------------

    def recordings(self) -> list[CallRecord]:
        """The live calls of this station in the run's lineage, newest first (read once per try)."""
        if self._recordings is None:
            self._recordings = self.store.recorded_calls(lineage(self.store, self.run_id), self.node_id)
        return self._recordings

    def _closest(self, kind: str, name: str, index: int) -> CallRecord | None:
        same = [r for r in self.recordings() if (r.kind, r.name) == (kind, name)]
        return next((r for r in same if r.call_index == index), same[0] if same else None)

    # -- the protocol ----------------------------------------------------------------------------

    def begin(self, kind: str, name: str, request: Any, mode: ReplayMode | None = None) -> Plan:
        """Number the call, and find its recording unless the mode is `off`; strict without one raises."""
        key = (kind, name)
        index = self.counts.get(key, 0) + 1
        self.counts[key] = index
        clean = scrub(jsonable(request))
        dig = digest(kind, name, clean)
        effective = mode or (getattr(self.run, "replay", None) if self.run is not None else None) or self.mode
        found = None
        if effective != "off":
            found = next(
                (
                    r
                    for r in self.recordings()
                    if (r.kind, r.name, r.call_index, r.digest) == (kind, name, index, dig)
                ),
                None,
            )
            if found is None and effective == "strict":
                raise self._miss(kind, name, index, clean)
        return Plan(kind, name, index, clean, dig, found, time.perf_counter())

    def finish_live(
        self, plan: Plan, response: Any, *, input_tokens: int | None = None, output_tokens: int | None = None
    ) -> CallRecord:
        """Record a live call's response (JSON, secrets left out) and its `recorded` event."""
        rec = CallRecord(
            call_id=_call_id(), run_id=self.run_id, node_id=self.node_id, checkpoint_seq=self.origin,
            attempt=self._attempt(), call_index=plan.index, kind=plan.kind, name=plan.name, digest=plan.digest,
            mode="live", request=plan.request, response=scrub(jsonable(response)), input_tokens=input_tokens,
            output_tokens=output_tokens, ms=(time.perf_counter() - plan.started) * 1000, created_at=_now(),
        )  # fmt: skip
        self.store.record_call(rec)
        if self._recordings is not None:
            self._recordings.insert(0, rec)
        self._event(rec, saved=0)
        return rec

    def finish_replayed(self, plan: Plan) -> Any:
        """Record that `plan`'s recording was handed back; returns the recorded response (JSON)."""
        src = plan.replayed
        assert src is not None
        rec = CallRecord(
            call_id=_call_id(), run_id=self.run_id, node_id=self.node_id, checkpoint_seq=self.origin,
            attempt=self._attempt(), call_index=plan.index, kind=plan.kind, name=plan.name, digest=plan.digest,
            mode="replayed", replayed_from=src.call_id, input_tokens=src.input_tokens, output_tokens=src.output_tokens,
            ms=(time.perf_counter() - plan.started) * 1000, created_at=_now(),
        )  # fmt: skip
        self.store.record_call(rec)
        self._event(rec, saved=src.tokens)
        return src.response

    # -- helpers ---------------------------------------------------------------------------------

    def _attempt(self) -> int | None:
        """The station try: the seq of this station's latest `entered` event (read once per try)."""
        if self.attempt is None and self.run is not None:
            try:
                _, tail = self.run.event_tail(16)
            except Exception:
                return None
            seqs = [e.seq for e in tail if e.kind == "entered" and e.node_id == self.node_id]
            self.attempt = max(seqs) if seqs else None
        return self.attempt

    def _event(self, rec: CallRecord, *, saved: int) -> None:
        if self.run is None:
            return
        payload = {
            "call": rec.call_id, "kind": rec.kind, "name": rec.name, "index": rec.call_index, "mode": rec.mode,
            "tokens": rec.tokens, "saved_tokens": saved, "ms": round(rec.ms or 0.0, 3),
        }  # fmt: skip
        self.run.record_event("recorded", node_id=self.node_id, payload=payload)

    def _miss(self, kind: str, name: str, index: int, request: Any) -> ReplayMissError:
        near = self._closest(kind, name, index)
        what = f"station {self.node_id!r} call {name!r} #{index} ({kind})"
        if near is None:
            diff = ""
            why = f"no recording of {what} exists in runs {list(lineage(self.store, self.run_id))}"
        else:
            old = json.dumps(near.request, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
            new = json.dumps(request, indent=1, sort_keys=True, ensure_ascii=False).splitlines()
            diff = "\n".join(
                difflib.unified_diff(
                    old,
                    new,
                    f"recorded (run {near.run_id}, call #{near.call_index})",
                    "this request",
                    lineterm="",
                    n=1,
                )
            )
            if len(diff) > 4000:
                diff = diff[:4000] + "\n... (diff cut at 4000 characters)"
            why = f"the request of {what} differs from the recorded one:\n{diff}"
        return ReplayMissError(
            f"replay='strict': {why}\nSet run.replay = 'auto' to call for real (and record it), or make the "
            "request what it was",
            node_id=self.node_id, name=name, index=index, diff=diff,
        )  # fmt: skip


job_calls: contextvars.ContextVar[StationCalls | None] = contextvars.ContextVar(
    "graph_lab_job_calls", default=None
)
"""The recorder of the delegated job running in this task (set by lab.agents.recorded_model)."""


def station_calls() -> StationCalls | None:
    """The recorder of the station try running now (made by its first call), a delegated job's, or None
    outside any run (a recorded call outside a station simply runs)."""
    ctx = station_context.get()
    if ctx is None:
        return job_calls.get()
    if ctx.calls is not None:
        return ctx.calls
    run = ctx.run if ctx.run is not None else running_run.get()
    if run is None:
        return None
    store = run.lab.store
    if not hasattr(store, "record_call"):
        return None
    origin = visit_origin(store, run.id, run.head, ctx.node_id, ctx.task)
    ctx.calls = StationCalls(store, run.id, ctx.node_id, origin, run=run)
    return ctx.calls


# -- recorded functions ------------------------------------------------------------------------


def recorded_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    replay: ReplayMode | None = None,
    result_type: Any = None,
) -> Callable[..., Any]:
    """`fn` (sync or async) recorded when a station calls it; outside a station it just runs."""
    if not callable(fn):
        raise ArgumentError(f"lab.recorded needs a function, a pydantic-ai Agent or Model, got {fn!r}")
    check_mode(replay, f"lab.recorded({getattr(fn, '__qualname__', fn)!r})")
    call_name = name or f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    codec = _FunctionCodec(fn, result_type)
    request, revive, dump = codec.request, codec.revive, codec.dump

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def acall(*args: Any, **kwargs: Any) -> Any:
            rec = station_calls()
            if rec is None:
                return await fn(*args, **kwargs)
            plan = rec.begin("function", call_name, request(args, kwargs), replay)
            if plan.replayed is not None:
                return revive(rec.finish_replayed(plan))
            value = await fn(*args, **kwargs)
            rec.finish_live(plan, dump(value))
            return value

        acall.__lab_recorded__ = call_name  # type: ignore[attr-defined]
        return acall

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        rec = station_calls()
        if rec is None:
            return fn(*args, **kwargs)
        plan = rec.begin("function", call_name, request(args, kwargs), replay)
        if plan.replayed is not None:
            return revive(rec.finish_replayed(plan))
        value = fn(*args, **kwargs)
        rec.finish_live(plan, dump(value))
        return value

    call.__lab_recorded__ = call_name  # type: ignore[attr-defined]
    return call


class _FunctionCodec:
    """A recorded function's request (its bound arguments) and its response (its return value) as JSON."""

    def __init__(self, fn: Callable[..., Any], result_type: Any):
        self.adapter = _result_adapter(fn, result_type)
        self.sig = _signature(fn)

    def request(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.sig is not None:
            try:
                bound = self.sig.bind(*args, **kwargs)
                bound.apply_defaults()
                return {"args": dict(bound.arguments)}
            except TypeError:
                pass
        return {"args": list(args), "kwargs": kwargs}

    def revive(self, value: Any) -> Any:
        return self.adapter.validate_python(value) if self.adapter is not None else value

    def dump(self, value: Any) -> Any:
        return self.adapter.dump_python(value, mode="json") if self.adapter is not None else value


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _result_adapter(fn: Callable[..., Any], result_type: Any) -> TypeAdapter[Any] | None:
    if result_type is not None:
        return TypeAdapter(result_type)
    try:
        hint = get_type_hints(fn).get("return")
    except Exception:
        return None
    if hint is None or hint is type(None):
        return None
    if inspect.iscoroutinefunction(fn) and getattr(hint, "__origin__", None) in (Awaitable,):
        return None
    try:
        return TypeAdapter(hint)
    except Exception:
        return None


def recorded(
    target: Any = None,
    /,
    *,
    name: str | None = None,
    replay: ReplayMode | None = None,
    result_type: Any = None,
) -> Any:
    """Record a station's calls of `target` and replay them when the station runs again (docs/replay.md).

    - `@lab.recorded` (or `@lab.recorded(name=..., replay=..., result_type=...)`) on a function, sync
      or async: a tool, an HTTP client call. Its arguments are the request, its return value (JSON, or
      what `result_type` / its return annotation dumps) the response.
    - `lab.recorded(agent)`: the pydantic-ai `Agent`'s model is wrapped so every model request it makes
      inside a station is recorded (returns the agent). `lab.recorded(model)` wraps a `Model`.

    `replay=` ("auto", "strict", "off") overrides the run's `run.replay` for these calls.
    """
    check_mode(replay, "lab.recorded")
    if target is None:
        return lambda fn: recorded(fn, name=name, replay=replay, result_type=result_type)
    if any(c.__module__.startswith("pydantic_ai") for c in type(target).__mro__):
        from .agents.recorded_model import record_agent

        return record_agent(target, replay=replay)
    return recorded_function(target, name=name, replay=replay, result_type=result_type)
