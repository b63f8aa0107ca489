"""Evaluate a graph over a pydantic-evals data set: `lab.evaluate(graph, dataset)` (docs/evaluate.md).

One lab run per case (in this process with `workers=0`, or on Ray through `lab.batch`), each
case's output scored by the data set's evaluators and the caller's, every score, assertion,
duration and token count kept in the store (`evaluations`, `eval_cases`, `eval_scores`) and
linked to the case's run. `lab.compare_evaluations(a, b)` sets two graph revisions side by side.
Needs the `evals` extra: `pip install 'graph-lab[evals]'` (pydantic-evals, matplotlib).
"""

from .compare import Comparison, compare_evaluations
from .errors import EvaluationError
from .evaluation import Evaluation, evaluate, open_evaluation

__all__ = (
    "Comparison",
    "Evaluation",
    "EvaluationError",
    "compare_evaluations",
    "evaluate",
    "open_evaluation",
)
