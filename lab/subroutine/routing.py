"""The commit rule (seed 000), as pure functions: which outgoing edge a visit takes, if exactly one.

Conditions are evaluated against the feature state before the source visit; effects against that
state and the proposed successor state. A feature the visit changed must be admitted by an
effect of the edge on that feature; a feature it left alone is admitted unless an effect asks
for something else. Exactly one compatible edge is required: none or several raise, and the
caller commits nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import AmbiguousEdgeError, NoCompatibleEdgeError
from .features import Condition, Effect, FeatureView

__all__ = ("EdgeDecl", "refusal", "route", "COMMIT_NOTE")

INPUT = "Input"
OUTPUT = "Output"

COMMIT_NOTE = (
    "The candidate state was not committed (the run's head stays where it was); files written, requests "
    "sent and other effects outside the run by the visit are not undone"
)


@dataclass(frozen=True)
class EdgeDecl:
    """A declared edge: source, target, an optional condition and the effects it admits."""

    src: str
    dst: str
    when: Condition | None = None
    effects: tuple[Effect, ...] = field(default=())

    @property
    def label(self) -> str:
        parts = []
        if self.when is not None:
            parts.append(f"if {self.when.label}")
        parts += [e.label for e in self.effects]
        return "; ".join(parts)

    def effect_for(self, feature: str) -> Effect | None:
        return next((e for e in self.effects if e.feature.name == feature), None)

    def __str__(self) -> str:
        return f"{self.src} → {self.dst}" + (f" [{self.label}]" if self.label else "")


def refusal(edge: EdgeDecl, before: Mapping[str, Any], proposed: Mapping[str, Any]) -> str | None:
    """Why `edge` is not compatible with the visit (None: it is). A condition on a None feature raises ValueError."""
    if edge.when is not None and not edge.when.evaluate(FeatureView(before)):
        return f"its condition {edge.when.label} is false"
    for name in proposed:
        b, p = before.get(name), proposed[name]
        effect = edge.effect_for(name)
        if effect is None:
            if p != b:
                return f"the visit changed {name} ({b!r} → {p!r}) and the edge has no effect on {name}"
            continue
        why = effect.refuses(b, p)
        if why:
            return why
    return None


def route(
    node: str, edges: Sequence[EdgeDecl], before: Mapping[str, Any], proposed: Mapping[str, Any]
) -> EdgeDecl:
    """The one compatible outgoing edge of `node`, else `NoCompatibleEdgeError` / `AmbiguousEdgeError`."""
    compatible: list[EdgeDecl] = []
    refused: list[str] = []
    for edge in edges:
        why = refusal(edge, before, proposed)
        if why is None:
            compatible.append(edge)
        else:
            refused.append(f"{edge}: {why}")
    if len(compatible) == 1:
        return compatible[0]
    if not compatible:
        detail = "; ".join(refused) if refused else "it has no outgoing edges"
        raise NoCompatibleEdgeError(
            f"no outgoing edge of {node} is compatible with its visit ({detail}); exactly one must be. {COMMIT_NOTE}"
        )
    raise AmbiguousEdgeError(
        f"{len(compatible)} outgoing edges of {node} are compatible with its visit ("
        + ", ".join(str(e) for e in compatible)
        + f"); exactly one must be: make their conditions or effects exclusive. {COMMIT_NOTE}"
    )
