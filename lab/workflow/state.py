"""A workflow run's state: the variable bag and the trail of exits taken.

Below both the compiled workflow (`lab.workflow.compile`) and its session folders
(`lab.workflow.session`), which import it; it imports neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from .bag import Bag, Variable

__all__ = ("TrailEntry", "WorkflowState")


class TrailEntry(BaseModel):
    """One completed activity: the exit it took, why, and where it led."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    activity: str
    exit: str | None
    reason: str
    """`when`, `default`, `checkpoint` or `last` (an activity without exits)."""
    to: str
    documents: tuple[str, ...] = ()
    """The documents its worker reported producing (seed 004 "The planning folder"), as it named them."""


class WorkflowState(BaseModel):
    """A workflow run's state: the variable bag and the trail. Each workflow has its own subclass."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    variables: dict[str, Any] = {}
    trail: list[TrailEntry] = []

    bag_schema: ClassVar[Mapping[str, Variable]] = {}

    @model_validator(mode="after")
    def _schema(self) -> WorkflowState:
        Bag(type(self).bag_schema, self.variables).validate(by="the workflow state")
        return self
