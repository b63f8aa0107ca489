"""The journal's row encoder: orjson where it writes what pydantic-core wrote, pydantic-core elsewhere.

Scenarios:
- any row of JSON's own values (unicode and control characters, 64-bit and larger ints, floats
  including NaN and infinities, None, nested dicts and lists) is encoded to the very bytes the
  pydantic-core encoder alone writes (hypothesis), and so is a row holding values orjson refuses
  or writes otherwise (a str subclass, a datetime, a dataclass, bytes, int keys, `Encoded` JSON);
- a lone surrogate is escaped in a payload and refused in state exactly as before;
- a run whose state holds floats, unicode, nested values and None reads back equal, field by
  field, from DuckDB (orjson lines folded by `read_json`) and from PostgreSQL (`graphlab_write`).
"""

from __future__ import annotations

import datetime as dt
import enum
import math
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab
from lab.store import journal_lines as journal_module
from lab.store.journal import Encoded, Journal, UnstorableValueError

# -- the encoder against pydantic-core's, byte for byte ---------------------------------------


def _both(tmp_path, rows: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> tuple[bytes | str, bytes | str]:
    """(this encoder's bytes, pydantic-core's alone), each from a fresh journal; an error as its message."""

    def encode(name: str) -> bytes | str:
        j = Journal(str(tmp_path / name))
        try:
            return j.encode([dict(r) for r in rows])
        except UnstorableValueError as exc:
            return str(exc)
        finally:
            j.close()

    mine = encode("orjson.journal")

    def refuse(*args: Any) -> bytes:
        raise TypeError("pydantic-core's encoder only")

    with monkeypatch.context() as m:
        m.setattr(journal_module, "_compiled_dumps", refuse)
        theirs = encode("pydantic.journal")
    return mine, theirs


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True, width=64)
    | st.text()
    | st.sampled_from(["é😀", "\u2028\u2029", "\x1f\x7f", '"\\/', "</script>", "null", ""])
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.dictionaries(st.text(max_size=10), _values, max_size=6), min_size=1, max_size=3))
def test_a_row_of_json_values_is_written_as_pydantic_core_writes_it(tmp_path_factory, rows) -> None:
    tmp = tmp_path_factory.getbasetemp()  # encoding writes nothing: every example may share the files
    with pytest.MonkeyPatch.context() as mp:
        mine, theirs = _both(tmp, rows, mp)
    assert mine == theirs


class Colour(enum.Enum):
    RED = "red"


class Name(str):
    pass


@dataclass
class Point:
    x: float
    y: float


@pytest.mark.parametrize(
    "value",
    [
        Colour.RED,
        uuid.UUID(int=7),
        Name("a str subclass"),
        dt.datetime(2026, 12, 6, 3, 4, 5, 678901, tzinfo=dt.UTC),
        dt.date(2026, 12, 6),
        Point(1.5, -0.0),
        b"bytes",
        {1: "an int key"},
        (1, "a tuple"),
        2**80,
        math.nan,
        [math.inf, -math.inf],
        {"deep": [{"er": [None, 5e-324, 1e308]}]},
        Encoded(b'{"already":"encoded"}'),
    ],
    ids=repr,
)
def test_a_value_orjson_would_write_otherwise_takes_pydantic_core(tmp_path, monkeypatch, value) -> None:
    rows = [
        {"t": "ev", "run_id": "r", "seq": 1, "kind": "warning", "payload": {"v": value}, "created_at": 1.5},
        {"t": "cp", "run_id": "r", "seq": 2, "state": value, "next": [], "created_at": 2.5},
    ]
    if type(value) is Encoded:  # only a row's top-level value may be Encoded
        rows[0]["payload"] = value
    mine, theirs = _both(tmp_path, rows, monkeypatch)
    assert mine == theirs


