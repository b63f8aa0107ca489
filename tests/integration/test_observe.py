"""Runs as OpenTelemetry traces (issue 29 part 2, docs/observe.md), read back through the real SDK.

Every test gives its lab an SDK `TracerProvider` whose spans go to the SDK's `InMemorySpanExporter`
(`lab.observe(tracer_provider=...)`), runs a real graph on a DuckDB file, and reads the finished
spans: the tree (a run span, station spans under it), the attributes, a failed station's
exception, a run-level failure, a retried station (one span per try), a wait as a span event, a
parallel step's tasks as sibling spans, a node's own spans nested under its station's, tracing
off, and a run resumed in this process after another process (configured the way a user
configures OpenTelemetry: a global provider) left it, linked to that process's trace.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic_graph import BaseNode, End, GraphRunContext

import tests.integration.parallel_graphs as pg
from lab import Lab, Retry
from lab.observe import TRACE_KEY
from tests.integration.control_graphs import Laps, Prep, Script, flaky
from tests.integration.gate_graphs import Draft, Mail, declare_mail

WORKER = Path(__file__).with_name("observe_worker.py")

USER: dict[str, Any] = {}
"""The tracer a node's own code uses (a user's: pydantic-ai's, logfire.span, their own)."""


@dataclass
class Measure(BaseNode[Laps, None, int]):
    async def run(self, ctx: GraphRunContext[Laps, None]) -> Report:
        with USER["tracer"].start_as_current_span("user work") as span:
            span.set_attribute("count", ctx.state.count)
            ctx.state.count += 1
        return Report()


@dataclass
class Report(BaseNode[Laps, None, int]):
    async def run(self, ctx: GraphRunContext[Laps, None]) -> End[int]:
        with USER["tracer"].start_as_current_span("user report"):
            return End(ctx.state.count)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def lab(tmp_path: Path, exporter: InMemorySpanExporter) -> Iterator[Lab]:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Lab(tmp_path / "lab.duckdb") as lab:
        lab.observe(provider)
        yield lab
    provider.shutdown()


def by_name(spans: tuple[ReadableSpan, ...] | list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name.startswith(prefix)), key=lambda s: s.start_time or 0)


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_run_is_one_trace_with_a_span_per_station_attempt(lab: Lab, exporter: InMemorySpanExporter) -> None:
    g = flaky(lab)
    run = g.start(Prep(), state=Laps(), deps=Script([None]))
    run.run()
    assert run.status == "done"
    spans = exporter.get_finished_spans()
    [root] = by_name(spans, "run graph ")
    stations = by_name(spans, "run node ")
    assert root.name == "run graph flaky" and root.parent is None
    assert [s.name for s in stations] == ["run node Prep", "run node Flaky"]
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}  # one trace
    assert all(parent_id(s) == root.context.span_id for s in stations)
    assert all(root.start_time <= s.start_time <= s.end_time <= root.end_time for s in stations)  # type: ignore[operator]
    rec = lab.store.get_run(run.id)
    common = {"graph_lab.run_id": run.id, "graph_lab.graph": "flaky", "graph_lab.revision": rec.revision}
    assert common.items() <= dict(root.attributes or {}).items()
    assert root.attributes["graph_lab.status"] == "done" and root.attributes["graph_lab.head_seq"] == 2  # type: ignore[index]
    prep, flaky_span = (dict(s.attributes or {}) for s in stations)
    assert common.items() <= prep.items()
    entered = {e.node_id: e for e in run.events("entered")}
    assert prep["graph_lab.node_id"] == "Prep" and prep["graph_lab.attempt"] == entered["Prep"].attempt
    assert (prep["graph_lab.checkpoint_seq"], prep["graph_lab.settled_seq"]) == (0, 1)
    assert (flaky_span["graph_lab.checkpoint_seq"], flaky_span["graph_lab.settled_seq"]) == (1, 2)
    assert prep["graph_lab.status"] == flaky_span["graph_lab.status"] == "settled"
    assert prep["graph_lab.retries"] == 0 and prep["graph_lab.try"] == 1
    assert tuple(prep["graph_lab.next"]) == ("Flaky",)  # type: ignore[arg-type]
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    # the run span's context is kept with the segment's first event, for a process that resumes it
    first = run.events("entered")[0]
    assert first.payload[TRACE_KEY] == {
        "trace_id": f"{root.context.trace_id:032x}",
        "span_id": f"{root.context.span_id:016x}",
    }


