"""`lab.continue_v1(graph, document)`: a pydantic-graph v1 snapshot document, continued as a lab run.

Seed 001: "only a validated durable cursor may enter at a later station". A v1 document's
`created` snapshot (or a `pending` one named explicitly) is such a cursor once `decode_v1` has
validated the whole document against the graph's pinned revision: the run starts at that node
with that state, past any declared entry station. Its `started` event names where it came from
(`payload->'tags'->'v1'`: the snapshot id and status, how many snapshots the document held).
A v1 document carries no budget counters, so the run's start at zero (seed 001: "A pre-budget
legacy checkpoint decodes with zero counters").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .codec_v1 import V1Document, decode_v1
from .errors import ArgumentError

if TYPE_CHECKING:
    from .graph import LabGraph
    from .run import Run

__all__ = ("continue_v1", "read_v1")


def read_v1(graph: LabGraph, document: str | bytes | Sequence[Any]) -> V1Document:
    """Decode `document` against `graph`'s current revision (nothing is stored)."""
    if not hasattr(graph, "build") or not hasattr(graph, "start"):
        raise ArgumentError(f"a v1 document is read against a lab graph (lab.graph(...)), got {graph!r}")
    return decode_v1(document, graph.build().codec)


def continue_v1(
    graph: LabGraph,
    document: str | bytes | Sequence[Any],
    *,
    at: str | None = None,
    deps: Any = None,
    tags: dict[str, Any] | None = None,
    **start: Any,
) -> Run:
    """Start a run of `graph` at the v1 document's cursor (its created snapshot, or pending `at`)."""
    doc = read_v1(graph, document)
    snap = doc.continuation(at)
    origin = {"snapshot": snap.id, "status": snap.status, "snapshots": len(doc.snapshots)}
    return graph.start(snap.node, state=snap.state, deps=deps, at_any_station=True, tags={**(tags or {}), "v1": origin}, **start)
