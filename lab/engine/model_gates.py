"""Consent gates in the super-step model: which steps may ask `consent()`, and that they do.

A superstep-model graph runs `@g.step` functions only, so its consent gate is a step declared
`@g.step(gate=True)` that calls `lab.consent(prompt, details)` (the step form of a `Gate` node
class): the manifest names it a gate, which is what lets `run.approve()` / `run.deny()` hand
it the verdict (lab.waits checks a consent wait's station is a gate). Both mistakes are refused
when the step runs, naming the station and the fix, instead of parking a run no verdict can
resume or letting a gate that never asks through.
"""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from ..errors import GraphDefinitionError
from ..gates import StationContext, WaitSignal

__all__ = ("consent_misplaced", "gate_unasked")


def consent_misplaced(node_id: str, signal: WaitSignal, gates: Set[str]) -> GraphDefinitionError | None:
    """The error for a consent wait asked by a step that is not a declared gate, else None.

    A wait that mirrors a parked subgraph's gate (lab.subgraph: its details name the child) is not
    the step's own question: any step may hold it.
    """
    if signal.kind != "consent" or node_id in gates or _mirrors_subgraph(signal.details):
        return None
    return GraphDefinitionError(
        f"step {node_id} called consent() but is not declared a gate; declare it @g.step(gate=True) "
        "(its consent wait is answered with run.approve() / run.deny()), or ask with interrupt() instead"
    )


def gate_unasked(node_id: str, station: StationContext | None, gates: Set[str]) -> GraphDefinitionError | None:
    """The error for a gate step that finished without asking `consent()` (it has no verdict), else None."""
    if node_id not in gates or (station is not None and station.verdict is not None):
        return None
    return GraphDefinitionError(
        f"gate step {node_id} returned without calling consent(); a step declared @g.step(gate=True) asks "
        "verdict = consent(prompt, details) and acts on it: add the call, or drop gate=True"
    )


def _mirrors_subgraph(details: Any) -> bool:
    return isinstance(details, dict) and isinstance(details.get("subgraph"), dict)