def test_a_failed_station_records_its_exception(lab: Lab, exporter: InMemorySpanExporter) -> None:
    g = flaky(lab)
    run = g.start(Prep(), state=Laps(), deps=Script([ValueError("the flaky station broke")]))
    run.run()
    assert run.status == "failed"
    spans = exporter.get_finished_spans()
    [root] = by_name(spans, "run graph ")
    [failed] = [s for s in spans if s.name == "run node Flaky"]
    assert failed.status.status_code is StatusCode.ERROR and "the flaky station broke" in (
        failed.status.description or ""
    )
    assert failed.attributes["graph_lab.status"] == "failed"  # type: ignore[index]
    [exc] = [e for e in failed.events if e.name == "exception"]
    attrs = dict(exc.attributes or {})
    assert attrs["exception.type"] == "builtins.ValueError"
    assert attrs["exception.message"] == "the flaky station broke"
    assert "ValueError: the flaky station broke" in str(attrs["exception.stacktrace"])
    assert "Traceback" in str(attrs["exception.stacktrace"])
    assert root.status.status_code is StatusCode.ERROR and root.attributes["graph_lab.status"] == "failed"  # type: ignore[index]
    assert [s.name for s in spans if s.name.startswith("run node")] == ["run node Prep", "run node Flaky"]


def test_a_run_level_failure_is_recorded_on_the_run_span(lab: Lab, exporter: InMemorySpanExporter) -> None:
    """A bound (the step limit) fails the run, not a station: the run span has the exception; going
    on from the head is the next run span of the same trace, linked to the failed one."""
    g = flaky(lab)
    run = g.start(Prep(), state=Laps(), deps=Script([None]), step_limit=1)
    run.run()
    assert run.status == "failed"
    [failed] = by_name(exporter.get_finished_spans(), "run graph ")
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["graph_lab.status"] == "failed"  # type: ignore[index]
    [exc] = [e for e in failed.events if e.name == "exception"]
    assert dict(exc.attributes or {})["exception.type"] == "lab.errors.StepLimitError"
    assert [
        s.attributes["graph_lab.status"] for s in by_name(exporter.get_finished_spans(), "run node ")
    ] == ["settled"]  # type: ignore[index]
    run.run(step_limit=None)
    assert run.status == "done"
    first, second = by_name(exporter.get_finished_spans(), "run graph ")
    assert second.context.trace_id == first.context.trace_id and parent_id(second) == first.context.span_id
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    assert second.attributes["graph_lab.status"] == "done" and second.status.status_code is StatusCode.UNSET  # type: ignore[index]


def test_a_retried_station_is_one_span_per_try(lab: Lab, exporter: InMemorySpanExporter) -> None:
    g = flaky(lab, retry=Retry(max_attempts=3))
    run = g.start(Prep(), state=Laps(), deps=Script([ValueError("try 1"), KeyError("try 2"), None]))
    run.run()
    assert run.status == "done"
    spans = exporter.get_finished_spans()
    [root] = by_name(spans, "run graph ")
    tries = by_name(spans, "run node Flaky")
    assert [(s.attributes["graph_lab.try"], s.attributes["graph_lab.retries"]) for s in tries] == [
        (1, 0),
        (2, 1),
        (3, 2),
    ]  # type: ignore[index]
    assert [s.attributes["graph_lab.status"] for s in tries] == ["retried", "retried", "settled"]  # type: ignore[index]
    assert [s.status.status_code for s in tries] == [StatusCode.ERROR, StatusCode.ERROR, StatusCode.UNSET]
    messages = [
        dict(e.attributes or {})["exception.message"]
        for s in tries[:2]
        for e in s.events
        if e.name == "exception"
    ]
    assert messages == ["try 1", "'try 2'"]
    assert {s.attributes["graph_lab.checkpoint_seq"] for s in tries} == {1}  # type: ignore[index]  # all from the same boundary
    assert all(parent_id(s) == root.context.span_id for s in tries)
    attempts = [e.attempt for e in run.events("entered") if e.node_id == "Flaky"]
    assert [s.attributes["graph_lab.attempt"] for s in tries] == attempts  # type: ignore[index]
    assert root.status.status_code is StatusCode.UNSET  # retried, then done: the run did not fail


