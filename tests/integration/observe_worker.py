"""A worker process for the trace tests (tests/integration/test_observe.py).

    python observe_worker.py DBPATH SPANS_FILE

It configures OpenTelemetry the way a user does (a global SDK `TracerProvider`, no lab-specific
setup), writing every finished span as one JSON line to SPANS_FILE (the SDK's own
`ConsoleSpanExporter`). It starts a mail run (tests/integration/gate_graphs.py), which parks at
its `interrupt()`, answers it and steps one station, then exits with the run paused mid-way: the
lab ends the open run span at exit. It prints one JSON line: the run id and whether a run made
before the provider was configured was traced.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor  # noqa: E402

from lab import Lab  # noqa: E402
from tests.integration import gate_graphs  # noqa: E402


def main(argv: list[str]) -> int:
    path, spans_file = argv[0], argv[1]
    lab = Lab(path)
    g = gate_graphs.declare_mail(lab)
    before = g.start(gate_graphs.Draft(), state=gate_graphs.Mail())  # no provider yet: not traced
    untraced = before._journal.tracer is None
    out = open(spans_file, "a", encoding="utf-8")  # noqa: SIM115 (the exporter writes to it until exit)
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\n"))
    )
    trace.set_tracer_provider(provider)
    run = g.start(gate_graphs.Draft(), state=gate_graphs.Mail())
    run.run()  # parks at Draft's interrupt()
    run.resume_with("eu")
    run.step()  # Draft settles; the run is paused before ConfirmSend
    print(json.dumps({"run_id": run.id, "untraced_before": untraced, "status": run.status}), flush=True)
    lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
