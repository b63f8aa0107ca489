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
import itertools
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, get_type_hints

from pydantic import TypeAdapter
from pydantic_core import to_json, to_jsonable_python

from .errors import ArgumentError, ReplayMissError
from .events import running_run
from .gates import station_context
from .store.calls import CallRecord, call_record
from .store.journal import Encoded

__all__ = (
    "ReplayMode",
    "REPLAY_MODES",
    "StationCalls",
    "Plan",
    "station_calls",
    "job_calls",
    "job_started_here",
    "recorded_function",
    "scrub",
    "digest",
    "SETS",
    "sets_sorted",
    "lineage",
    "jsonable",
    "encode",
    "known_calls",
    "Recordings",
    "scrubbed",
    "note_new_run",
    "surface_job_calls",
)

ReplayMode = Literal["auto", "strict", "off"]
REPLAY_MODES: tuple[str, ...] = ("auto", "strict", "off")

SECRET_MARKERS: tuple[str, ...] = (
    "api_key", "apikey", "api-key", "authorization", "auth_token", "access_token", "secret", "password",
    "headers", "cookie", "credential", "bearer",
)  # fmt: skip
"""A dict key that contains one of these (lower-cased) is left out of a recording, with its value."""

_lineages: dict[str, tuple[str, ...]] = {}
CallKey = tuple[str, str, str, int, str]
"""(station, kind, name, call index, request digest): what a replay matches on."""


class Recordings:
    """The live calls a run may replay (its own and its fork ancestors'), by what a replay matches on.

    Calls read from the store are `CallRecord`s (`by_key`); a call recorded in this process is kept as the
    journal row it was written as (`rows`) and made a `CallRecord` only when it is replayed or shipped to a
    worker (`get`, `of_station`): most recordings are never replayed, and building the record cost a
    recorded call more than its journal row did."""

    __slots__ = ("by_key", "rows")

    def __init__(self, calls: list[CallRecord] | None = None):
        self.by_key: dict[CallKey, CallRecord] = {}
        self.rows: dict[CallKey, dict[str, Any]] = {}
        for rec in reversed(calls or ()):  # oldest first, so the newest recording of a key wins
            self.add(rec)

    def add(self, rec: CallRecord) -> None:
        key = (rec.node_id, rec.kind, rec.name, rec.call_index, rec.digest)
        self.rows.pop(key, None)
        self.by_key[key] = rec

    def add_row(self, key: CallKey, row: dict[str, Any]) -> None:
        """A live call this process just recorded, as its journal row (`call_row`'s keys)."""
        self.by_key.pop(key, None)
        self.rows[key] = row

    def get(self, key: CallKey) -> CallRecord | None:
        """The recording a call with this key replays, or None."""
        found = self.by_key.get(key)
        if found is None and self.rows:
            row = self.rows.pop(key, None)
            if row is not None:
                found = self.by_key[key] = call_record(row)
        return found

    def of_station(self, node_id: str) -> list[CallRecord]:
        """Every recording of station `node_id`."""
        for key in [k for k in self.rows if k[0] == node_id]:
            self.get(key)
        return [c for key, c in self.by_key.items() if key[0] == node_id]

    def copy(self) -> Recordings:
        out = Recordings()
        out.by_key = dict(self.by_key)
        out.rows = dict(self.rows)
        return out


_known: dict[str, Recordings] = {}
"""Run id -> the recordings of its lineage this process knows: read once per run, then kept up to date
with the calls it records itself (the process stepping a run is its only writer)."""
KNOWN_RUNS = 256
"""How many runs' recordings a process keeps in memory (the least recently loaded go first)."""


def note_new_run(run_id: str, parent_run_id: str | None) -> None:
    """A run this process just created (`Run.create`): a new run has no recordings; a fork has its
    parent's, when this process knows them. Either way its first recorded call reads nothing."""
    if parent_run_id is None:
        _remember(run_id, Recordings())
    elif (parent := _known.get(parent_run_id)) is not None:
        _remember(run_id, parent.copy())


_job_calls_here: dict[tuple[str, str], list[tuple[CallRecord, int]]] = {}
"""The calls each delegated job run in this process recorded, per (run, station), until the station
takes its job's outcome in (`surface_job_calls`): then no read of the store is needed, and a read
folds the journal (tens of ms a station on DuckDB)."""