def test_a_wait_is_an_event_and_the_answer_goes_on_in_the_same_trace(
    lab: Lab, exporter: InMemorySpanExporter
) -> None:
    g = declare_mail(lab)
    run = g.start(Draft(), state=Mail())
    run.run()
    assert run.status == "waiting"
    [first] = by_name(exporter.get_finished_spans(), "run graph ")
    [parked] = by_name(exporter.get_finished_spans(), "run node Draft")
    assert (
        first.attributes["graph_lab.status"] == "waiting"
        and parked.attributes["graph_lab.status"] == "waiting"
    )  # type: ignore[index]
    [wait] = [e for e in parked.events if e.name == "wait"]
    attrs = dict(wait.attributes or {})
    assert attrs["graph_lab.kind"] == "interrupt" and attrs["graph_lab.owner"] == run.wait.owner  # type: ignore[union-attr]
    assert json.loads(str(attrs["graph_lab.details"])) == {"question": "Which region?"}
    run.resume_with("eu")
    run.run()  # Draft again, then the consent gate parks
    assert run.status == "waiting" and run.wait is not None and run.wait.kind == "consent"
    run.approve(note="ship it")
    run.run()
    assert run.status == "done"
    spans = exporter.get_finished_spans()
    segments = by_name(spans, "run graph ")
    assert [s.attributes["graph_lab.status"] for s in segments] == ["waiting", "waiting", "done"]  # type: ignore[index]
    assert {s.context.trace_id for s in spans} == {first.context.trace_id}  # one process: one trace
    assert all(parent_id(s) == first.context.span_id for s in segments[1:])
    assert [[link.context.span_id for link in s.links] for s in segments] == [
        [],
        [segments[0].context.span_id],
        [segments[1].context.span_id],
    ]
    # each answer is an event of the segment it let go on
    answers = [dict(e.attributes or {}) for s in segments[1:] for e in s.events if e.name == "verdict"]
    assert [
        (a["graph_lab.kind"], a.get("graph_lab.answer"), a.get("graph_lab.approved")) for a in answers
    ] == [
        ("interrupt", "eu", None),
        ("consent", None, True),
    ]
    [gate_wait] = [e for s in spans if s.name == "run node ConfirmSend" for e in s.events if e.name == "wait"]
    assert dict(gate_wait.attributes or {})["graph_lab.prompt"] == "Send the draft to the customer?"
    assert [s.name for s in by_name(spans, "run node ")] == [
        "run node Draft", "run node Draft", "run node ConfirmSend", "run node ConfirmSend", "run node Send",
    ]  # fmt: skip


def test_a_parallel_steps_tasks_are_sibling_spans(lab: Lab, exporter: InMemorySpanExporter) -> None:
    lg = lab.adopt(pg.squares(), name="squares")
    run = lg.start(inputs=[1, 2, 3])
    run.run()
    assert run.status == "done" and run.output == [1, 4, 9]
    spans = exporter.get_finished_spans()
    [root] = by_name(spans, "run graph ")
    squares = by_name(spans, "run node square")
    assert len(squares) == 3
    assert {parent_id(s) for s in squares} == {root.context.span_id}  # siblings under the run
    assert sorted(s.attributes["graph_lab.task"] for s in squares) == [1, 2, 3]  # type: ignore[index]
    assert {s.attributes["graph_lab.step"] for s in squares} == {2}  # type: ignore[index]  # one super-step
    assert {s.attributes["graph_lab.settled_seq"] for s in squares} == {2}  # type: ignore[index]
    # entered together, before any of them settled
    assert max(s.start_time for s in squares) <= min(s.end_time for s in squares)  # type: ignore[type-var]


