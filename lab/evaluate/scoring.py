"""Score one finished case with pydantic-evals evaluators, as `Dataset.evaluate` does.

Each evaluator gets an `EvaluatorContext` (the case's name, inputs, metadata and expected output;
the run's output, its duration and its token usage as metrics) and its result is read by
pydantic-evals' rules: a mapping gives one result per key, anything else one result under the
evaluator's default evaluation name; a `bool` is an assertion, a number a score, a `str` a label,
an `EvaluationReason` carries a reason; an evaluator that raises is recorded as a failure, not
a score. The run's duration is the time its stations worked (the `ms` of its attempts), not the
time it waited for a person at a gate.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine.loop import run_sync
from ..store.evals import EvalScoreRecord, ScoreKind

__all__ = ("score_case", "run_duration", "run_usage")


def run_duration(events: Sequence[Any]) -> float:
    """Seconds the run's stations worked: the sum of its attempts' `ms` (settled and failed)."""
    return sum(float(e.payload.get("ms", 0.0)) for e in events if isinstance(e.payload, dict)) / 1000.0


def run_usage(jobs: Sequence[Any]) -> dict[str, int | float]:
    """Token usage of the run's delegated agent jobs, summed per counter (`input_tokens`, `requests`...)."""
    out: dict[str, int | float] = {}
    for job in jobs:
        for key, value in (job.usage or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
    return out


def _kind(value: Any) -> ScoreKind:
    if isinstance(value, bool):
        return "assertion"
    if isinstance(value, int | float):
        return "score"
    return "label"


async def _evaluate(
    evaluators: Sequence[Any], ctx: Any, evaluation_id: str, index: int
) -> list[EvalScoreRecord]:
    from pydantic_evals.evaluators import EvaluationReason

    out: list[EvalScoreRecord] = []
    for evaluator in evaluators:
        name = evaluator.get_default_evaluation_name()
        source = evaluator.get_serialization_name()
        try:
            raw = await evaluator.evaluate_async(ctx)
            results = raw if isinstance(raw, Mapping) else {name: raw}
            for key, result in results.items():
                value, reason = (
                    (result.value, result.reason) if isinstance(result, EvaluationReason) else (result, None)
                )
                if not isinstance(value, bool | int | float | str):
                    raise TypeError(f"{evaluator!r}.evaluate returned a value of an invalid type: {value!r}")
                out.append(
                    EvalScoreRecord(evaluation_id, index, str(key), _kind(value), value, reason, source)
                )
        except Exception as exc:  # an evaluator's own error is its result, as in pydantic-evals
            out.append(
                EvalScoreRecord(
                    evaluation_id, index, name, "failure", None, f"{type(exc).__name__}: {exc}", source
                )
            )
    return out


@functools.cache
def case_context() -> type:
    """pydantic-evals' `EvaluatorContext` whose span tree is made when an evaluator first reads
    `ctx.span_tree` (spans.py): rebuilding a run's spans costs about a fifth of a cheap case, and
    most evaluators never look at them. Made on first use, as pydantic-evals is imported lazily."""
    from pydantic_evals.evaluators import EvaluatorContext

    @dataclass(kw_only=True)
    class CaseContext(EvaluatorContext):  # type: ignore[type-arg]
        tree_source: Callable[[], Any] | None = field(default=None, repr=False, compare=False)
        """Makes the case's `SpanTree` (or a `SpanTreeRecordingError`), once, when first read."""

        @property
        def span_tree(self) -> Any:
            if self.tree_source is not None:
                self._span_tree, self.tree_source = self.tree_source(), None
            return super().span_tree

    return CaseContext


def score_case(
    evaluators: Sequence[Any],
    case: Any,
    output: Any,
    *,
    duration: float,
    usage: dict[str, int | float],
    evaluation_id: str,
    index: int,
    span_tree: Callable[[], Any],
) -> list[EvalScoreRecord]:
    """Every result of `evaluators` on `case` with the run's `output` (`span_tree()` makes its span
    tree if an evaluator reads it), run on a loop of its own: evaluators are async, and this may be
    called inside a notebook's running loop."""
    ctx = case_context()(
        name=case.name,
        inputs=case.inputs,
        metadata=case.metadata,
        expected_output=case.expected_output,
        output=output,
        duration=duration,
        _span_tree=None,
        tree_source=span_tree,
        attributes={},
        metrics=dict(usage),
    )
    return run_sync(_evaluate(evaluators, ctx, evaluation_id, index))  # also inside a notebook cell's loop
