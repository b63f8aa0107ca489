"""Span-based evaluators (`HasMatchingSpan`, any evaluator reading `ctx.span_tree`) get each case
run's span tree (lab/evaluate/spans.py).

Scenarios:
- no tracer provider configured (this process): each case's tree is rebuilt from its run's stored
  events, so `HasMatchingSpan(name_contains=<station>)` passes exactly on the cases whose run
  visited that station; a station's own span is not in a rebuilt tree
- a global SDK tracer provider (a process of its own: a provider is set once per process): the
  tree is captured live as pydantic-evals' `Dataset.evaluate` captures it, the station's own
  `lookup` span included
- on Ray (2 workers): each tree is rebuilt from the rows the workers sent back, so the stations'
  spans match and the worker's own `lookup` span does not (it never reached this process)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import trace

from lab import Lab
from tests.evals.spans_graph import dataset, declare

HERE = Path(__file__).parent


@pytest.fixture
def lab(tmp_path: Path):
    lab = Lab(str(tmp_path / "lab.duckdb"))
    yield lab
    lab.close()


def test_span_evaluators_see_the_stations_each_case_visited(lab: Lab) -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider), "no provider in this process"
    g, Route = declare(lab)
    ev = lab.evaluate(g, dataset(), entry=Route(), progress=False)
    rows = {r.name: r for r in ev.rows()}
    assert {n: r.status for n, r in rows.items()} == {"hi": "scored", "hello": "scored", "yo": "scored"}
    assert {n: r.assertions for n, r in rows.items()} == {
        "hi": {"went_long": False, "went_short": True, "looked_up": False},
        "hello": {"went_long": True, "went_short": False, "looked_up": False},
        "yo": {"went_long": False, "went_short": True, "looked_up": False},
    }
    assert all(not r.failures for r in rows.values())
    stored = lab.sql(
        "select case_index, name, value from eval_scores where evaluation_id = ? and name = 'went_long'",
        [ev.id],
    ).fetchall()
    assert sorted(stored) == [(0, "went_long", "false"), (1, "went_long", "true"), (2, "went_long", "false")]


def test_live_capture_with_a_tracer_provider_keeps_the_stations_own_spans(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(HERE / "spans_graph.py"), str(tmp_path / "lab.duckdb")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parent.parent,
    )
    assert out.returncode == 0, out.stderr
    assertions = json.loads(out.stdout.strip().splitlines()[-1])
    assert assertions == {
        "hi": {"went_long": False, "went_short": True, "looked_up": False},
        "hello": {"went_long": True, "went_short": False, "looked_up": True},
        "yo": {"went_long": False, "went_short": True, "looked_up": False},
    }


def test_on_ray_the_trees_are_rebuilt_from_the_rows_the_workers_sent(lab: Lab, ray_session: str) -> None:
    from lab.batch import release_workers

    g, Route = declare(lab)
    try:
        ev = lab.evaluate(g, dataset(), entry=Route(), workers=2, progress=False)
    finally:
        release_workers()
    assert {r.name: r.assertions for r in ev.rows()} == {
        "hi": {"went_long": False, "went_short": True, "looked_up": False},
        "hello": {
            "went_long": True,
            "went_short": False,
            "looked_up": False,
        },  # the worker's own span stays there
        "yo": {"went_long": False, "went_short": True, "looked_up": False},
    }
