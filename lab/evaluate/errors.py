"""What `lab.evaluate` refuses, and why."""

from __future__ import annotations

from ..errors import LabError

__all__ = ("EvaluationError", "pydantic_evals")


class EvaluationError(LabError):
    """An evaluation cannot go on as asked (the message says what to do)."""


def pydantic_evals() -> object:
    """The `pydantic_evals` module, or an error saying how to install it."""
    try:
        import pydantic_evals
    except ImportError as exc:
        raise EvaluationError(
            f"lab.evaluate needs pydantic-evals: pip install 'graph-lab[evals]' ({exc})"
        ) from None
    return pydantic_evals
