"""Seed 001 "Pattern binding": a fresh run begins at the graph's declared entry station (issue 30)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab
from lab.errors import EntryStationError
from tests.conftest import Check, Counter, Inc


@pytest.fixture
def mem_lab():
    lab = Lab(":memory:")
    yield lab
    lab.close()


def test_a_fresh_run_begins_at_the_declared_entry_station_unless_asked(mem_lab):
    """Seed 001: "Fresh execution must begin at the builder's declared entry station; only a
    validated durable cursor may enter at a later station." With `@g.node(entry=True)` a start at
    another station is refused (nothing is written) unless `at_any_station=True`; a fork of a
    stored checkpoint (a durable cursor) continues mid-graph."""
    g = mem_lab.graph("entry", state_type=Counter, output_type=int)
    g.node(Inc, entry=True)
    g.node(Check)
    assert g.entry == "Inc"
    before = len(mem_lab.runs())
    with pytest.raises(EntryStationError, match=r"declares Inc as its entry station.*at_any_station=True"):
        g.start(Check(), state=Counter())
    assert len(mem_lab.runs()) == before  # refused before anything was stored
    run = g.start(Inc(by=2), state=Counter()).run()
    assert run.output == 6
    odd = g.start(Check(limit=0), state=Counter(count=1), at_any_station=True).run()
    assert odd.output == 1  # started mid-graph, because asked
    fork = mem_lab.fork(run.id, 3)  # a durable cursor at Inc's successor
    assert fork.run().output == 6
    g.node(Inc)  # its cell re-run without entry=True: no declared entry, any node starts again
    assert g.entry is None
    assert g.start(Check(limit=0), state=Counter()).run().status == "done"


@dataclass
class Only(BaseNode[None, None, int]):
    async def run(self, ctx: GraphRunContext[None, None]) -> End[int]:
        return End(1)


def test_without_a_declared_entry_any_declared_node_starts(mem_lab):
    """The lab's default (docs/seed-differences.md): a graph of node classes names no entry, so any
    declared node starts a run, as pydantic-graph's `Graph.run(start_node)` takes any node."""
    g = mem_lab.graph("no-entry", output_type=int)
    g.node(Only)
    assert g.entry is None and g.start(Only()).run().output == 1
