"""A recorded call's journal line (`t = 'call'`) is spliced at once (lab/store/journal.py): the same JSON
as the row decoded, whether its request and response are `Encoded` (recorded here) or JSON data (a
worker's calls, adopted), and a value the store cannot hold is still refused, naming the field."""

from __future__ import annotations

import json

import pytest

from lab.store.journal import Encoded, Journal, UnstorableValueError


def _row(request, response, name="test"):
    return {
        "t": "call", "run_id": "r1", "call_id": "c1", "node_id": "Ask", "checkpoint_seq": 3, "call_index": 1,
        "kind": "model", "name": name, "digest": "d" * 64, "mode": "live", "replayed_from": None,
        "request": request, "response": response, "input_tokens": 52, "output_tokens": 4, "ms": 0.5,
        "created_at": 1.5,
    }  # fmt: skip


@pytest.mark.parametrize("encoded", [True, False], ids=["encoded", "data"])
def test_a_call_line_is_its_row_as_json(tmp_path, encoded):
    request = {"model": "test", "messages": [{"parts": [{"content": "visit 0"}]}]}
    response = {"parts": [{"content": "ok"}], "usage": {"input_tokens": 52}}
    wrap = (lambda v: Encoded(json.dumps(v, separators=(",", ":")).encode())) if encoded else (lambda v: v)
    event = {"t": "ev", "run_id": "r1", "kind": "recorded", "payload": {"call": "c1"}}
    journal = Journal(str(tmp_path / "j"))
    lines = journal.encode([_row(wrap(request), wrap(response)), event]).splitlines()
    call, ev = (json.loads(line) for line in lines)
    assert call == {**_row(request, response), "j": call["j"], "tx": call["tx"]}
    assert call["j"] + 1 == ev["j"] and ev["tx"] == call["tx"] and ev["end"] is True
    assert lines[1].endswith(b',"end":true}')


def test_a_call_with_a_lone_surrogate_is_refused_naming_the_field(tmp_path):
    journal = Journal(str(tmp_path / "j"))
    with pytest.raises(UnstorableValueError, match="name"):
        journal.encode([_row(Encoded(b"{}"), Encoded(b"{}"), name="bad\udcff")])


def test_a_recorded_event_with_a_none_is_orjsons_line_and_a_nan_still_pydantic_cores(tmp_path, monkeypatch):
    """A row whose `null`s are all its own None values (a recorded call's event: `attempt` None) keeps
    orjson's line; one more `null` (a NaN orjson wrote so) is written by pydantic-core, as `NaN`."""
    from lab.store import journal_lines as journal_module

    payload = {"call": "c1", "kind": "model", "name": "test", "index": 1, "mode": "live", "tokens": 5, "ms": 0.25}
    event = {"t": "ev", "run_id": "r1", "seq": 4, "kind": "recorded", "node_id": "Ask", "attempt": None,
             "checkpoint_seq": 3, "payload": payload, "created_at": 1.5}  # fmt: skip
    journal = Journal(str(tmp_path / "j"))
    calls = []
    real = journal_module.to_json
    monkeypatch.setattr(journal_module, "to_json", lambda *a, **k: calls.append(a) or real(*a, **k))
    line = journal.encode([dict(event)])
    assert calls == [] and json.loads(line) == {**event, "j": 0, "tx": 0, "end": True}
    nan = journal.encode([{**event, "payload": {**payload, "ms": float("nan")}}])
    assert len(calls) == 1 and b'"ms":NaN' in nan
