"""A checkpoint's cursors (its pending stations), decoded only when the engine can run them.

Seed 001 "Checkpoint Ownership": "Unknown nodes or node fields, duplicate snapshot ids, and
multiple created cursors fail explicitly." A cursor is a station a checkpoint says runs next (in
pydantic-graph v1's snapshot list, a snapshot in status `created`). The serial engine runs one
station at a time, so a serial checkpoint naming more than one is ambiguous: which runs first is
not recorded, and the lab never guesses. It is refused here, where a stored checkpoint is
decoded (resume, rewind, fork, `run.checkpoint(seq)`, `lab.peek`), not only once a step begins.
A super-step checkpoint holds a whole frontier (docs/parallel.md), so many cursors are its form.

Unknown nodes and node fields fail in the codec (lab.codec); duplicate snapshot ids fail where
the store folds its journal (lab.store.schema).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import CheckpointError

if TYPE_CHECKING:
    from .built import BuiltGraph
    from .records import CheckpointRecord

__all__ = ("check_cursors", "decode_pending")


def check_cursors(built: BuiltGraph, cp: CheckpointRecord) -> None:
    """Refuse a serial-engine checkpoint with more than one created cursor (pending station)."""
    if built.manifest.engine == "serial" and len(cp.next) > 1:
        names = ", ".join(p.node_id for p in cp.next)
        raise CheckpointError(
            f"it names {len(cp.next)} next stations ({names}), but graph {built.key!r} runs on the serial "
            "engine, one station at a time: more than one created cursor in a snapshot is refused rather "
            "than guessing which runs (seed 001); fork the run from an earlier checkpoint "
            f"(lab.fork({cp.run_id!r}, seq)) or rewind to one",
            run_id=cp.run_id,
            seq=cp.seq,
        )


def decode_pending(built: BuiltGraph, cp: CheckpointRecord) -> list[Any]:
    """The checkpoint's pending stations decoded with `built`'s codec, after `check_cursors`."""
    check_cursors(built, cp)
    return [built.codec.decode_node(p, run_id=cp.run_id, seq=cp.seq) for p in cp.next]
