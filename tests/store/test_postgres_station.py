"""A station's boundary on PostgreSQL goes to `graphlab_station` in typed parameters (postgres_station.py);
every other write to `graphlab_write`. Both must leave the same tables, and an older store gains the
function on open."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab import Lab
from lab.errors import CheckpointError
from lab.store import postgres_store
from lab.store.boundary import expand
from lab.store.postgres_station import STATION_FUNCTION_SOURCE, boundary_params, station_params
from tests.store.graphs import Count, Tally, declare_tally

pytestmark = pytest.mark.slow


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on this process's stores send every boundary to `graphlab_write` (as an older Graph Lab)."""
    monkeypatch.setattr(postgres_store, "station_params", lambda rows: None)
    monkeypatch.setattr(postgres_store, "boundary_params", lambda row: None)


def _tables(url: str, run_id: str) -> list[list[tuple[Any, ...]]]:
    """The run's checkpoints, events and head, without the run id."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        cps = con.execute("SELECT * FROM checkpoints WHERE run_id = %s ORDER BY seq", [run_id]).fetchall()
        evs = con.execute("SELECT * FROM events WHERE run_id = %s ORDER BY seq", [run_id]).fetchall()
        head = con.execute("SELECT status, head_seq, output, error, updated_at FROM runs WHERE run_id = %s", [run_id]).fetchall()
    return [[r[1:] for r in cps], [r[1:] for r in evs], head]


def _runs(store: Any) -> tuple[str, str]:
    """Two new runs, stored alike (a `run` row each, the same times)."""
    a, b = f"run-{uuid.uuid4().hex}", f"run-{uuid.uuid4().hex}"
    new = {"t": "run", "graph_key": "tally", "revision": 1, "digest": "d", "status": "created", "durability": "step",
           "created_at": 1.7e9, "updated_at": 1.7e9}  # fmt: skip
    store.write([{**new, "run_id": a}, {**new, "run_id": b}])
    return a, b


def _write_both(store: Any, a: str, b: str, rows: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """`rows` to run `a` as this lab writes them, and to run `b` through `graphlab_write` only: each
    outcome (None, or the exception's type)."""
    outcomes = []
    for run_id, general in ((a, False), (b, True)):
        with monkeypatch.context() as m:
            if general:
                _general(m)
            try:
                store.write([{**r, "run_id": run_id} for r in rows])
                outcomes.append(None)
            except Exception as exc:  # both paths must fail alike, and write nothing
                outcomes.append(type(exc))
    return outcomes[0], outcomes[1]


@pytest.fixture
def store(pg_url: str) -> Iterator[Any]:
    lab = Lab(pg_url)
    yield lab.store
    lab.close()


def _cp(seq: Any, **kw: Any) -> dict[str, Any]:
    row = {"t": "cp", "run_id": "?", "seq": seq, "parent_seq": seq - 1, "status": "running",
           "state": {"count": seq, "limit": 9}, "next": [{"node": "Count", "data": {}}], "created_at": 1.7e9 + seq / 7}  # fmt: skip
    row.update(kw)
    return {k: v for k, v in row.items() if v is not ...}


def _ev(kind: Any, guess: int, **kw: Any) -> dict[str, Any]:
    row = {"t": "ev", "run_id": "?", "seq": guess, "kind": kind, "node_id": "Count", "attempt": guess, "checkpoint_seq": 1,
           "payload": {"ms": 0.012, "next": ["Count"]}, "created_at": 1.7e9 + (guess if type(guess) is int else 0) / 3}  # fmt: skip
    row.update(kw)
    return {k: v for k, v in row.items() if v is not ...}


SHAPES: list[tuple[str, list[dict[str, Any]], bool]] = [
    ("a station: checkpoint, settled, entered", [_cp(1), _ev("settled", 1), _ev("entered", 2, payload={})], True),
    ("a drive's last: checkpoint, settled", [_cp(2), _ev("settled", 3)], True),
    ("the end: output, counters, done", [_cp(3, status="done", output={"v": 3}, counters={"steps": 3}), _ev("settled", 4),
                                          _ev("done", 5, payload={"output": {"v": 3}}, attempt=None)], True),  # fmt: skip
    ("the guess too high", [_cp(4), _ev("settled", 90), _ev("entered", 91)], True),
    ("the guess too low", [_cp(5), _ev("settled", 0), _ev("entered", -5)], True),
    ("no guess", [_cp(6), _ev("settled", ...), _ev("entered", ...)], True),
    ("keys left out", [_cp(7, parent_seq=...), _ev("settled", 8, node_id=..., attempt=..., checkpoint_seq=..., payload=...)], True),
    ("None values", [_cp(8, parent_seq=None, output=None, counters=None), _ev("entered", 9, node_id=None, payload=None)], True),
    ("an int time", [_cp(9, created_at=1_700_000_009), _ev("settled", 10, created_at=1_700_000_010)], True),
    ("the same checkpoint again", [_cp(9, created_at=1_700_000_009), _ev("warning", 11)], True),
    ("JSON text, numbers, unicode", [_cp(10, state="ü→✓", next=[1.5, -2, 10**18, True]), _ev("settled", 12, payload=[])], True),
    ("a null inside", [_cp(11, state={"note": None}), _ev("settled", 13)], False),
    ("a NaN inside", [_cp(12, state={"x": math.nan}), _ev("settled", 14)], False),
    ("an int beyond 64 bits", [_cp(13, state=[2**70]), _ev("settled", 15)], False),
    ("a seq beyond bigint", [_cp(2**63), _ev("settled", 16)], False),
    ("a float seq", [_cp(14.0), _ev("settled", 17)], False),
    ("a NUL in data", [_cp(15, state="a\x00b"), _ev("settled", 18)], False),
    ("a NUL in a payload", [_cp(16), _ev("settled", 19, payload={"m": "a\x00b"})], False),
    ("a NUL in a node id", [_cp(17), _ev("settled", 20, node_id="a\x00b")], False),
    ("a lone surrogate", [_cp(18), _ev("settled", 21, node_id="\ud800")], False),
    ("an infinite time", [_cp(19, created_at=math.inf), _ev("settled", 22)], False),
    ("a key beyond a station's", [_cp(20, updated_at=1.7e9), _ev("settled", 23)], False),
    ("an update row", [_cp(21), {"t": "upd", "run_id": "?", "status": "running", "head_seq": 21}], False),
    ("events first", [_ev("entered", 24), _cp(22)], False),
    ("three events", [_cp(23), _ev("settled", 25), _ev("entered", 26), _ev("warning", 27)], False),
    ("a checkpoint alone", [_cp(24)], False),
    ("no event kind", [_cp(25), _ev(None, 28)], False),
    ("a different checkpoint under a taken id", [_cp(24, state={"other": 1}), _ev("settled", 29)], True),
]


def test_the_station_path_takes_a_station_and_nothing_else() -> None:
    for name, rows, station in SHAPES:
        assert (station_params(rows) is not None) == station, name
    rows = [_cp(1), _ev("settled", 1)]
    other_run = [rows[0], {**rows[1], "run_id": "another"}]
    assert station_params(other_run) is None


def test_each_shape_stores_what_graphlab_write_stores(store: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _runs(store)
    outcomes = {}
    for name, rows, _ in SHAPES:
        got_a, got_b = _write_both(store, a, b, rows, monkeypatch)
        assert got_a == got_b, name
        outcomes[name] = got_a
    assert _tables(pg_url, a) == _tables(pg_url, b)
    assert outcomes["a station: checkpoint, settled, entered"] is None and outcomes["the same checkpoint again"] is None
    assert outcomes["a different checkpoint under a taken id"] is CheckpointError
    assert outcomes["a NUL in data"] is not None  # refused with graphlab_write's message, on both
    cps, evs, head = _tables(pg_url, a)
    assert [e[0] for e in evs] == list(range(len(evs)))  # gap-free from the stored events, whatever the guess
    assert outcomes["no event kind"] is not None  # events.kind is NOT NULL: nothing of that write is kept
    assert head[0][:3] == ("running", 24, None)  # the last stored checkpoint is the head


def _b(seq: Any, ev: Any, **kw: Any) -> dict[str, Any]:
    """A boundary row (lab/store/boundary.py) as a drive writes it: checkpoint `seq`, its `settled` event `ev`,
    the next `entered`."""
    row = {**_cp(seq), "t": "b", "node_id": "Count", "attempt": ev - 1 if type(ev) is int else 0, "ev": ev,
           "payload": {"ms": 0.012, "next": ["Count"]}, "entered": "Count", "entered_at": 1.7e9 + seq / 5}  # fmt: skip
    row.update(kw)
    return {k: v for k, v in row.items() if v is not ...}


BOUNDARIES: list[tuple[str, dict[str, Any], bool]] = [
    ("a station", _b(1, 1), True),
    ("without the next entered", _b(2, 3, entered=..., entered_at=...), True),
    ("entered None", _b(3, 4, entered=None), True),
    ("output and counters", _b(4, 5, output={"v": 4}, counters={"steps": 4}), True),
    ("the guess too high", _b(5, 60), True),
    ("the guess too low", _b(6, 2), True),
    ("keys left out", _b(7, 20, parent_seq=..., status=..., state=...), True),
    ("an int time", _b(8, 21, created_at=1_700_000_008, entered_at=1_700_000_009), True),
    ("the same checkpoint again", _b(8, 23, created_at=1_700_000_008, entered_at=1_700_000_009), True),
    ("a different checkpoint under a taken id", _b(8, 25, state={"other": 1}), True),
    ("a null inside", _b(9, 27, state={"note": None}), False),
    ("a NaN in the payload", _b(10, 29, payload={"ms": math.nan}), False),
    ("a NUL in the entered node", _b(11, 31, entered="a\x00b"), False),
    ("a lone surrogate", _b(12, 33, node_id="\ud800"), False),
    ("a float ev", _b(13, 35.0), False),
    ("ev at bigint's end", _b(14, 2**63 - 1), False),
    ("an infinite entered time", _b(15, 37, entered_at=math.inf), False),
    ("a key beyond a boundary's", _b(16, 39, updated_at=1.7e9), False),
    ("no ev", {k: v for k, v in _b(17, 41).items() if k != "ev"}, False),
    ("no payload", _b(18, 43, payload=...), False),
    ("no entered time", _b(19, 45, entered_at=...), False),
]


def _expanded(row: dict[str, Any]) -> list[bytes | None] | None:
    """What the three rows a boundary row stands for give (None where `expand` itself refuses it)."""
    try:
        return station_params(expand([dict(row)]))
    except KeyError:
        return None


def test_a_boundary_row_gives_the_parameters_of_the_rows_it_stands_for() -> None:
    for name, row, station in BOUNDARIES:
        got = boundary_params(row)
        assert (got is not None) == station, name
        if got is not None:
            assert got == _expanded(row), name


def test_each_boundary_row_stores_what_graphlab_write_stores(store: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A boundary row sent as `graphlab_station`'s parameters straight away, and the same row sent as the
    rows it stands for to `graphlab_write` only: the same outcome and the same tables."""
    a, b = _runs(store)
    outcomes = {}
    for name, row, _ in BOUNDARIES:
        got_a, got_b = _write_both(store, a, b, [row], monkeypatch)
        assert got_a == got_b, name
        outcomes[name] = got_a
    assert _tables(pg_url, a) == _tables(pg_url, b)
    assert outcomes["a station"] is None and outcomes["the same checkpoint again"] is None
    assert outcomes["a different checkpoint under a taken id"] is CheckpointError
    assert outcomes["no ev"] is KeyError  # `expand`'s, on both
    evs = _tables(pg_url, a)[1]
    assert [e[0] for e in evs] == list(range(len(evs)))


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True) | st.text(max_size=8)
    | st.sampled_from(["a\x00", "\ud800x", "ü", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_maybe = st.just(...)


@st.composite
def _boundary(draw: st.DrawFn) -> list[dict[str, Any]]:
    seq = draw(st.integers(1, 4))  # small: a checkpoint id comes again (the same, or a different one)
    cp = _cp(seq, parent_seq=draw(_maybe | st.none() | st.integers(0, 4)), status=draw(st.sampled_from(["running", "done"])),
             state=draw(_maybe | _json), next=draw(st.lists(_json, max_size=2)), output=draw(_maybe | _json),
             counters=draw(_maybe | st.none() | st.fixed_dictionaries({"steps": st.integers(0, 9)})),
             created_at=draw(st.floats(1e9, 2e9) | st.integers(1_000_000_000, 2_000_000_000)))  # fmt: skip
    events = [
        _ev(draw(st.sampled_from(["settled", "entered", "done"])), draw(st.integers(-3, 30)),
            node_id=draw(_maybe | st.none() | st.sampled_from(["Count", "N\x00"])), attempt=draw(_maybe | st.none() | st.integers(0, 9)),
            checkpoint_seq=draw(_maybe | st.none() | st.integers(0, 4)), payload=draw(_maybe | _json))  # fmt: skip
        for _ in range(draw(st.integers(1, 2)))
    ]
    return [cp, *events]


@st.composite
def _boundary_row(draw: st.DrawFn) -> dict[str, Any]:
    cp = draw(_boundary())[0]
    entered = draw(_maybe | st.none() | st.sampled_from(["Count", "N\x00", "\udc00"]))
    row = {**cp, "t": "b", "ev": draw(st.integers(-3, 30) | st.sampled_from([2**63 - 1, 1.0])), "node_id": draw(_maybe | st.none() | st.just("Count")),
            "attempt": draw(_maybe | st.none() | st.integers(0, 9)), "payload": draw(_maybe | _json), "entered": entered,
            "entered_at": draw(_maybe | st.floats(1e9, 2e9) | st.just(math.inf) | st.integers(1_000_000_000, 2_000_000_000))}  # fmt: skip
    return {k: v for k, v in row.items() if v is not ...}


@given(row=_boundary_row())
@settings(max_examples=300, deadline=None)
def test_any_boundary_row_gives_the_parameters_of_its_rows(row: dict[str, Any]) -> None:
    assert boundary_params(row) == _expanded(row)


@given(boundaries=st.lists(_boundary(), min_size=1, max_size=4))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_any_station_boundary_stores_what_graphlab_write_stores(
    store: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch, boundaries: list[list[dict[str, Any]]]
) -> None:
    a, b = _runs(store)
    for rows in boundaries:
        got_a, got_b = _write_both(store, a, b, rows, monkeypatch)
        assert got_a == got_b, rows
    assert _tables(pg_url, a) == _tables(pg_url, b)


def test_a_store_an_older_graph_lab_made_gains_the_station_function(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An older Graph Lab's store has no `graphlab_station` (the tables are the same: no schema version):
    it is installed on open, the older lab's runs go on through it, and a boundary sent as an older
    Graph Lab sends it (`graphlab_write` only) still goes into the same run, numbered after the rest."""
    import psycopg

    installed = "SELECT prosrc FROM pg_proc WHERE proname = 'graphlab_station'"
    with monkeypatch.context() as m:
        _general(m)
        old = Lab(pg_url)
        run = declare_tally(old).start(Count(), state=Tally(limit=6))
        run.step()
        run.step()
        old.close()
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute("DROP FUNCTION graphlab_station")  # as a store made before this version
        assert con.execute(installed).fetchall() == []
    lab = Lab(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as con:
        assert con.execute(installed).fetchall() == [(STATION_FUNCTION_SOURCE,)]
    declare_tally(lab)
    run = lab.resume(run.id)
    run.step()  # its settlement: graphlab_station
    with monkeypatch.context() as m:
        _general(m)
        run.step()  # graphlab_write, as an older Graph Lab's process writes
    run.run()
    assert (run.status, run.output) == ("done", 6)
    assert lab.store.seqs(run.id) == list(range(7))
    events = lab.events(run.id)
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.kind for e in events].count("settled") == 6
    lab.close()
