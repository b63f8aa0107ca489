"""Report evaluators (pydantic-evals `ReportEvaluator`: a confusion matrix, precision-recall, a
scalar or a table over all the cases), run as `Dataset.evaluate` runs them, kept and shown.

After each `evaluation.run()`, the data set's `report_evaluators` and the caller's
(`lab.evaluate(report_evaluators=...)`) get a `ReportEvaluatorContext` holding the evaluation's
report (`build_report`: its scored and failed cases, with each case's inputs and metadata from the
data set) and return one `ReportAnalysis` or a list; an evaluator that raises is kept as its error,
as pydantic-evals keeps it in `report_evaluator_failures`. The analyses replace the evaluation's
earlier ones in the store (`eval_analyses`, one transaction), so they always describe the cases
recorded so far; `evaluation.report()` carries them back (`report.analyses`), and the table shows
them under the cases.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..engine.loop import run_sync
from ..store.evals import EvalAnalysisRecord
from .report import fmt

if TYPE_CHECKING:
    from .evaluation import Evaluation

__all__ = ("run_report_evaluators", "stored_analyses", "analyses_html")


async def _analyse(evaluators: Sequence[Any], ctx: Any, evaluation_id: str) -> list[EvalAnalysisRecord]:
    out: list[EvalAnalysisRecord] = []
    for evaluator in evaluators:
        name = evaluator.get_serialization_name()
        try:
            result = await evaluator.evaluate_async(ctx)
        except Exception as exc:  # the evaluator's own error is its result, as in pydantic-evals
            out.append(
                EvalAnalysisRecord(evaluation_id, len(out), name, None, f"{type(exc).__name__}: {exc}")
            )
            continue
        for analysis in result if isinstance(result, list) else [result]:
            out.append(
                EvalAnalysisRecord(evaluation_id, len(out), name, analysis.model_dump(mode="json"), None)
            )
    return out


def run_report_evaluators(ev: Evaluation, evaluators: Sequence[Any]) -> None:
    """Run `evaluators` over the evaluation's report and store their analyses (none: nothing done)."""
    if not evaluators:
        return
    from pydantic_evals.evaluators import ReportEvaluatorContext

    from .report import build_report

    ctx = ReportEvaluatorContext(name=ev.id, report=build_report(ev), experiment_metadata=None)
    records = run_sync(_analyse(evaluators, ctx, ev.id))  # also inside a notebook cell's loop
    ev.lab.store.record_eval_analyses(ev.id, records)  # type: ignore[attr-defined]


def stored_analyses(ev: Evaluation) -> tuple[list[Any], list[Any]]:
    """The stored analyses as pydantic-evals' `ReportAnalysis` values, and the failures as
    `EvaluatorFailure`s: what `EvaluationReport.analyses` / `.report_evaluator_failures` hold."""
    from pydantic import TypeAdapter
    from pydantic_evals.evaluators import EvaluatorFailure, EvaluatorSpec
    from pydantic_evals.reporting.analyses import ReportAnalysis

    adapter: TypeAdapter[Any] = TypeAdapter(ReportAnalysis)
    analyses, failures = [], []
    for a in ev.lab.store.eval_analyses(ev.id):  # type: ignore[attr-defined]
        if a.error is not None:
            failures.append(
                EvaluatorFailure(
                    name=a.evaluator, error_message=a.error, error_stacktrace="",
                    source=EvaluatorSpec(name=a.evaluator, arguments=None),
                )
            )  # fmt: skip
        else:
            analyses.append(adapter.validate_python(a.analysis))
    return analyses, failures


def _table(columns: Sequence[Any], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _one(a: dict[str, Any]) -> str:
    kind, title = a.get("type"), html.escape(str(a.get("title", "")))
    if kind == "scalar":
        unit = f" {html.escape(a['unit'])}" if a.get("unit") else ""
        return f"<div><b>{title}</b>: {html.escape(fmt(a['value']))}{unit}</div>"
    if kind == "table":
        return f"<div><b>{title}</b></div>" + _table(a["columns"], a["rows"])
    if kind == "confusion_matrix":
        labels = a["class_labels"]
        rows = [[f"expected {lab}", *counts] for lab, counts in zip(labels, a["matrix"], strict=False)]
        return f"<div><b>{title}</b></div>" + _table(["", *(f"predicted {lab}" for lab in labels)], rows)
    if kind == "precision_recall":
        aucs = ", ".join(f"{c['name']}: AUC {fmt(c.get('auc'))}" for c in a["curves"])
        return f"<div><b>{title}</b>: {html.escape(aucs)}</div>"
    curves = ", ".join(str(c.get("name")) for c in a.get("curves", []))
    return f"<div><b>{title}</b> ({html.escape(str(kind))}): {html.escape(curves)}</div>"


def analyses_html(ev: Evaluation) -> str:
    """The report evaluators' analyses under the table: scalars, tables, confusion matrices, curves' AUC."""
    records = ev.lab.store.eval_analyses(ev.id)  # type: ignore[attr-defined]
    if not records:
        return ""
    parts = [
        f'<div style="color:#cf222e">{html.escape(a.evaluator)}: {html.escape(a.error)}</div>'
        if a.error is not None
        else _one(a.analysis)
        for a in records
    ]
    return "<div><b>Report evaluators</b></div>" + "".join(parts)
