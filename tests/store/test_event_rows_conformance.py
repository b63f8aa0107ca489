"""`Store.event_rows_json`: a run's events as one JSON text built by the database, the same on both backends.

Scenarios, on DuckDB and on PostgreSQL: the rows are the run's `events()` field for field (payload,
ISO time to the millisecond, truncated as `isoformat` does); payloads holding markup, non-ASCII,
line separators, floats and nesting come back as written, and an absent payload as `{}`; a run
without events (or an unknown id) gives `[]`; rows this process holds back (`durability="batch"`)
are in it; when the database cannot build the text, the rows are built from `events()` and are
the same.
"""

from __future__ import annotations

import json
from datetime import datetime

from lab import Lab
from lab.records import EVENT_ROW, EventRecord
from lab.store import Store
from lab.store import sql_text as q
from tests.conftest import Counter, Inc, declare_counter

ODD_PAYLOADS = [
    {"text": "</script><script>alert(1)</script>", "amp": "a & b <!--"},
    {"non_ascii": "héllo ✓ 日本", "seps": "\u2028\u2029", "quote": '"\\'},
    {"float": 0.1, "big": 12345678901234, "neg": -2.5e-7, "nested": {"list": [1, [2, {"x": None}]], "t": True}},
    None,
]
TIMES = [
    datetime(2026, 12, 6, 8, 2, 35, 123999),  # truncated to .123, as isoformat does
    datetime(2026, 12, 6, 8, 2, 35, 0),  # .000
    datetime(2026, 1, 2, 3, 4, 5, 999999),  # .999
    datetime(2026, 12, 31, 23, 59, 59, 1000),  # .001
]


def _expected(events: list[EventRecord]) -> list[list]:
    return [
        [e.seq, e.kind, e.node_id, e.attempt, e.checkpoint_seq, e.payload or {}, e.created_at.isoformat(timespec="milliseconds")]
        for e in events
    ]


def test_a_runs_events_as_rows_match_its_events(lab: Lab) -> None:
    run = declare_counter(lab, "rows_counter").start(Inc(by=2), state=Counter(seen=["</script>"]))
    run.run()
    events = lab.events(run.id)
    text = lab.read(run.id).event_rows_json()
    assert json.loads(text) == _expected(events)
    assert len(EVENT_ROW) == len(json.loads(text)[0])


def test_odd_payloads_and_times_come_back_as_written(lab: Lab) -> None:
    rows = [
        Store.event_row(
            EventRecord(run_id="run-odd", seq=i, kind="note", node_id=f"N<{i}>", attempt=i or None, checkpoint_seq=i, created_at=at)
        )
        | {"payload": payload}
        for i, (payload, at) in enumerate(zip(ODD_PAYLOADS, TIMES, strict=True))
    ]
    lab.store.write(rows)
    back = json.loads(lab.store.event_rows_json("run-odd"))
    assert [r[5] for r in back] == [p or {} for p in ODD_PAYLOADS]
    assert [r[6] for r in back] == ["2026-12-06T08:02:35.123", "2026-12-06T08:02:35.000", "2026-01-02T03:04:05.999", "2026-12-31T23:59:59.001"]
    assert [r[:5] for r in back] == [[i, "note", f"N<{i}>", i or None, i] for i in range(4)]
    assert back == _expected(lab.store.events("run-odd"))


def test_no_events_is_an_empty_array(lab: Lab) -> None:
    assert lab.store.event_rows_json("run-none") == "[]"


def test_held_back_rows_are_in_it(location: str) -> None:
    lab = Lab(location, durability="batch", batch_size=1000)
    try:
        run = declare_counter(lab, "rows_batch").start(Inc(), state=Counter())
        run.run(max_steps=2)
        assert len(json.loads(lab.store.event_rows_json(run.id))) == len(lab.events(run.id)) > 2
    finally:
        lab.close()


def test_when_the_database_cannot_build_it_the_rows_are_built_from_the_events(lab: Lab, monkeypatch) -> None:
    run = declare_counter(lab, "rows_fallback").start(Inc(), state=Counter(seen=["<b>é</b>"]))
    run.run()
    built = lab.store.event_rows_json(run.id)
    broken = {name: "SELECT CAST('{not json' AS JSON) FROM events WHERE run_id = ?" for name in q.EVENT_ROWS_JSON}
    if lab.store.dialect.name == "postgresql":
        broken = {name: "SELECT CAST('{not json' AS jsonb) FROM events WHERE run_id = ?" for name in q.EVENT_ROWS_JSON}
    monkeypatch.setattr(q, "EVENT_ROWS_JSON", broken)
    fallback = lab.store.event_rows_json(run.id)
    assert json.loads(fallback) == json.loads(built) == _expected(lab.events(run.id))


def test_the_run_id_is_a_parameter(lab: Lab) -> None:
    bad = "run-'; DROP TABLE events; --"
    assert lab.store.event_rows_json(bad) == "[]" and lab.store.events(bad) == []
