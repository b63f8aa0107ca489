"""Report evaluators, `repeat=` and `max_concurrency=` of `lab.evaluate`, as pydantic-evals'
`Dataset.evaluate` has them (docs/evaluate.md), on a real DuckDB file.

Scenarios:
- the data set's report evaluators (`ConfusionMatrixEvaluator` over metadata) and the caller's
  (`report_evaluators=`) run over the evaluation's cases; their analyses are stored
  (`eval_analyses`, queryable with `lab.sql`), come back in `evaluation.report().analyses` equal to
  what `Dataset.evaluate` makes of the same outputs, a raising one is kept as its error, and the
  table shows them; an evaluation opened from the store shows the same
- `repeat=2`: each case runs twice, named `hi [1/2]`, `hi [2/2]` as pydantic-evals names them, the
  report groups them by source case; `max_concurrency=` is checked as pydantic-evals checks it
- bad report evaluators, repeat or max_concurrency are refused with a clear error
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import (
    ConfusionMatrixEvaluator,
    EqualsExpected,
    ReportEvaluator,
    ReportEvaluatorContext,
)
from pydantic_evals.reporting.analyses import ScalarResult

from lab import ArgumentError, Lab
from tests.evals.spans_graph import Text, declare


@dataclass
class Accuracy(ReportEvaluator):
    def evaluate(self, ctx: ReportEvaluatorContext) -> ScalarResult:
        right = sum(c.output == c.expected_output for c in ctx.report.cases)
        return ScalarResult(title="accuracy", value=right / len(ctx.report.cases) * 100, unit="%")


@dataclass
class Broken(ReportEvaluator):
    def evaluate(self, ctx: ReportEvaluatorContext) -> ScalarResult:
        raise ValueError("this report evaluator is broken on purpose")


def dataset() -> Dataset:
    cases = [
        Case(name="hi", inputs=Text("hi"), expected_output="hi", metadata={"route": "short"}),
        Case(name="hello", inputs=Text("hello there"), expected_output="hello", metadata={"route": "long"}),
        Case(name="yo", inputs=Text("yo"), expected_output="yo", metadata={"route": "short"}),
    ]
    matrix = ConfusionMatrixEvaluator(
        predicted_from="output", expected_from="expected_output", title="answers"
    )
    routes = ConfusionMatrixEvaluator(predicted_from="metadata", predicted_key="route", expected_from="metadata", expected_key="route", title="routes")  # fmt: skip
    return Dataset(
        name="routed", cases=cases, evaluators=[EqualsExpected()], report_evaluators=[matrix, routes]
    )


def task(t: Text) -> str:
    """What the router graph answers (spans_graph.py), for pydantic-evals' own evaluation."""
    return t.text[:4] if len(t.text) > 4 else t.text


@pytest.fixture
def lab(tmp_path: Path):
    lab = Lab(str(tmp_path / "lab.duckdb"))
    yield lab
    lab.close()


def test_report_evaluators_run_are_stored_and_shown(lab: Lab) -> None:
    g, Route = declare(lab)
    ev = lab.evaluate(g, dataset(), entry=Route(), report_evaluators=[Accuracy(), Broken()], progress=False)
    report = ev.report()
    their_dataset = Dataset(
        name="routed",
        cases=dataset().cases,
        evaluators=[EqualsExpected()],
        report_evaluators=[*dataset().report_evaluators, Accuracy(), Broken()],
    )
    theirs = asyncio.run(their_dataset.evaluate(task, progress=False))  # evaluate_sync leaves its loop open
    assert [a.model_dump() for a in report.analyses] == [a.model_dump() for a in theirs.analyses]
    assert [a.title for a in report.analyses] == ["answers", "routes", "accuracy"]
    assert report.analyses[2].value == pytest.approx(200 / 3)
    assert [f.error_message for f in report.report_evaluator_failures] == [
        "ValueError: this report evaluator is broken on purpose"
    ]
    stored = lab.sql(
        "select position, evaluator, analysis->>'type', error is not null from eval_analyses "
        "where evaluation_id = ? order by position",
        [ev.id],
    ).fetchall()
    assert stored == [
        (0, "ConfusionMatrixEvaluator", "confusion_matrix", False),
        (1, "ConfusionMatrixEvaluator", "confusion_matrix", False),
        (2, "Accuracy", "scalar", False),
        (3, "Broken", None, True),
    ]
    page = ev._repr_html_()
    assert "Report evaluators" in page and "predicted hell" in page and "66.7 %" in page
    assert "this report evaluator is broken on purpose" in page
    opened = lab.evaluation(ev.id)
    assert [a.title for a in opened.report().analyses] == ["answers", "routes", "accuracy"]
    assert "predicted hell" in opened._repr_html_()


def test_repeat_runs_each_case_that_many_times_named_as_pydantic_evals_names_them(lab: Lab) -> None:
    g, Route = declare(lab)
    ev = lab.evaluate(g, dataset(), entry=Route(), repeat=2, max_concurrency=1, progress=False)
    rows = ev.rows()
    assert [r.name for r in rows] == [
        "hi [1/2]",
        "hi [2/2]",
        "hello [1/2]",
        "hello [2/2]",
        "yo [1/2]",
        "yo [2/2]",
    ]
    assert len({r.run_id for r in rows}) == 6 and all(r.status == "scored" for r in rows)
    assert [r.assertions["EqualsExpected"] for r in rows] == [True, True, False, False, True, True]
    theirs = asyncio.run(dataset().evaluate(task, repeat=2, progress=False))
    assert sorted(c.name for c in theirs.cases) == sorted(r.name for r in rows)
    groups = ev.report().case_groups()
    assert groups is not None and sorted(gr.name for gr in groups) == ["hello", "hi", "yo"]
    again = lab.evaluate(g, dataset(), entry=Route(), repeat=2, progress=False)
    assert [r.run_id for r in again.rows()] == [r.run_id for r in rows]  # continued, nothing run again


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"report_evaluators": [EqualsExpected()]}, "ReportEvaluator instance"),
        ({"repeat": 0}, "repeat is how many runs"),
        ({"max_concurrency": 0}, "at most how many cases run at once"),
    ],
)
def test_bad_report_options_are_refused(lab: Lab, kwargs: dict, says: str) -> None:
    g, Route = declare(lab)
    with pytest.raises(ArgumentError, match=says):
        lab.evaluate(g, dataset(), entry=Route(), progress=False, **kwargs)
    assert lab.store.evaluations() == []
