"""A run's capability budgets (seed 001 "Capability handshake"): how often it may park for a capability.

A park for a capability counts as one resume (by default at most 8 per run) and one consecutive
request for that capability (by default at most 3; a settled station resets it). A run records the
limits it started with beside its counters, so a resume after a restart (or a fork) keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ("Budgets", "MAX_CAPABILITY_RESUMES", "MAX_CONSECUTIVE_REQUESTS", "counted_request", "capabilities_named")

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


def capabilities_named(signal: Any) -> list[str]:
    """The capabilities a park asks for: the signal's, then those of the rest of its task group
    (`signal.group`, set where the signal was found in an exception group), once each."""
    names = [signal.capability]
    for other in getattr(signal, "group", ()):
        name = getattr(other, "capability", None)
        if isinstance(name, str) and name not in names:
            names.append(name)
    return names


def counted_request(counters: dict[str, Any], capabilities: Sequence[str], *, node_id: str, run_id: str) -> dict[str, Any]:
    """`counters` after one capability park: one resume, one more consecutive request for each capability
    it names (a task group may raise several at once: each is counted); `CapabilityBudgetError` past a budget."""
    from .errors import CapabilityBudgetError

    resumes = int(counters.get("capability_resumes", 0))
    consecutive = dict(counters.get("consecutive", {}))
    budgets = Budgets.from_counters(counters)
    counted: dict[str, int] = {}
    for capability in capabilities:
        n = counted[capability] = int(consecutive.get(capability, 0)) + 1
        if n > budgets.consecutive:
            raise CapabilityBudgetError(
                f"station {node_id} asked for capability {capability!r} {n} times in a row (the budget is "
                f"{budgets.consecutive}); granting it does not satisfy the node, so the run stops here. "
                "Fix the node or its provider, then fork the run from an earlier checkpoint"
            )
    if resumes >= budgets.resumes:
        raise CapabilityBudgetError(
            f"run {run_id} used its {budgets.resumes} capability resumes; station {node_id} asked for "
            f"{capabilities[0]!r} again, so the run stops here. Fork it to start a fresh budget"
        )
    kept = {key: counters[key] for key in ("budgets", "limits") if counters.get(key)}
    return {"capability_resumes": resumes + 1, "consecutive": counted, **kept}
