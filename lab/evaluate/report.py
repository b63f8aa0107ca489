"""An evaluation as pydantic-evals reports it: an `EvaluationReport` rebuilt from the store, and the
HTML table a notebook shows (per-case rows, the averages row of `ReportCaseAggregate.average`:
mean scores, the assertions' pass rate, mean duration and tokens), with the score plot beside it."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .evaluation import CaseRow, Evaluation

__all__ = ("build_report", "evaluation_html", "fmt", "tokens")


def _result(name: str, value: Any, reason: str | None, evaluator: str) -> Any:
    from pydantic_evals.evaluators import EvaluationResult, EvaluatorSpec

    return EvaluationResult(
        name=name, value=value, reason=reason, source=EvaluatorSpec(name=evaluator, arguments=None)
    )


def build_report(ev: Evaluation) -> Any:
    """`pydantic_evals.reporting.EvaluationReport` of the stored cases: scored ones as `ReportCase`s
    (token usage as metrics), failed ones as `ReportCaseFailure`s (`Evaluation.report` adds the
    report evaluators' analyses, analyses.py). Each case's inputs and metadata are
    the data set's when the evaluation has it (`lab.evaluate`), else `{"run_id": ...}` and None."""
    from pydantic_evals.evaluators import EvaluatorFailure, EvaluatorSpec
    from pydantic_evals.reporting import EvaluationReport, ReportCase, ReportCaseFailure

    cases, failures = [], []
    source, source_names = ev.case_sources(), ev.source_names()
    for rec in ev.lab.store.eval_cases(ev.id):  # type: ignore[attr-defined]
        inputs, metadata = source.get(rec.case_index, ({"run_id": rec.run_id}, None))
        if rec.status == "failed":
            failures.append(
                ReportCaseFailure(
                    name=rec.case_name, inputs=inputs, metadata=metadata, expected_output=rec.expected,
                    error_message=rec.error or "", error_stacktrace="",
                    source_case_name=source_names.get(rec.case_index),
                )
            )  # fmt: skip
            continue
        if rec.status != "scored":
            continue
        by: dict[str, dict[str, Any]] = {"score": {}, "assertion": {}, "label": {}}
        broken = []
        for s in rec.scores:
            if s.kind == "failure":
                broken.append(
                    EvaluatorFailure(
                        name=s.name, error_message=s.reason or "", error_stacktrace="",
                        source=EvaluatorSpec(name=s.evaluator, arguments=None),
                    )
                )  # fmt: skip
            else:
                by[s.kind][s.name] = _result(s.name, s.value, s.reason, s.evaluator)
        metrics = {k: v for k, v in (rec.usage or {}).items() if isinstance(v, int | float)}
        cases.append(
            ReportCase(
                name=rec.case_name, inputs=inputs, metadata=metadata, expected_output=rec.expected, output=rec.output,
                metrics=metrics, attributes={"run_id": rec.run_id}, scores=by["score"], labels=by["label"],
                assertions=by["assertion"], task_duration=rec.duration or 0.0, total_duration=rec.duration or 0.0,
                evaluator_failures=broken, source_case_name=source_names.get(rec.case_index),
            )
        )  # fmt: skip
    return EvaluationReport(name=ev.id, cases=cases, failures=failures)


def fmt(value: Any) -> str:
    """A value in a table cell: floats to 3 significant places, the rest as repr, cut at 60 characters."""
    if isinstance(value, float):
        text = f"{value:.3g}"
    elif value is None:
        text = ""
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def tokens(usage: dict[str, Any]) -> float:
    """A run's tokens: `total_tokens` when its usage has it, else input plus output tokens."""
    if isinstance(usage.get("total_tokens"), int | float):
        return float(usage["total_tokens"])
    return float(
        sum(
            v
            for k, v in usage.items()
            if k in ("input_tokens", "output_tokens") and isinstance(v, int | float)
        )
    )


def _tokens(usage: dict[str, Any]) -> str:
    total = tokens(usage)
    return str(int(total)) if total else ""


def _marks(assertions: dict[str, bool]) -> str:
    return "".join(
        f'<span title="{html.escape(k)}" style="color:{"#1a7f37" if v else "#cf222e"}">{"✔" if v else "✗"}</span>'
        for k, v in assertions.items()
    )


def _case_cells(r: CaseRow, score_names: list[str]) -> str:
    status_color = {"scored": "", "failed": "#cf222e", "waiting": "#9a6700", "pending": "#57606a"}[r.status]
    notes = "; ".join(f"{k}: {v}" for k, v in r.failures.items()) or (r.error or "")
    labels = ", ".join(f"{k}={v}" for k, v in r.labels.items())
    return (
        f"<td>{r.index}</td><td>{html.escape(r.name)}</td>"
        f'<td style="color:{status_color}">{html.escape(r.status)}</td>'
        + "".join(f"<td>{fmt(r.scores.get(n))}</td>" for n in score_names)
        + f"<td>{_marks(r.assertions)}</td><td>{html.escape(labels)}</td>"
        f"<td>{html.escape(fmt(r.output))}</td><td>{_duration(r.duration)}</td><td>{_tokens(r.usage)}</td>"
        f"<td><code>{html.escape(r.run_id or '')}</code></td><td>{html.escape(notes)}</td>"
    )


def evaluation_html(ev: Evaluation, extra: str = "") -> str:
    """The evaluation's table (a row per case, the averages row), `extra` (the report evaluators'
    analyses) and its score plot."""
    rows = ev.rows()
    score_names = sorted({n for r in rows for n in r.scores})
    avg = ev.averages()
    counts = ev.counts()
    head = " · ".join(f"{html.escape(k)} {v}" for k, v in sorted(counts.items()))
    rate = "" if avg.assertions is None else f"{avg.assertions:.1%}"
    mean_tokens = tokens(avg.metrics)
    average_row = (
        "<td></td><td><b>Averages</b></td><td></td>"
        + "".join(f"<td><b>{fmt(avg.scores.get(n))}</b></td>" for n in score_names)
        + f"<td><b>{rate}</b></td><td></td><td></td><td><b>{_duration(avg.task_duration)}</b></td>"
        f"<td><b>{f'{mean_tokens:.0f}' if mean_tokens else ''}</b></td><td></td><td></td>"
    )
    body = "".join(f"<tr>{_case_cells(r, score_names)}</tr>" for r in rows)
    heads = [
        "#",
        "case",
        "status",
        *score_names,
        "assertions",
        "labels",
        "output",
        "duration",
        "tokens",
        "run",
        "errors",
    ]
    waiting = counts.get("waiting", 0)
    note = (
        f"<div>{waiting} case(s) wait at a gate: approve them (<code>evaluation.open(i).approve()</code>), "
        "then <code>evaluation.run()</code></div>"
        if waiting
        else ""
    )
    return (
        f"<div><b>{html.escape(ev.id)}</b>: graph {html.escape(ev.record.graph_key)} revision "
        f"{ev.record.revision}, data set {html.escape(ev.record.dataset)}, {ev.record.cases} cases: {head}</div>{note}"
        "<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr></thead>"
        f"<tbody>{body}<tr>{average_row}</tr></tbody></table>" + extra + ev.plot().data
    )
