"""pydantic-graph v1 snapshot documents decode against the pinned graph and continue (seed 001).

The documents in `v1_documents/` are hand-made in v1's wire format (what 1.x's
`FileStatePersistence` wrote: a JSON array of node and end snapshots with ids and statuses).
"""

from __future__ import annotations

import copy
import json

import pytest

from lab import Lab
from lab.codec_v1 import decode_v1
from lab.errors import CheckpointError
from tests.integration.gate_graphs import Compute, Probe, declare_work
from tests.integration.v1_graphs import ApproveTool, Think, declare_chat, document


@pytest.fixture
def lab(tmp_path):
    with Lab(tmp_path / "lab.duckdb") as lab:
        yield lab


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "denied"])
def test_a_v1_consent_document_continues_with_either_verdict(lab, approved):
    """Seed 001: "Captured Pydantic Graph 1.107.5 consent, delegated, and hardware-wait documents
    exercise the owned decoder ... The captured consent continuation runs on the native builder with
    either verdict". The document's created snapshot (the gate, holding the model's message suffix
    and tool call id) is a validated durable cursor, so the run enters there past the declared entry
    ("only a validated durable cursor may enter at a later station"), parks for consent, and routes
    on the verdict."""
    g = declare_chat(lab)
    run = lab.continue_v1(g, document("consent.json"))
    assert run.events()[0].payload["tags"]["v1"] == {
        "snapshot": "ApproveTool:8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f", "status": "created", "snapshots": 2,
    }  # fmt: skip
    run.run()
    assert run.status == "waiting" and run.wait.kind == "consent" and run.wait.node_id == "ApproveTool"
    assert run.wait.details["call"] == "call_7" and run.wait.details["suffix"][0]["parts"][0]["tool"] == "delete_rows"
    if approved:
        run.approve()
    else:
        run.deny("not today")
    run.run()
    assert run.status == "done"
    assert run.output == ("call_7: 3 rows deleted" if approved else "refused: not today")
    assert run.state.log == [f"verdict:{approved}"] and run.state.question == "Clean up the drafts table"


def test_the_v1_envelope_is_kept_and_written_back_as_read(lab):
    """Seed 001: "The codec preserves the supported v1 wire envelope while validating state and output
    against the pinned graph and resolving node ids only from its declared classes." Every snapshot
    decodes to the graph's own classes, and the document re-encodes to what was read (ids, statuses,
    times, the node_id in the envelope)."""
    g = declare_chat(lab)
    for name in ("consent.json", "pending.json"):
        doc = decode_v1(document(name), g.build().codec)
        assert doc.to_json() == json.loads(document(name))
    doc = decode_v1(document("consent.json"), g.build().codec)
    assert [type(s.node) for s in doc.snapshots] == [Think, ApproveTool]
    assert [s.status for s in doc.snapshots] == ["success", "created"] and doc.cursor is doc.snapshots[1]
    assert doc.snapshots[1].node.suffix[0]["role"] == "assistant" and doc.snapshots[0].state.messages == []


def test_a_v1_hardware_wait_document_continues_to_its_grant(lab):
    """Seed 001: captured "hardware-wait documents exercise the owned decoder", and "neither running nor
    error status grants a new attempt": the capability station's try that raised is an `error` snapshot
    and is not the cursor; the created re-snapshot is, with the state it kept (one request so far). The
    continued run parks for the GPU and goes on once granted."""
    g = declare_work(lab)
    doc = decode_v1(document("hardware_wait.json"), g.build().codec)
    assert [s.status for s in doc.snapshots] == ["error", "created"] and isinstance(doc.cursor.node, Probe)
    with pytest.raises(CheckpointError, match="neither running nor error"):
        doc.continuation(at="Probe:0a1b2c3d4e5f60718293a4b5c6d7e8f9")
    run = lab.continue_v1(g, document("hardware_wait.json"))
    run.run()
    assert run.status == "waiting" and run.wait.kind == "capability"
    run.grant("gpu", "gpu-0")
    run.run()
    assert run.status == "done" and run.output == "ran on gpu-0" and run.state.requests == 2
    assert Compute in lab.graphs["work"].nodes.values()


