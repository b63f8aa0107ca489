"""The store's evaluation tables: `evaluations`, `eval_cases`, `eval_scores` (lab/evaluate/, docs/evaluate.md).

Mixed into both stores (`DuckDBEvals`, `PostgresEvals`), which give it a transaction and a
reading connection; the SQL is in sql_text.py, the tables in schema.py. Like effects, these rows
are written directly (a few per case, not one per boundary): a case's row and its scores are
replaced together in one transaction, so a case is either scored whole or not at all, and an
evaluation continued after a kernel restart finds exactly the cases that were finished.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ..errors import StoreError
from . import sql_text as q
from .dialect import Dialect

__all__ = ("EvalTables", "EvaluationRecord", "EvalCaseRecord", "EvalScoreRecord", "EvalAnalysisRecord", "ScoreKind")

ScoreKind = Literal["score", "assertion", "label", "failure"]
"""What an evaluator's result is: a number, a pass/fail, a string label, or the evaluator's own error."""


@dataclass(frozen=True)
class EvaluationRecord:
    """One evaluation: a data set over one graph revision."""

    evaluation_id: str
    dataset: str
    graph_key: str
    revision: int
    cases: int
    """How many cases the data set has."""
    spec: Any
    """What the evaluation was asked (JSON): the case names, the evaluators' names."""
    created_at: datetime


@dataclass(frozen=True)
class EvalScoreRecord:
    """One result of one evaluator on one case."""

    evaluation_id: str
    case_index: int
    name: str
    kind: ScoreKind
    value: Any
    reason: str | None
    evaluator: str


@dataclass(frozen=True)
class EvalCaseRecord:
    """One case of an evaluation, linked to its run: its status (`scored`, `waiting`, `failed`),
    output, expected output, run duration (seconds), token usage and error."""

    evaluation_id: str
    case_index: int
    case_name: str
    run_id: str | None
    status: str
    output: Any
    expected: Any
    duration: float | None
    usage: dict[str, Any] | None
    error: str | None
    updated_at: datetime
    scores: tuple[EvalScoreRecord, ...] = field(default=())


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str)


@dataclass(frozen=True)
class EvalAnalysisRecord:
    """One result of a report evaluator over a whole evaluation: a pydantic-evals `ReportAnalysis`
    as JSON (`{"type": "scalar", ...}`), or, when the evaluator raised, its error."""

    evaluation_id: str
    position: int
    evaluator: str
    analysis: Any
    error: str | None
    created_at: datetime | None = None


