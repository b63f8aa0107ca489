"""A workflow run's state: the variable bag and the latest exit taken (the trail is read from history).

The state holds the last exit and how many activities completed, not the whole trail: a
checkpoint then costs the same at the thousandth activity of a loop as at the tenth (issue 27
item 5). `lab.workflow.trail` rebuilds the trail from the branch's checkpoints.

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
    """A workflow run's state: the variable bag and the last exit. Each workflow has its own subclass.

    The whole trail of exits is `wf.trail(run)`: read from the run's checkpoints, since each holds
    the exit its activity took (`last`) and the count so far (`taken`).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    variables: dict[str, Any] = {}
    earlier: list[TrailEntry] = []
    """The trail before this run's first activity, when it was given at start (a session resumed into
    another store, `state={'trail': [...]}`): set once, never grown."""
    last: TrailEntry | None = None
    """The exit the latest completed activity took."""
    taken: int = 0
    """Activities completed so far, `earlier` included: the trail's length."""

    bag_schema: ClassVar[Mapping[str, Variable]] = {}

    @model_validator(mode="before")
    @classmethod
    def _whole_trail(cls, data: Any) -> Any:
        """A state given (or stored by an earlier version) with its whole `trail`: kept as `earlier` + `last`."""
        if isinstance(data, Mapping) and "trail" in data:
            data = dict(data)
            trail = list(data.pop("trail") or [])
            if any(k in data for k in ("earlier", "last", "taken")):
                raise ValueError("give a workflow state's trail, or earlier/last/taken, not both")
            data.update(earlier=trail[:-1], last=trail[-1] if trail else None, taken=len(trail))
        return data

    @model_validator(mode="after")
    def _schema(self) -> WorkflowState:
        Bag(type(self).bag_schema, self.variables).validate(by="the workflow state")
        known = len(self.earlier) + (self.last is not None)
        if self.taken < known:
            raise ValueError(f"taken={self.taken} is less than the trail it holds ({known} entries)")
        return self
