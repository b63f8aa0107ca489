"""`warn()` inside a node (lab.gates): `warning` events written with the station's settlement,
dropped with a station's partial work when it fails; and `DASHED` edges in a declared graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.basenode import Edge

from lab import Lab
from lab.errors import RunStateError
from lab.gates import warn
from lab.render import DASHED


@dataclass
class S:
    n: int = 0


@dataclass
class Work(BaseNode[S, None, int]):
    async def run(
        self, ctx: GraphRunContext[S, None]
    ) -> Annotated[Work, Edge(label="again")] | Annotated[End[int], Edge(label="enough"), DASHED]:
        ctx.state.n += 1
        warn(f"pass {ctx.state.n}", pass_no=ctx.state.n)
        if ctx.state.n == 2:
            warn("second note")
        if ctx.state.n == 3:
            raise ValueError("boom")
        return Work() if ctx.state.n < 4 else End(ctx.state.n)


def test_warnings_are_events_of_the_station(file_lab: Lab) -> None:
    g = file_lab.graph("warner", state_type=S, output_type=int)
    g.node(Work)
    run = g.start(Work())
    run.run()
    assert run.status == "failed"  # the third pass raised: its warning is dropped with it
    warned = [
        (e.payload["message"], e.payload.get("pass_no"), e.checkpoint_seq) for e in run.events("warning")
    ]
    assert warned == [("pass 1", 1, 0), ("pass 2", 2, 1), ("second note", None, 1)]
    kinds = [e.kind for e in run.events()]
    assert kinds.index("warning") < kinds.index("settled")
    with pytest.raises(RunStateError, match="outside a running station"):
        warn("no station here")


def test_dashed_metadata_draws_the_edge_dashed(file_lab: Lab) -> None:
    g = file_lab.graph("warner", state_type=S, output_type=int)
    g.node(Work)
    dot = g.render()
    assert "Work -> __end__ [label=enough style=dashed]" in dot
    assert "Work -> Work [label=again]" in dot
