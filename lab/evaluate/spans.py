"""Each case's span tree, for the evaluators that read `ctx.span_tree` (`HasMatchingSpan`, your own).

Two sources, the first that has one:

1. **captured live**, as pydantic-evals' own `Dataset.evaluate` does: in this process
   (`workers=0`) each case's run is driven inside pydantic-evals' `context_subtree()`, which hangs
   its in-memory exporter on the global tracer provider and keeps the spans that end in the
   case's context; the lab's run spans (lab/observe.py) end there, and so do the spans the
   stations open themselves (a pydantic-ai agent's, `logfire.span`). It needs an SDK tracer
   provider (`logfire.configure()`, `trace.set_tracer_provider(TracerProvider())`), as
   pydantic-evals does;
2. **rebuilt from the store**: otherwise (no provider configured, a run driven on Ray by another
   process, a case run before a kernel restart) the run's stored events are fed through the lab's
   own `RunTracer` (the one that traces live runs, fed here the rows it was fed then) onto a
   private tracer provider, which gives the same `run graph` / `run node` spans with their
   stored times and attributes, but not the spans a station opened itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..observe import RunTracer

if TYPE_CHECKING:
    from ..lab import Lab

__all__ = ("capture", "rebuilt_tree")


def capture(keep: Callable[[str, Any], None]) -> Callable[[str], Any]:
    """A `Batch.run(around_run=...)` that drives each run inside pydantic-evals' `context_subtree()`
    and hands `keep(run_id, tree)` the run's `SpanTree` (nothing when no SDK provider records spans)."""
    from pydantic_evals.otel import SpanTree

    try:  # what `Dataset.evaluate` runs each case in; not exported by `pydantic_evals.otel`
        from pydantic_evals.otel._context_subtree import context_subtree
    except ImportError:  # moved in another version: every case's tree is rebuilt from the store
        return nullcontext_around

    @contextmanager
    def around(run_id: str) -> Iterator[None]:
        with context_subtree() as tree:
            yield
        if isinstance(tree, SpanTree):  # filled as the context closed
            keep(run_id, tree)

    return around


@contextmanager
def nullcontext_around(run_id: str) -> Iterator[None]:
    yield


def rebuilt_tree(lab: Lab, record: Any, events: Sequence[Any]) -> Any:
    """The `SpanTree` of a run rebuilt from its stored `events` (`record`: its row)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_evals.otel import SpanTree

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = RunTracer(lab, record.run_id, provider, fresh=True)  # fresh: links to no earlier trace
    tracer.describe(record)
    tracer([lab.store.event_row(e) for e in events])  # one transaction: no station made current here
    tracer.end_open()  # a run parked at a gate: its segment ends as `paused`
    tree = SpanTree()
    tree.add_readable_spans(exporter.get_finished_spans())
    provider.shutdown()
    return tree