def job_started_here(run_id: str, node_id: str) -> None:
    """A delegated job of `run_id`'s station `node_id` starts in this process: its calls are kept in memory."""
    _job_calls_here[(run_id, node_id)] = []


def _remember(run_id: str, recordings: Recordings) -> Recordings:
    _known[run_id] = recordings
    while len(_known) > KNOWN_RUNS:
        del _known[next(iter(_known))]
    return recordings


def known_calls(store: Any, run_id: str) -> Recordings:
    """The recordings a run may replay: one read the first time this process asks about `run_id`,
    then from memory."""
    found = _known.get(run_id)
    return found if found is not None else _remember(run_id, Recordings(store.lineage_calls(run_id)))


def check_mode(mode: Any, what: str) -> ReplayMode | None:
    """`mode` if it is a replay mode or None, else a clear error naming `what`."""
    if mode is not None and mode not in REPLAY_MODES:
        raise ArgumentError(f"{what}: replay is 'auto', 'strict' or 'off' (or None: the run's), got {mode!r}")
    return mode


_SECRET = re.compile("|".join(re.escape(m) for m in SECRET_MARKERS))


def has_marker(data: bytes) -> bool:
    """A secret marker anywhere in JSON text `data` (a key or not), as `scrub` lower-cases a key: the
    text lower-cased once, then a C-speed substring search per marker. (A case-insensitive regex of the
    twelve markers ran ~50x slower: sre tries each alternative at every character.)"""
    return any(map(data.decode().lower().__contains__, SECRET_MARKERS))  # the loop in C


def scrubbed(data: bytes) -> bytes:
    """Canonical JSON text `data` without secret-looking keys: `data` itself (no copy, no walk) unless a
    marker appears in it; then it is decoded, walked (`scrub`) and encoded again."""
    if not has_marker(data):
        return data
    return to_json(scrub(json.loads(data)))


def scrub(value: Any, drop: frozenset[str] = frozenset()) -> Any:
    """`value` (JSON data) with every secret-looking key (`SECRET_MARKERS`) left out, recursively, and
    the keys in `drop` and those starting with `_` too when `drop` is given."""
    if isinstance(value, dict):
        secret = _SECRET.search
        return {
            k: scrub(v, drop) if isinstance(v, (dict, list)) else v
            for k, v in value.items()
            if not secret(str(k).lower()) and not (drop and (k in drop or str(k).startswith("_")))
        }
    if isinstance(value, list):
        return [scrub(v, drop) if isinstance(v, (dict, list)) else v for v in value]
    return value


def _type_name(value: Any) -> str:
    return f"<{type(value).__name__}>"


def jsonable(value: Any) -> Any:
    """`value` as JSON data; what JSON cannot hold becomes `<TypeName>` (never its repr: it may hold a secret)."""
    return to_jsonable_python(value, fallback=_type_name)


def encode(value: Any) -> bytes:
    """`value`'s canonical JSON text in one pass, as pydantic-core writes it (compact; keys in their
    order, which pydantic's dumps and a program's own dicts keep from one run to the next); what JSON
    cannot hold becomes `"<TypeName>"`, as in `jsonable`."""
    return to_json(value, fallback=_type_name)


SETS = (set, frozenset)