def test_a_pending_v1_snapshot_decodes_but_is_not_replayed_unless_named(lab):
    """Seed 001: "A pending snapshot remains decodable but is not automatically replayed" ("pending
    remains nonreplayable"). Continuing the document refuses, naming the snapshot; naming it with
    `at=` is the person's explicit word that it never ran."""
    g = declare_chat(lab)
    doc = decode_v1(document("pending.json"), g.build().codec)
    assert doc.snapshots[0].status == "pending" and doc.cursor is None
    with pytest.raises(CheckpointError, match="pending.*not replayed automatically"):
        lab.continue_v1(g, document("pending.json"))
    assert lab.runs() == []  # nothing was stored
    run = lab.continue_v1("chat", document("pending.json"), at="Think:77aa88bb99cc00dd11ee22ff33445566")
    run.run()
    assert run.status == "waiting" and run.wait.node_id == "ApproveTool"


def _doc() -> list[dict]:
    return json.loads(document("consent.json"))


def _broken(change) -> list[dict]:
    doc = _doc()
    change(doc)
    return doc


BROKEN = {
    "unknown node": (lambda d: d[1]["node"].update(node_id="Delete"), "unknown node id 'Delete'"),
    "unknown node field": (lambda d: d[1]["node"].update(force=True), r"unknown field\(s\) \['force'\]"),
    "missing node field": (lambda d: d[1]["node"].pop("tool_call_id"), r"missing field\(s\) \['tool_call_id'\]"),
    "duplicate snapshot id": (lambda d: d[0].update(id=d[1]["id"]), "twice"),
    "two created cursors": (lambda d: d[0].update(status="created"), "2 created snapshots"),
    "state does not validate": (lambda d: d[1]["state"].update(messages="none"), "state no longer validates"),
    "unknown envelope field": (lambda d: d[0].update(parent="x"), r"unknown envelope field\(s\) \['parent'\]"),
    "unknown status": (lambda d: d[0].update(status="done"), "status 'done'"),
    "no snapshot id": (lambda d: d[0].pop("id"), "no snapshot id"),
    "node without node_id": (lambda d: d[1]["node"].pop("node_id"), "node must be an object with its node_id"),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_what_the_pinned_graph_cannot_read_fails_explicitly(lab, case):
    """Seed 001: "Unknown nodes or node fields, duplicate snapshot ids, and multiple created cursors fail
    explicitly." Each is a CheckpointError naming the snapshot, and nothing is stored."""
    g = declare_chat(lab)
    change, message = BROKEN[case]
    with pytest.raises(CheckpointError, match=message):
        lab.continue_v1(g, _broken(change))
    assert lab.runs() == []


def test_a_finished_or_stalled_v1_document_has_nothing_to_continue(lab):
    """Seed 001: "neither running nor error status grants a new attempt", and End data is "validated
    against the pinned graph": an ended document decodes its result and continues nowhere; one whose
    last snapshot is running has no cursor."""
    g = declare_chat(lab)
    ended = _doc()
    ended[1]["status"] = "success"
    ended.append({"state": ended[1]["state"], "result": {"data": "call_7: 3 rows deleted"}, "ts": "2025-11-03T10:16:00Z", "kind": "end", "id": "end:1"})
    doc = decode_v1(ended, g.build().codec)
    assert doc.ended and doc.snapshots[-1].result == "call_7: 3 rows deleted" and doc.to_json() == ended
    with pytest.raises(CheckpointError, match="the v1 run is over"):
        lab.continue_v1(g, ended)
    after_end = copy.deepcopy(ended) + [{**ended[1], "id": "ApproveTool:again", "status": "created"}]
    with pytest.raises(CheckpointError, match="after its End snapshot"):
        decode_v1(after_end, g.build().codec)
    bad_end = copy.deepcopy(ended)
    bad_end[-1]["result"] = {"data": 42}
    with pytest.raises(CheckpointError):
        decode_v1(bad_end, g.build().codec)  # End data validated as the graph's output type (str)
    stalled = _doc()
    stalled[1]["status"] = "running"
    with pytest.raises(CheckpointError, match="is running.*never grants a new attempt"):
        lab.continue_v1(g, stalled)
    with pytest.raises(CheckpointError, match="not JSON"):
        lab.continue_v1(g, "[{")
    assert lab.runs() == []