def test_a_nodes_own_spans_are_children_of_its_station_span(lab: Lab, exporter: InMemorySpanExporter) -> None:
    """While a node runs its station span is current, so the spans its code opens nest under it;
    after the drive the caller's context is as it was (no span of the run is left current)."""
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    USER["tracer"] = provider.get_tracer("user code")
    g = lab.graph("measured", state_type=Laps, output_type=int)
    g.node(Measure)
    g.node(Report)
    run = g.start(Measure(), state=Laps())
    run.step()
    assert not trace.get_current_span().get_span_context().is_valid  # nothing leaks to the caller
    run.run()
    assert run.status == "done" and run.output == 1
    assert not trace.get_current_span().get_span_context().is_valid
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert parent_id(spans["user work"]) == spans["run node Measure"].context.span_id
    assert parent_id(spans["user report"]) == spans["run node Report"].context.span_id
    assert spans["user work"].context.trace_id == spans["run graph measured"].context.trace_id
    with USER["tracer"].start_as_current_span(
        "my experiment"
    ) as mine:  # a span of the caller's holds the run
        again = g.start(Measure(), state=Laps())
        again.run()
    [second] = [s for s in exporter.get_finished_spans() if s.name == "run graph measured"][1:]
    assert parent_id(second) == mine.get_span_context().span_id
    provider.shutdown()


def test_tracing_off_leaves_a_run_without_a_tracer(tmp_path: Path) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Lab(tmp_path / "off.duckdb") as lab:
        lab.observe(provider, enabled=False)
        run = flaky(lab).start(Prep(), state=Laps(), deps=Script([None]))
        run.run()
        assert run.status == "done" and run._journal.tracer is None
        lab.observe(provider)  # on again: runs made from now on are traced
        traced = flaky(lab).start(Prep(), state=Laps(), deps=Script([None]))
        assert traced._journal.tracer is not None
        lab.observe()  # automatic: no global provider is configured in this process
        assert flaky(lab).start(Prep(), state=Laps(), deps=Script([None]))._journal.tracer is None
        assert all(TRACE_KEY not in e.payload for e in run.events())
    assert exporter.get_finished_spans() == ()
    provider.shutdown()


def _spans_from(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.slow
def test_a_run_resumed_in_another_process_links_to_its_earlier_trace(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    """Process A (a global provider, configured as a user would) parks, answers, steps once and exits
    with the run paused; this process resumes it: a new trace whose run span links to A's last."""
    db, spans_file = tmp_path / "lab.duckdb", tmp_path / "spans.jsonl"
    done = subprocess.run(
        [sys.executable, str(WORKER), str(db), str(spans_file)], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr
    told = json.loads(done.stdout.strip().splitlines()[-1])
    assert told["untraced_before"] is True  # no provider configured yet: no tracer, nothing to pay
    assert told["status"] == "running"
    theirs = _spans_from(spans_file)
    segments = [s for s in theirs if s["name"] == "run graph mail"]
    assert [s["attributes"]["graph_lab.status"] for s in segments] == ["waiting", "paused"]  # ended at exit
    assert all(s["attributes"]["graph_lab.run_id"] == told["run_id"] for s in segments)
    last = segments[-1]["context"]

    with Lab(db) as again:
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        again.observe(provider)
        declare_mail(again)
        run = again.resume(told["run_id"])
        run.run()  # ConfirmSend parks
        run.approve()
        run.run()
        assert run.status == "done"
    mine = exporter.get_finished_spans()
    first = by_name(mine, "run graph ")[0]
    assert first.parent is None  # a new trace in this process ...
    assert f"0x{first.context.trace_id:032x}" != last["trace_id"]
    [link] = first.links  # ... linked to the other process's last segment
    assert (f"0x{link.context.trace_id:032x}", f"0x{link.context.span_id:016x}") == (
        last["trace_id"],
        last["span_id"],
    )
    assert first.attributes["graph_lab.resumed"] is True  # type: ignore[index]
    assert [s.name for s in by_name(mine, "run node ")] == [
        "run node ConfirmSend",
        "run node ConfirmSend",
        "run node Send",
    ]
    provider.shutdown()