class EvalTables:
    """Create, record and read evaluations, on any backend."""

    dialect: Dialect

    @abstractmethod
    def _eval_tx(self, what: str) -> AbstractContextManager[Any]:
        """A connection inside one transaction (committed on success, rolled back on error);
        driver errors become `StoreError` naming `what`."""

    @abstractmethod
    def _eval_reading(self) -> AbstractContextManager[Any]:
        """A connection to read the evaluation tables; driver errors become `StoreError`."""

    def add_evaluation(
        self, evaluation_id: str, *, dataset: str, graph_key: str, revision: int, cases: int, spec: Any = None
    ) -> tuple[EvaluationRecord, bool]:
        """Record a new evaluation, or find the one of that id; returns `(record, created)`."""
        sql = self.dialect.sql
        with self._eval_tx(f"record evaluation {evaluation_id!r}") as con:
            row = con.execute(sql(q.EVALUATION), [evaluation_id]).fetchone()
            if row is None:
                con.execute(
                    sql(q.EVAL_INSERT),
                    [evaluation_id, dataset, graph_key, revision, cases, _dump(spec), _now()],
                )
                row = con.execute(sql(q.EVALUATION), [evaluation_id]).fetchone()
                return self._evaluation_record(row), True
        return self._evaluation_record(row), False

    def evaluation(self, evaluation_id: str) -> EvaluationRecord | None:
        with self._eval_reading() as con:
            row = con.execute(self.dialect.sql(q.EVALUATION), [evaluation_id]).fetchone()
        return self._evaluation_record(row) if row else None

    def evaluations(self) -> list[EvaluationRecord]:
        """Every evaluation in the store, oldest first."""
        with self._eval_reading() as con:
            rows = con.execute(self.dialect.sql(q.EVALUATIONS)).fetchall()
        return [self._evaluation_record(r) for r in rows]

    def record_eval_case(self, case: EvalCaseRecord, scores: Sequence[EvalScoreRecord] = ()) -> None:
        """Replace case `case.case_index` of its evaluation, with its scores, in one transaction."""
        self.record_eval_cases([(case, scores)])

    def record_eval_cases(self, cases: Sequence[tuple[EvalCaseRecord, Sequence[EvalScoreRecord]]]) -> None:
        """Replace several cases of one evaluation, each with its scores, all in one transaction."""
        if not cases:
            return
        sql = self.dialect.sql
        for case, scores in cases:
            names = [s.name for s in scores]
            if len(set(names)) != len(names):
                raise StoreError(f"case {case.case_name!r} has two results named alike: {sorted(names)}")
        first = cases[0][0]
        what = f"record case {first.case_name!r}{f' and {len(cases) - 1} more' if len(cases) > 1 else ''} of evaluation {first.evaluation_id!r}"
        now = _now()
        with self._eval_tx(what) as con:
            for case, scores in cases:
                key = [case.evaluation_id, case.case_index]
                con.execute(sql(q.EVAL_SCORES_DELETE), key)
                con.execute(sql(q.EVAL_CASE_DELETE), key)
                con.execute(
                    sql(q.EVAL_CASE_INSERT),
                    [*key, case.case_name, case.run_id, case.status, _dump(case.output), _dump(case.expected),
                     case.duration, _dump(case.usage), case.error, now],
                )  # fmt: skip
                for s in scores:
                    con.execute(
                        sql(q.EVAL_SCORE_INSERT),
                        [*key, s.name, s.kind, _dump(s.value), s.reason, s.evaluator],
                    )

    def eval_cases(self, evaluation_id: str) -> list[EvalCaseRecord]:
        """The recorded cases of an evaluation, by index, each with its scores."""
        sql = self.dialect.sql
        with self._eval_reading() as con:
            rows = con.execute(sql(q.EVAL_CASES), [evaluation_id]).fetchall()
            score_rows = con.execute(sql(q.EVAL_SCORES), [evaluation_id]).fetchall()
        load = self._eval_load
        scores: dict[int, list[EvalScoreRecord]] = {}
        for r in score_rows:
            r = tuple(r)
            scores.setdefault(int(r[1]), []).append(
                EvalScoreRecord(r[0], int(r[1]), r[2], r[3], load(r[4]), r[5], r[6])
            )
        out = []
        for r in rows:
            r = tuple(r)
            out.append(
                EvalCaseRecord(
                    evaluation_id=r[0], case_index=int(r[1]), case_name=r[2], run_id=r[3], status=r[4],
                    output=load(r[5]), expected=load(r[6]), duration=r[7], usage=load(r[8]), error=r[9],
                    updated_at=r[10], scores=tuple(scores.get(int(r[1]), ())),
                )
            )  # fmt: skip
        return out

    def record_eval_analyses(self, evaluation_id: str, analyses: Sequence[EvalAnalysisRecord]) -> None:
        """Replace the report evaluators' analyses of an evaluation, all in one transaction."""
        sql = self.dialect.sql
        now = _now()
        with self._eval_tx(f"record the analyses of evaluation {evaluation_id!r}") as con:
            con.execute(sql(q.EVAL_ANALYSES_DELETE), [evaluation_id])
            for i, a in enumerate(analyses):
                con.execute(
                    sql(q.EVAL_ANALYSIS_INSERT), [evaluation_id, i, a.evaluator, _dump(a.analysis), a.error, now]
                )

    def eval_analyses(self, evaluation_id: str) -> list[EvalAnalysisRecord]:
        """The report evaluators' analyses of an evaluation, in the order they were made."""
        with self._eval_reading() as con:
            rows = con.execute(self.dialect.sql(q.EVAL_ANALYSES), [evaluation_id]).fetchall()
        return [
            EvalAnalysisRecord(r[0], int(r[1]), r[2], self._eval_load(r[3]), r[4], r[5]) for r in map(tuple, rows)
        ]

    def _eval_load(self, value: Any) -> Any:
        try:
            return self.dialect.load(value)
        except ValueError:
            raise StoreError(
                f"an evaluation row holds damaged JSON; restore {self.dialect.restore_what} from a backup"
            ) from None

    def _evaluation_record(self, r: Any) -> EvaluationRecord:
        r = tuple(r)
        return EvaluationRecord(r[0], r[1], r[2], int(r[3]), int(r[4]), self._eval_load(r[5]), r[6])
