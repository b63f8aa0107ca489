"""Every kind is traced (issue 29 part 2, docs/observe.md): the matrix's `trace_*` columns.

The spans come from the run's journal rows only, so every kind should give the same shape:
read through the OpenTelemetry SDK's `InMemorySpanExporter` (a real SDK, given to the lab with
`lab.observe(tracer_provider=...)`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from lab import Lab

from .cases import FAILS_BEFORE_SUCCESS, KINDS, case_named
from .test_matrix import _parent

pytestmark = pytest.mark.parametrize("kind", KINDS)


@pytest.fixture
def traced(tmp_path: Any) -> Iterator[tuple[Lab, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    lab = Lab(os.fspath(tmp_path / "matrix.duckdb"))
    lab.observe(provider)
    yield lab, exporter
    if not lab.store.closed:
        lab.close()
    provider.shutdown()


def test_trace_gate(traced: tuple[Lab, InMemorySpanExporter], kind: str) -> None:
    """One trace: a run span per stretch up to a stop, every station attempt under one, a `wait` event."""
    lab, exporter = traced
    case = case_named(kind)
    run = case.start(case.build(lab, "gate"))
    run.run()
    assert run.status == "waiting", (kind, run.status, run.error)
    run.approve()
    run.run()
    assert run.status == "done", (kind, run.status, run.error)
    spans = exporter.get_finished_spans()
    segments = [s for s in spans if s.name.startswith("run graph ")]
    stations = [s for s in spans if s.name.startswith("run node ")]
    # a delegated agent station also waits for its job first: one more stretch
    stops = ["waiting", "waiting", "done"] if kind == "agent" else ["waiting", "done"]
    assert [s.attributes["graph_lab.status"] for s in segments] == stops, kind  # type: ignore[index]
    assert {s.context.trace_id for s in spans} == {segments[0].context.trace_id}
    assert {s.parent.span_id for s in stations if s.parent} <= {s.context.span_id for s in segments}
    assert all(s.attributes["graph_lab.run_id"] == run.id for s in spans)  # type: ignore[index]
    settled = [e for e in run.events("settled")]
    assert sum(s.attributes["graph_lab.status"] == "settled" for s in stations) == len(settled)  # type: ignore[index]
    waits = [e for s in spans for e in s.events if e.name == "wait"]
    kinds = ["delegate", "consent"] if kind == "agent" else ["consent"]
    assert [dict(e.attributes or {})["graph_lab.kind"] for e in waits] == kinds, kind


def test_trace_retry(traced: tuple[Lab, InMemorySpanExporter], kind: str) -> None:
    """A retried station: a span per failed try (ERROR, its exception), then one that settled."""
    lab, exporter = traced
    case = case_named(kind)
    run = case.start(case.build(lab, "retry"))
    run.run()
    assert run.status == "done", (kind, run.status, run.error)
    retried = [
        s for s in exporter.get_finished_spans() if (s.attributes or {}).get("graph_lab.status") == "retried"
    ]
    assert len(retried) == FAILS_BEFORE_SUCCESS, kind
    assert all(s.status.status_code is StatusCode.ERROR for s in retried)
    types = {
        dict(e.attributes or {})["exception.type"] for s in retried for e in s.events if e.name == "exception"
    }
    # a delegated station's try is an agent job: its failure arrives as the job's
    expected = {"lab.agents.errors.DelegatedJobFailed"} if kind == "agent" else {"builtins.ConnectionError"}
    assert types == expected, (kind, types)
    # the station's last span settled (a delegated station's last try first waits for its job)
    node = retried[0].attributes["graph_lab.node_id"]  # type: ignore[index]
    mine = sorted(
        (s for s in exporter.get_finished_spans() if (s.attributes or {}).get("graph_lab.node_id") == node),
        key=lambda s: s.start_time or 0,
    )
    assert mine[-1].attributes["graph_lab.status"] == "settled", kind  # type: ignore[index]
    # the try after the failed ones has a span of its own (a super-step task has no `entered` for it)
    after = [s for s in mine if s.attributes["graph_lab.retries"] == FAILS_BEFORE_SUCCESS]  # type: ignore[index]
    # a delegated station's last try parks on its job, then is entered again to take the job's result
    want = ["waiting", "settled"] if kind == "agent" else ["settled"]
    assert [s.attributes["graph_lab.status"] for s in after] == want, kind  # type: ignore[index]
    assert sorted(s.attributes["graph_lab.retries"] for s in retried) == list(range(FAILS_BEFORE_SUCCESS))  # type: ignore[index]


def test_trace_subgraph_child(traced: tuple[Lab, InMemorySpanExporter], kind: str) -> None:
    """A run of this kind as a `run_subgraph` child: its run span is a child of the parent's station
    span (one trace), and the parent's next station is not left under the child's spans."""
    lab, exporter = traced
    parent = _parent(lab, kind, "plain")
    parent.run()
    assert parent.status == "done", (kind, parent.error)
    assert not trace.get_current_span().get_span_context().is_valid  # nothing left current here
    spans = exporter.get_finished_spans()
    [call] = [s for s in spans if s.name == "run node CallChild"]
    [report] = [s for s in spans if s.name == "run node Report"]
    [parent_run] = [s for s in spans if s.name.startswith("run graph parent_of_")]
    # the child's first run span (a later one, after a wait, is a child of that first one)
    children = [
        s
        for s in spans
        if s.name.startswith("run graph ") and s is not parent_run and s.attributes["graph_lab.segment"] == 1  # type: ignore[index]
    ]
    assert children and all(
        c.parent is not None and c.parent.span_id == call.context.span_id for c in children
    ), kind
    assert {s.context.trace_id for s in spans} == {parent_run.context.trace_id}
    assert report.parent is not None and report.parent.span_id == parent_run.context.span_id
    child_ids = {c.attributes["graph_lab.run_id"] for c in children}  # type: ignore[index]
    assert {c.attributes.get("graph_lab.parent_run_id") for c in children} == {parent.id}, (kind, child_ids)  # type: ignore[union-attr]
