"""The `calls` table on both backends (DuckDB file and PostgreSQL): recorded calls and their replay.

Issue 28 part 1: every model request of a station is recorded with its run, station try, call
index, request digest, response and tokens; a fork replays them; `lab.sql` queries `calls`.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from pydantic_core import to_json

from lab import Lab
from lab.store.calls import CallRecord, CallTables, call_row
from lab.store.journal import Encoded, UnstorableValueError
from tests.agents.replay_graphs import Article, declare


def _rec(call_id: str, run_id: str, node_id: str = "Draft", **kw) -> CallRecord:
    base = dict(
        call_id=call_id, run_id=run_id, node_id=node_id, checkpoint_seq=2, attempt=None, call_index=1, kind="model",
        name="m", digest="d1", mode="live", request={"messages": ["hi", {"n": 1}]}, response={"parts": ["yo"]},
        input_tokens=10, output_tokens=3, ms=1.5, created_at=datetime(2026, 1, 1, 12, 0, 0),
    )  # fmt: skip
    base.update(kw)
    return CallRecord(**base)


def test_calls_are_stored_read_back_and_found_for_replay(lab: Lab) -> None:
    store = lab.store
    assert isinstance(store, CallTables)
    store.record_call(_rec("c1", "run-a"), sync=True)
    store.record_call(_rec("c2", "run-a", "Review", created_at=datetime(2026, 1, 1, 12, 0, 1)))
    store.record_call(_rec("c3", "run-b", mode="replayed", replayed_from="c1", response=None, created_at=datetime(2026, 1, 1, 12, 0, 2)))
    got = store.calls("run-a")
    assert [c.call_id for c in got] == ["c1", "c2"]
    assert got[0] == _rec("c1", "run-a") and got[0].tokens == 13  # JSON back as it went in (no try: no events)
    assert [c.call_id for c in store.recorded_calls(["run-a", "run-b"])] == ["c2", "c1"]  # live only, newest first
    assert [c.call_id for c in store.recorded_calls(["run-b", "run-a"], "Draft")] == ["c1"]
    assert store.recorded_calls([]) == [] and store.calls("nope") == []
    assert store.calls("run-b")[0].replayed_from == "c1"
    rows = lab.sql("select call_id, mode, input_tokens from calls order by call_id").fetchall()
    assert rows == [("c1", "live", 10), ("c2", "live", 10), ("c3", "replayed", 10)]
    store.delete_run("run-a")  # a deleted run takes its calls with it
    assert store.calls("run-a") == [] and len(store.calls("run-b")) == 1


def test_a_call_written_as_encoded_json_reads_back_as_its_data(lab: Lab) -> None:
    """The recorder hands the journal a request and a response already encoded (`Encoded`, pydantic-core's
    bytes): they are written as they are, in a transaction with another row, and read back as JSON data;
    what the store cannot hold is still refused, naming the field, with nothing written."""
    store = lab.store
    request = {"messages": ["hi \u00e9 \u2603", {"n": 1, "x": [1.5, None, True]}], "settings": None}
    response = {"parts": [{"content": "yo \"quoted\" \\ back", "part_kind": "text"}]}
    rec = _rec("e1", "run-e", request=Encoded(to_json(request)), response=Encoded(to_json(response)))
    store.write([call_row(_rec("e0", "run-e")), call_row(rec)])
    store.record_call(_rec("e2", "run-e", mode="replayed", replayed_from="e1", response=None, request=Encoded(to_json(request))), sync=True)
    got = {c.call_id: c for c in store.calls("run-e")}
    assert got["e1"].request == request and got["e1"].response == response
    assert got["e2"].request == request and got["e2"].response is None and got["e0"] == _rec("e0", "run-e")
    with pytest.raises(UnstorableValueError, match="lone surrogate"):  # the rest of the row is still checked
        store.record_call(_rec("e3", "run-e", node_id="\ud800", request=Encoded(to_json(request))), sync=True)
    if lab.store.dialect.name == "postgres":  # jsonb cannot hold a NUL character, inside encoded text too
        with pytest.raises(UnstorableValueError, match="NUL"):
            store.record_call(_rec("e4", "run-e", request=Encoded(to_json({"a": "x\x00y"}))), sync=True)
    assert sorted(got) == sorted(c.call_id for c in store.calls("run-e"))  # nothing of the refused rows


def test_a_fork_of_a_five_station_agent_run_replays_every_call(lab: Lab) -> None:
    g, model, _ = declare(lab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.run()
    assert (run.status, model.calls) == ("done", 5)
    fork = run.fork(2)
    fork.run()
    assert fork.status == "done" and model.calls == 5  # 0 model calls
    assert fork.state == run.state
    assert [(c.node_id, c.mode) for c in fork.calls()] == [("Draft", "replayed"), ("Review", "replayed"), ("Polish", "replayed")]
    for r in (run, fork):  # each call names its station try: the `entered` event of its station just before it
        entered = {e.seq: e.node_id for e in r.events("entered")}
        recorded = {e.payload["call"]: e.seq for e in r.events("recorded")}
        for c in r.calls():
            assert entered[c.attempt] == c.node_id and c.attempt < recorded[c.call_id]
            assert not any(c.attempt < s < recorded[c.call_id] for s in entered)
    edited = run.fork(2, state=Article(tone="warm", notes=run.state_at(2).notes))
    edited.run()
    assert model.calls == 6 and model.prompts[-1] == "Review the draft in a warm tone"
    assert [c.mode for c in edited.calls()] == ["replayed", "live", "replayed"]
    saved = lab.sql("select sum(input_tokens + output_tokens) from calls where mode = 'replayed'").fetchall()[0][0]
    assert saved == sum(c.tokens for c in fork.calls()) + sum(c.tokens for c in edited.calls() if c.mode == "replayed") > 0


def test_the_replay_mode_is_stored_with_the_run(lab: Lab) -> None:
    """`run.replay` as a `replay` event; a fork's own `replay` event carries the parent's mode."""
    g, _, _ = declare(lab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.replay = "strict"
    fork = run.fork(0)
    fork.run()  # the fork's numbering goes on after its `replay` event
    assert [e.payload for e in lab.read(run.id).events("replay")] == [{"mode": "strict"}]
    assert [(e.seq, e.payload) for e in lab.read(fork.id).events("replay")] == [(1, {"mode": "strict"})]
    assert [e.seq for e in fork.events()] == list(range(len(fork.events())))
