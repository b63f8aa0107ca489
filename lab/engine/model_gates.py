"""Consent gates in the super-step model: that a step declared a gate asks `consent()`.

A superstep-model graph runs `@g.step` functions only, so its consent gate is a step declared
`@g.step(gate=True)` that calls `lab.consent(prompt, details)` (the step form of a `Gate` node
class): the manifest names it a gate, which is what lets `run.approve()` / `run.deny()` hand
it the verdict. A step that asks without being declared a gate is refused where every kind's
wait is parked (lab.waits, `lab.gates.misplaced_consent`); a gate step that returns without
asking is refused here when the step runs, naming the station and the fix, instead of letting
everything through.
"""

from __future__ import annotations

from collections.abc import Set

from ..errors import GraphDefinitionError
from ..gates import StationContext

__all__ = ("gate_unasked",)


def gate_unasked(node_id: str, station: StationContext | None, gates: Set[str]) -> GraphDefinitionError | None:
    """The error for a gate step that finished without asking `consent()` (it has no verdict), else None."""
    if node_id not in gates or (station is not None and station.verdict is not None):
        return None
    return GraphDefinitionError(
        f"gate step {node_id} returned without calling consent(); a step declared @g.step(gate=True) asks "
        "verdict = consent(prompt, details) and acts on it: add the call, or drop gate=True"
    )
