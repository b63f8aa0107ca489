"""The evaluation tables (`evaluations`, `eval_cases`, `eval_scores`, `eval_analyses`) on both backends (DuckDB file
and PostgreSQL): what `lab.evaluate` writes (docs/evaluate.md), read back alike, queryable with `lab.sql`."""

from __future__ import annotations

import pytest

from lab import Lab, StoreError
from lab.store.evals import EvalAnalysisRecord, EvalCaseRecord, EvalScoreRecord, EvalTables
from lab.store.schema import SCHEMA_VERSION


def _case(i: int, status: str = "scored", **kw) -> EvalCaseRecord:
    base = dict(
        evaluation_id="ev-1", case_index=i, case_name=f"case {i}", run_id=f"run-{i}", status=status,
        output={"n": i}, expected={"n": i}, duration=0.25 * i, usage={"input_tokens": 10 * i}, error=None,
        updated_at=None,
    )  # fmt: skip
    return EvalCaseRecord(**{**base, **kw})


def test_an_evaluation_is_created_once_and_found_again(location: str) -> None:
    lab = Lab(location)
    store = lab.store
    assert isinstance(store, EvalTables)
    rec, created = store.add_evaluation(
        "ev-1", dataset="docs", graph_key="g", revision=2, cases=3, spec={"names": ["a"]}
    )
    assert created and (rec.dataset, rec.graph_key, rec.revision, rec.cases, rec.spec) == (
        "docs",
        "g",
        2,
        3,
        {"names": ["a"]},
    )
    again, created = store.add_evaluation("ev-1", dataset="other", graph_key="h", revision=9, cases=1)
    assert not created and again == rec  # the stored one wins: an evaluation is continued, never rewritten
    assert [e.evaluation_id for e in store.evaluations()] == ["ev-1"]
    assert store.evaluation("nope") is None
    lab.close()
    reopened = Lab(location)
    assert reopened.store.evaluation("ev-1") == rec
    reopened.close()


def test_a_case_and_its_scores_are_replaced_together(lab: Lab) -> None:
    store = lab.store
    store.add_evaluation("ev-1", dataset="docs", graph_key="g", revision=1, cases=2)
    store.record_eval_case(_case(1, status="waiting", output=None, duration=None, usage=None))
    scores = [
        EvalScoreRecord("ev-1", 1, "EqualsExpected", "assertion", True, None, "EqualsExpected"),
        EvalScoreRecord("ev-1", 1, "accuracy", "score", 0.75, "3 of 4", "Accuracy"),
        EvalScoreRecord("ev-1", 1, "tone", "label", "calm", None, "Tone"),
    ]
    store.record_eval_case(_case(1), scores)
    store.record_eval_case(_case(0, status="failed", output=None, error="ValueError: bad"))
    cases = store.eval_cases("ev-1")
    assert [(c.case_index, c.status, c.run_id) for c in cases] == [
        (0, "failed", "run-0"),
        (1, "scored", "run-1"),
    ]
    one = cases[1]
    assert (one.output, one.duration, one.usage) == ({"n": 1}, 0.25, {"input_tokens": 10})
    assert [(s.name, s.kind, s.value, s.reason) for s in one.scores] == [
        ("EqualsExpected", "assertion", True, None), ("accuracy", "score", 0.75, "3 of 4"), ("tone", "label", "calm", None)
    ]  # fmt: skip
    assert cases[0].error == "ValueError: bad" and cases[0].scores == ()
    with pytest.raises(StoreError, match="two results named alike"):
        store.record_eval_case(_case(1), [scores[0], scores[0]])
    assert len(store.eval_cases("ev-1")[1].scores) == 3  # refused whole: nothing of it was written
    rows = lab.sql(
        "select c.case_name, s.name, s.kind from eval_cases c join eval_scores s "
        "using (evaluation_id, case_index) where s.kind = 'score'"
    ).fetchall()
    assert rows == [("case 1", "accuracy", "score")]
    assert store.eval_cases("nope") == []


def test_the_schema_has_the_evaluation_tables(lab: Lab) -> None:
    assert SCHEMA_VERSION >= 6
    for table in ("evaluations", "eval_cases", "eval_scores", "eval_analyses"):
        assert lab.sql(f"select count(*) from {table}").fetchall() == [(0,)]


def test_report_analyses_are_replaced_together_and_read_back_in_order(lab: Lab) -> None:
    store = lab.store
    store.add_evaluation("ev-1", dataset="docs", graph_key="g", revision=1, cases=2)
    matrix = {
        "type": "confusion_matrix",
        "title": "m",
        "class_labels": ["a", "b"],
        "matrix": [[1, 0], [0, 1]],
    }
    store.record_eval_analyses(
        "ev-1",
        [
            EvalAnalysisRecord("ev-1", 0, "ConfusionMatrixEvaluator", matrix, None),
            EvalAnalysisRecord("ev-1", 1, "Broken", None, "ValueError: no"),
        ],
    )
    got = store.eval_analyses("ev-1")
    assert [(a.position, a.evaluator, a.analysis, a.error) for a in got] == [
        (0, "ConfusionMatrixEvaluator", matrix, None),
        (1, "Broken", None, "ValueError: no"),
    ]
    assert got[0].created_at is not None
    scalar = {"type": "scalar", "title": "accuracy", "value": 0.5}
    store.record_eval_analyses("ev-1", [EvalAnalysisRecord("ev-1", 0, "Accuracy", scalar, None)])
    assert [a.analysis for a in store.eval_analyses("ev-1")] == [scalar]  # the earlier ones are gone
    assert lab.sql(
        "select analysis->>'title' from eval_analyses where evaluation_id = 'ev-1'"
    ).fetchall() == [("accuracy",)]
    assert store.eval_analyses("nope") == []
