"""The workflow errors: each says where (a path in the file, a column, a variable) and what to do."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import LabError, RunStateError, StateEditError

__all__ = (
    "WorkflowError",
    "Problem",
    "WorkflowDefinitionError",
    "ExpressionError",
    "BagError",
    "NoExitError",
    "ChoiceError",
    "SessionStoreError",
)


class WorkflowError(LabError):
    """Base class of the declarative-workflow errors."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong in a definition, at a path in the file (`activities[2].exits[0].when`)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '(top level)'}: {self.message}"


class WorkflowDefinitionError(WorkflowError, ValueError):
    """A workflow definition does not validate; `problems` lists every problem with its path."""

    def __init__(self, source: str, problems: Sequence[Problem]):
        self.source = source
        self.problems = list(problems)
        n = len(self.problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"workflow {source} has {n} problem{'s' if n != 1 else ''}; fix them and load it again:\n{lines}"
        )


class ExpressionError(WorkflowError, ValueError):
    """A gate expression that does not parse (or cannot be evaluated), pointing at the column."""

    def __init__(self, reason: str, expression: str, column: int, *, where: str = ""):
        self.reason = reason
        self.expression = expression
        self.column = column
        """1-based column in `expression` the error points at."""
        self.where = where
        prefix = f"{where}: " if where else ""
        caret = " " * (column - 1) + "^"
        super().__init__(f"{prefix}{reason} at column {column}\n    {expression}\n    {caret}")

    def located(self, where: str) -> ExpressionError:
        """The same error, saying where the expression sits (`activities[0].exits[1].when`)."""
        return ExpressionError(self.reason, self.expression, self.column, where=where)


class BagError(WorkflowError, StateEditError):
    """A write to the variable bag that its schema refuses: undeclared name or wrong type."""


class NoExitError(WorkflowError, RunStateError):
    """An activity completed, none of its exits holds, and it declares no default exit."""


class ChoiceError(WorkflowError, ValueError):
    """An answer at a checkpoint that is not one of its declared choices."""


class SessionStoreError(WorkflowError, RuntimeError):
    """A session folder that cannot be read or written; `code` says which kind (`SEAL_MISMATCH`)."""

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(f"[{code}] {message}")
