"""A workflow run's trail of exits, read from its checkpoints (the state holds only the latest).

Each checkpoint's state says how many activities completed (`taken`) and which exit the latest
took (`last`), so walking the head's branch from its root rebuilds the trail; a fork's root
carries its parent's count, and the entries before it are read from the parent's branch up to
the checkpoint it was forked from. A state given with its whole trail (`earlier`) starts it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CheckpointError, RunNotFoundError
from .state import TrailEntry

if TYPE_CHECKING:
    from ..store import Store

__all__ = ("trail_at",)


def trail_at(store: Store, run_id: str, seq: int | None) -> list[TrailEntry]:
    """The exits taken up to checkpoint `seq` of run `run_id` (its head's branch), oldest first."""
    if seq is None:
        return []
    records = store.checkpoints_in(run_id, store.branch(run_id, seq))
    trail: list[TrailEntry] = []
    for i, rec in enumerate(records):
        state = rec.state if isinstance(rec.state, dict) else {}
        if "trail" in state:  # stored before the trail left the state: the whole trail is here
            trail = [TrailEntry.model_validate(t) for t in state["trail"]]
            continue
        taken = int(state.get("taken", 0))
        last = state.get("last")
        if i == 0:
            trail = [TrailEntry.model_validate(t) for t in state.get("earlier", [])]
            if taken > len(trail) + (last is not None):  # a fork: what came before is its parent's
                trail = _parent_trail(store, run_id) or trail
        if taken < len(trail):  # an edited state went back: believe the count
            trail = trail[:taken]
        if taken == len(trail) + 1 and last is not None:
            trail.append(TrailEntry.model_validate(last))
    return trail


def _parent_trail(store: Store, run_id: str) -> list[TrailEntry] | None:
    """The trail of the run this one was forked from, up to the fork point (None if it is gone)."""
    rec = store.get_run(run_id)
    if rec.parent_run_id is None or rec.parent_seq is None:
        return None
    try:
        return trail_at(store, rec.parent_run_id, rec.parent_seq)
    except (RunNotFoundError, CheckpointError):  # a deleted parent: the fork keeps what its own checkpoints say
        return None
