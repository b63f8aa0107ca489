"""What several benchmarks share: the loop graph (`BenchState`, `Loop`) and how a lab declares it.

Module level on purpose: the lab's digest reads the node's source. The loop table
(`serial.py`), the Ray batch (`batch.py`) and the reader in a second process (`readers.py`)
all time this one graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_graph import BaseNode, End, GraphRunContext

__all__ = ("BenchState", "Loop", "declare", "DEFAULT_VISITS", "GRAPH_NAME")

DEFAULT_VISITS = 1000
GRAPH_NAME = "bench_loop"


@dataclass
class BenchState:
    """The counter the loop increments, and how many visits make a run."""

    count: int = 0
    limit: int = DEFAULT_VISITS


@dataclass
class Loop(BaseNode[BenchState, None, int]):
    """One station: count a visit; end with the count after `limit` visits."""

    async def run(self, ctx: GraphRunContext[BenchState, None]) -> Loop | End[int]:
        ctx.state.count += 1
        if ctx.state.count >= ctx.state.limit:
            return End(ctx.state.count)
        return Loop()


def declare(lab: Any) -> Any:
    """The benchmark graph declared in `lab`."""
    g = lab.graph(GRAPH_NAME, state_type=BenchState, output_type=int)
    g.node(Loop)
    return g
