"""A run's capability budgets (seed 001 "Capability handshake"): how often it may park for a capability.

A park for a capability counts as one resume (by default at most 8 per run) and one consecutive
request for that capability (by default at most 3; a settled station resets it). A run records the
limits it started with beside its counters, so a resume after a restart (or a fork) keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ("Budgets", "MAX_CAPABILITY_RESUMES", "MAX_CONSECUTIVE_REQUESTS")

MAX_CAPABILITY_RESUMES = 8
"""Capability parks allowed per run by default (seed 001 "Capability handshake")."""
MAX_CONSECUTIVE_REQUESTS = 3
"""Requests for one capability allowed in a row, by default, without a station settling in between."""


@dataclass(frozen=True, slots=True)
class Budgets:
    """A run's capability budgets (seed 001: "Default limits are eight hardware resumes per Run and
    three consecutive requests for one capability; exceeding either fails")."""

    resumes: int = MAX_CAPABILITY_RESUMES
    """Capability parks allowed per run."""
    consecutive: int = MAX_CONSECUTIVE_REQUESTS
    """Requests for one capability allowed in a row without a station settling in between."""

    def __post_init__(self) -> None:
        for name in ("resumes", "consecutive"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                from .errors import ArgumentError

                raise ArgumentError(f"Budgets({name}={value!r}): a budget is a whole number of at least 1")

    def to_json(self) -> dict[str, int] | None:
        """What a run records beside its counters; None for the defaults (nothing extra is written)."""
        return None if self == Budgets() else {"resumes": self.resumes, "consecutive": self.consecutive}

    @classmethod
    def from_counters(cls, counters: dict[str, Any] | None) -> Budgets:
        """The limits a run recorded; the defaults when it recorded none (or predates budgets)."""
        data = (counters or {}).get("budgets")
        return cls(int(data["resumes"]), int(data["consecutive"])) if data else cls()
