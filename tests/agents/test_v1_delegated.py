"""A pydantic-graph v1 delegated-station document continues as a lab run (seed 001)."""

from __future__ import annotations

from pathlib import Path

from lab.codec_v1 import decode_v1

from .graphs import declare

DOCUMENT = (Path(__file__).with_name("v1_delegated.json")).read_text()


def test_a_v1_delegated_document_decodes_and_continues(lab):
    """Seed 001: "Captured Pydantic Graph 1.107.5 consent, delegated, and hardware-wait documents exercise
    the owned decoder". The delegated station's created snapshot (its pre-park boundary) decodes to the
    graph's DelegatedAgentNode class; continued, the station submits its request to the exact runtime it
    names, the job's result is adopted and routed, and the run ends."""
    g = declare(lab)
    doc = decode_v1(DOCUMENT, g.build().codec)
    assert type(doc.cursor.node) is g.nodes["Outline"] and doc.cursor.state.topic == "durable agents"
    run = lab.continue_v1(g, DOCUMENT)
    run.run()
    assert run.status == "done" and run.output == "Durable agents: park, adopt"
    assert run.job.status == "SUCCEEDED" and run.job.record.request["prompt"] == "Outline an essay about durable agents"
    assert [w.kind for w in run.waits()] == ["delegate"]