def sets_sorted(value: Any) -> Any:
    """`value` with every set of two or more items in it written as a sorted list (through dicts, lists
    and tuples; not inside models or dataclasses); a value without one is returned as it is.

    pydantic-core writes a set in its iteration order, and a set of strings iterates in an order that
    depends on the process's string hashing (`PYTHONHASHSEED`, random per process): the same request
    would write other bytes, and digest otherwise, after a kernel restart, and a replay would miss.
    Sorted, it writes the same bytes in every process; a set of none or one item writes what it always
    wrote, so recordings made before still match."""
    kind = type(value)
    if kind in SETS:
        if len(value) < 2:
            return value
        items = [sets_sorted(item) for item in value]
        try:
            return sorted(items)
        except TypeError:  # items of mixed or unordered types: ordered by their own JSON text
            return sorted(items, key=encode)
    if kind is dict:
        out = {k: sets_sorted(v) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if kind is list or kind is tuple:
        items = [sets_sorted(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else kind(items)
    return value


def digest(kind: str, name: str, data: bytes) -> str:
    """The sha256 of a request's canonical JSON text `data`, with its kind and name (`kind NUL name NUL data`)."""
    start = _digest_starts.get((kind, name))
    if start is None:
        start = hashlib.sha256(f"{kind}\x00{name}\x00".encode())
        if len(_digest_starts) < 1024:
            _digest_starts[(kind, name)] = start
    h = start.copy()
    h.update(data)
    return h.hexdigest()


_digest_starts: dict[tuple[str, str], Any] = {}
"""The sha256 state after `kind NUL name NUL`, per (kind, name): each digest copies it and goes on."""


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


_PROCESS = os.urandom(4).hex()
_counter = itertools.count()


def _call_id() -> str:
    """A time-ordered id, unique across processes (a random prefix per process, then a counter)."""
    return f"{time.time_ns():x}-{_PROCESS}-{next(_counter):x}"


@dataclass(slots=True)
class Plan:
    """What a call does: hand back `replayed` (its live record), or run for real (`replayed` is None)."""

    kind: str
    name: str
    index: int
    request: Encoded
    """The request's canonical JSON text, secrets left out: what its digest was taken over, and what is stored."""
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

    # -- finding ---------------------------------------------------------------------------------

    def recording(self, kind: str, name: str, index: int, dig: str) -> CallRecord | None:
        """The newest live call of this station in the run's lineage that a call with this key replays."""
        return known_calls(self.store, self.run_id).get((self.node_id, kind, name, index, dig))

    def _closest(self, kind: str, name: str, index: int) -> CallRecord | None:
        runs = lineage(self.store, self.run_id)
        same = [r for r in self.store.recorded_calls(runs, self.node_id) if (r.kind, r.name) == (kind, name)]
        return next((r for r in same if r.call_index == index), same[0] if same else None)

    # -- the protocol ----------------------------------------------------------------------------

    def begin(self, kind: str, name: str, request: bytes, mode: ReplayMode | None = None, *, clean: bool = False) -> Plan:
        """Number the call, and find its recording unless the mode is `off`; strict without one raises.
        `request`: the request's canonical JSON text, as pydantic-core writes it (`encode`, a serializer's
        `to_json`). That one text is secret-checked, digested and stored: the request is serialized once.
        `clean`: the caller found no secret marker anywhere in `request` (`has_marker`), so it is not searched again."""
        started = time.perf_counter()
        key = (kind, name)
        index = self.counts.get(key, 0) + 1
        self.counts[key] = index
        data = request if clean else scrubbed(request)
        dig = digest(kind, name, data)
        effective = mode or (getattr(self.run, "replay", None) if self.run is not None else None) or self.mode
        found = None
        if effective != "off":
            found = self.recording(kind, name, index, dig)
            if found is None and effective == "strict":
                raise self._miss(kind, name, index, json.loads(data))
        return Plan(kind, name, index, Encoded(data), dig, found, started)

    def finish_live(
        self,
        plan: Plan,
        response: bytes,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
    ) -> None:
        """Record a live call's response (its canonical JSON text, as pydantic-core writes it; secrets
        left out) and its `recorded` event. The request and response go into the journal row as
        the text they are (`Encoded`), not encoded again; the row is built at once (`call_row`'s keys),
        with no `CallRecord` (made from the row if the call is ever replayed here)."""
        ms = (time.perf_counter() - plan.started) * 1000
        row = {
            "t": "call", "run_id": self.run_id, "call_id": _call_id(), "node_id": self.node_id,
            "checkpoint_seq": self.origin, "call_index": plan.index, "kind": plan.kind, "name": plan.name,
            "digest": plan.digest, "mode": "live", "replayed_from": None, "request": plan.request,
            "response": Encoded(scrubbed(response)), "input_tokens": input_tokens, "output_tokens": output_tokens,
            "ms": ms, "created_at": time.time(),
        }  # fmt: skip
        known = _known.get(self.run_id)
        if known is not None:
            known.add_row((self.node_id, plan.kind, plan.name, plan.index, plan.digest), row)
        self._record(row, (input_tokens or 0) + (output_tokens or 0), 0)

    def finish_replayed(self, plan: Plan) -> Any:
        """Record that `plan`'s recording was handed back; returns the recorded response: its JSON text
        (`Encoded`) when this process recorded it, its JSON data when it was read from the store."""
        src = plan.replayed
        assert src is not None
        row = {
            "t": "call", "run_id": self.run_id, "call_id": _call_id(), "node_id": self.node_id,
            "checkpoint_seq": self.origin, "call_index": plan.index, "kind": plan.kind, "name": plan.name,
            "digest": plan.digest, "mode": "replayed", "replayed_from": src.call_id, "request": None,
            "response": None, "input_tokens": src.input_tokens, "output_tokens": src.output_tokens,
            "ms": (time.perf_counter() - plan.started) * 1000, "created_at": time.time(),
        }  # fmt: skip
        self._record(row, src.tokens, src.tokens)
        return src.response

    # -- helpers ---------------------------------------------------------------------------------

    def _record(self, row: dict[str, Any], tokens: int, saved: int) -> None:
        """Journal the call (`row`, `call_row`'s keys): inside a run, its row and its `recorded` event in
        one write, held for the station's next write (its settlement, failure or park); a job's call is
        written through."""
        if self.run is None:
            rec = call_record(row, attempt=self.attempt)
            self.store.record_call(rec, sync=True)
            here = _job_calls_here.get((self.run_id, self.node_id))
            if here is not None:
                here.append((rec, saved))
            return
        payload = {
            "call": row["call_id"], "kind": row["kind"], "name": row["name"], "index": row["call_index"],
            "mode": row["mode"], "tokens": tokens, "saved_tokens": saved, "ms": round(row["ms"], 3),
        }  # fmt: skip
        self.run.record_event("recorded", node_id=self.node_id, payload=payload, sync=False, rows=(row,))

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
    job = job_calls.get()  # a delegated job's task: it may have copied its station's context
    if job is not None:
        return job
    ctx = station_context.get()
    if ctx is None:
        return None
    if ctx.calls is not None:
        return ctx.calls
    run = ctx.run if ctx.run is not None else running_run.get()
    if run is None:
        return None
    store = run.lab.store
    if not hasattr(store, "record_call"):
        return None
    ctx.calls = StationCalls(
        store, run.id, ctx.node_id, run.head, run=run
    )  # no read: the head the try entered from
    return ctx.calls


def surface_job_calls(run: Any, node_id: str) -> None:
    """A delegated station took its job's outcome in: each call its job recorded (rows of `calls` written
    while the run was parked, with no `recorded` event: a station's own calls and events are written
    together) becomes a `recorded` event of the run now (`"job": true`), held for the station's
    settlement like its own calls'. Each call once: a call that has its event is skipped."""
    run = run if run is not None else running_run.get()
    store = getattr(getattr(run, "lab", None), "store", None)
    if store is None or not hasattr(store, "calls"):
        return
    here = _job_calls_here.pop((run.id, node_id), None)
    if here is not None:  # the job ran in this process: its calls are known, nothing to read
        for c, saved in here:
            _surface(run, node_id, c, saved)
        return
    new = [c for c in store.calls(run.id) if c.node_id == node_id]
    if not new:
        return
    seen = {(e.payload or {}).get("call") for e in store.events(run.id, kind="recorded")}
    for c in new:
        if c.call_id not in seen:
            _surface(run, node_id, c, c.tokens if c.mode == "replayed" else 0)


def _surface(run: Any, node_id: str, c: CallRecord, saved: int) -> None:
    payload = {
        "call": c.call_id, "kind": c.kind, "name": c.name, "index": c.call_index, "mode": c.mode,
        "tokens": c.tokens, "saved_tokens": saved, "ms": round(c.ms or 0.0, 3), "job": True,
    }  # fmt: skip
    run.record_event("recorded", node_id=node_id, payload=payload, sync=False)


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

    def request(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
        """The call's bound arguments as JSON text (a set in them sorted: `sets_sorted`)."""
        if self.sig is not None:
            try:
                bound = self.sig.bind(*args, **kwargs)
                bound.apply_defaults()
                return encode({"args": sets_sorted(dict(bound.arguments))})
            except TypeError:
                pass
        return encode({"args": sets_sorted(list(args)), "kwargs": sets_sorted(kwargs)})

    def revive(self, value: Any) -> Any:
        if type(value) is Encoded:
            value = value.value()
        return self.adapter.validate_python(value) if self.adapter is not None else value

    def dump(self, value: Any) -> bytes:
        """The return value's JSON text (through its adapter, when it has one)."""
        return self.adapter.dump_json(value) if self.adapter is not None else encode(value)


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