def test_a_lone_surrogate_is_escaped_in_a_payload_and_refused_in_state(tmp_path, monkeypatch) -> None:
    payload = [{"t": "ev", "run_id": "r", "seq": 1, "kind": "warning", "payload": {"file": "caf\udce9"}}]
    mine, theirs = _both(tmp_path, payload, monkeypatch)
    assert isinstance(mine, bytes) and mine == theirs and b"\\\\udce9" in mine
    state = [{"t": "cp", "run_id": "r", "seq": 2, "state": {"file": "caf\udce9"}}]
    mine, theirs = _both(tmp_path, state, monkeypatch)
    assert isinstance(mine, str) and mine == theirs and "state.file" in mine


def test_the_usual_station_rows_are_written_by_orjson(tmp_path, monkeypatch) -> None:
    """The hot path's rows hold no None: orjson's line is the one written (pydantic-core is not called)."""
    rows = [
        {"t": "cp", "run_id": "a" * 32, "seq": 7, "parent_seq": 6, "status": "running", "state": {"count": 7, "limit": 500},
         "next": [{"node_id": "Loop", "fields": {}}], "created_at": 1796527939.2409928},
        {"t": "ev", "run_id": "a" * 32, "seq": 14, "kind": "settled", "node_id": "Loop", "attempt": 13, "checkpoint_seq": 7,
         "payload": {"ms": 0.031, "next": ["Loop"]}, "created_at": 1796527939.2409928},
        {"t": "ev", "run_id": "a" * 32, "seq": 15, "kind": "entered", "node_id": "Loop", "attempt": 15, "checkpoint_seq": 7,
         "payload": {}, "created_at": 1796527939.25},
    ]

    def no_pydantic(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("pydantic-core's to_json was called for a row orjson writes")

    expected = _both(tmp_path, rows, monkeypatch)[1]
    monkeypatch.setattr(journal_module, "to_json", no_pydantic)
    j = Journal(str(tmp_path / "hot.journal"))
    try:
        assert j.encode([dict(r) for r in rows]) == expected
    finally:
        j.close()



def test_an_entered_or_settled_line_without_the_null_count_is_still_pydantic_cores(tmp_path, monkeypatch) -> None:
    """The two lab-made event kinds skip the NaN test: with a None, `null` in a name and the clock's
    floats their lines still equal pydantic-core's, and a NaN in any other row is still caught."""
    rows = [
        {"t": "ev", "run_id": "r" * 32, "seq": 0, "kind": "entered", "node_id": "nullable", "attempt": 0,
         "checkpoint_seq": None, "payload": {}, "created_at": 1796527939.2409928},
        {"t": "ev", "run_id": "r" * 32, "seq": 1, "kind": "settled", "node_id": "nullable", "attempt": 0,
         "checkpoint_seq": 0, "payload": {"ms": 0.001, "next": ["null", "Loop"], "task": None}, "created_at": 1e-7},
        {"t": "ev", "run_id": "r" * 32, "seq": 2, "kind": "warning", "node_id": "nullable", "attempt": 0,
         "checkpoint_seq": 0, "payload": {"x": math.nan}, "created_at": 2.5},
    ]
    mine, theirs = _both(tmp_path, rows, monkeypatch)
    assert mine == theirs
    assert isinstance(mine, bytes) and b'"x":NaN' in mine and mine.count(b"null") == 6  # 3 names, 2 None, one "null" in a list

# -- both stores read the same ----------------------------------------------------------------


@dataclass
class Mixed:
    n: int = 0
    x: float = 0.0
    name: str = ""
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    maybe: int | None = None


_NAMES = ["é😀", "\u2028 line\u2029", "tab\there \x1f", 'quote " back \\ slash /', "null"]


@dataclass
class Mix(BaseNode[Mixed, None, float]):
    label: str = "start"

    async def run(self, ctx: GraphRunContext[Mixed, None]) -> Mix | End[float]:
        s = ctx.state
        s.n += 1
        s.x = [0.1 * s.n, 1e300, -0.0, 5e-324, 123456789.123456789][s.n % 5]
        s.name = _NAMES[s.n % len(_NAMES)]
        s.tags.append(s.name)
        s.extra[f"k{s.n}"] = {"f": s.x, "list": [s.n, None, True, 2**62]}
        s.maybe = None if s.n % 2 else s.n
        return End(s.x) if s.n >= 6 else Mix(label=_NAMES[s.n % len(_NAMES)])


def _same_numbers(got: Any, expected: Any) -> bool:
    """Equal JSON, a number equal to the float it was (PostgreSQL's `numeric` gives 10**300 back for 1e300)."""
    if isinstance(expected, float) and isinstance(got, int | float) and type(got) is not bool:
        return float(got) == expected
    if isinstance(expected, dict) and isinstance(got, dict):
        return got.keys() == expected.keys() and all(_same_numbers(got[k], expected[k]) for k in expected)
    if isinstance(expected, list) and isinstance(got, list):
        return len(got) == len(expected) and all(map(_same_numbers, got, expected))
    return type(got) is type(expected) and got == expected


def test_a_run_of_floats_unicode_and_nested_state_reads_back_equal(location) -> None:
    """DuckDB folds orjson's lines; PostgreSQL stores pydantic-core's: each reads back every state as set."""
    lab = Lab(location)
    try:
        g = lab.graph("mixed_json", state_type=Mixed, output_type=float)
        g.node(Mix)
        run = g.start(Mix(), state=Mixed())
        seen: list[dict[str, Any]] = []
        while run.status not in ("done", "failed"):
            run.step()
            seen.append(asdict(run.state))
        assert run.status == "done", run.error
        run_id = run.id
    finally:
        lab.close()  # DuckDB: the journal is folded into the tables by `read_json`
    lab = Lab(location)
    try:
        stored = lab.read(run_id)
        history = stored.history()
        assert len(history) == len(seen) + 1
        for i, expected in enumerate(seen, start=1):
            got = stored.state_at(history[i].seq)
            if location.startswith("postgresql"):
                # jsonb keeps numbers as `numeric`: no -0.0, and 1e300 reads back as the int 10**300
                assert _same_numbers(got, expected), (got, expected)
            else:  # DuckDB: the JSON values exactly, -0.0 and 1e300 as floats
                assert got == expected
                assert all(type(a) is type(b) for a, b in zip(got.values(), expected.values(), strict=True))
                assert math.copysign(1.0, got["x"]) == math.copysign(1.0, expected["x"])
            if i < len(seen):  # the next station's field, a string of each kind in turn
                assert [p.fields for p in history[i].next] == [{"label": _NAMES[i % len(_NAMES)]}]
        assert _same_numbers(stored.output, seen[-1]["x"])
    finally:
        lab.close()


# -- a PostgreSQL boundary in one orjson call (`plain_json`) ------------------------------------


def _row_by_row(rows: list[dict[str, Any]]) -> bytes | None:
    try:
        return b"[" + b",".join(journal_module.dumps(r) for r in rows) + b"]"
    except UnstorableValueError:
        return None


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.dictionaries(st.text(max_size=10), _values, max_size=6), min_size=1, max_size=3))
def test_a_boundary_in_one_call_is_the_rows_bytes_or_nothing(rows) -> None:
    """The PostgreSQL store sends a boundary's rows as one JSON array: by one orjson call when it holds
    only JSON's own values and no null, else row by row. The one call writes the same bytes or declines."""
    blob = journal_module.plain_json(rows)
    if blob is not None:
        assert blob == _row_by_row(rows)
        assert b"null" not in blob


@pytest.mark.parametrize(
    "value",
    [None, math.nan, math.inf, 2**80, {1: "an int key"}, Name("a str subclass"), dt.date(2026, 12, 6),
     Point(1.5, -0.0), Encoded(b'{"already":"encoded"}'), "caf\udce9", "null"],
    ids=repr,
)
def test_a_value_one_call_would_write_otherwise_is_declined(value) -> None:
    row = {"t": "cp", "run_id": "r", "seq": 2, "state": {"v": value}, "next": [], "created_at": 2.5}
    assert journal_module.plain_json([row]) is None
    station = {"t": "ev", "run_id": "r", "seq": 3, "kind": "settled", "payload": {"ms": 0.5}, "created_at": 2.5}
    assert journal_module.plain_json([station]) == _row_by_row([station])
