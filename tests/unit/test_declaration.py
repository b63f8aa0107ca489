"""Declaring graphs: return hints, manifests, revisions, contracts and refusals.

Seed 001 "Pattern binding" (manifest, digest, revision pinning) and "State and dependencies"
(state must round-trip through JSON; live objects belong in deps).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext, StepContext, reduce_list_append

from lab import GraphDefinitionError, Lab, StateContractError, UnsupportedTopologyError
from lab.graph import check_serial_topology
from lab.manifest import Manifest, source_fingerprint
from tests.conftest import Check, Counter, Inc, declare_counter


@pytest.fixture
def mlab():
    lab = Lab(":memory:")
    yield lab
    lab.close()


def test_manifest_lists_stations_edges_and_a_stable_digest(mlab):
    g = declare_counter(mlab)
    m = g.manifest
    assert m.key == "counter" and m.revision == 1
    assert m.station_ids == ("Inc", "Check")
    assert m.edges == (("Check", "Inc"), ("Check", "__end__"), ("Inc", "Check"))
    assert m.station("Inc").fields == ("by",)
    assert len(m.digest) == 32 and m.schema_id
    again = Manifest.from_json(m.to_json())
    assert again == m and again.digest == m.digest

    other = Lab(":memory:")
    try:
        assert declare_counter(other).manifest.digest == m.digest, "the digest is deterministic"
    finally:
        other.close()


def test_declaring_the_same_id_replaces_the_node(mlab):
    g = declare_counter(mlab)
    assert g.revision == 1

    @dataclass
    class Inc(BaseNode[Counter, None, int]):  # a re-run cell: same id, new body
        by: int = 1

        async def run(self, ctx: GraphRunContext[Counter, None]) -> Check:
            ctx.state.count += self.by * 10
            return Check()

    g.node(Inc)
    assert list(g.nodes) == ["Inc", "Check"] and g.nodes["Inc"] is Inc
    assert g.revision == 2
    assert g.manifest.changes_from(mlab.store.manifest("counter", 1)) == ["station Inc source changed"]


def test_missing_return_hint_names_the_node(mlab):
    g = mlab.graph("bad", state_type=Counter)

    @g.node
    @dataclass
    class NoHint(BaseNode[Counter, None, int]):
        async def run(self, ctx):
            return End(1)

    with pytest.raises(GraphDefinitionError, match="node NoHint has no return hint"):
        g.build()


def test_hint_naming_an_undeclared_node_names_both(mlab):
    g = mlab.graph("bad", state_type=Counter)

    @g.node
    @dataclass
    class Points(BaseNode[Counter, None, int]):
        async def run(self, ctx: GraphRunContext[Counter, None]) -> Elsewhere:
            return Elsewhere()

    with pytest.raises(GraphDefinitionError, match="node Points returns Elsewhere, which is not declared"):
        g.build()


def test_hint_naming_an_undefined_name(mlab):
    g = mlab.graph("bad", state_type=Counter)

    @g.node
    @dataclass
    class Forward(BaseNode[Counter, None, int]):
        async def run(self, ctx: GraphRunContext[Counter, None]) -> NotYetWritten:  # noqa: F821
            raise NotImplementedError

    with pytest.raises(GraphDefinitionError, match="'NotYetWritten', which is not defined"):
        g.build()


def test_a_node_must_be_a_basenode(mlab):
    g = mlab.graph("bad")
    with pytest.raises(GraphDefinitionError, match="expects a BaseNode subclass"):
        g.node(int)  # type: ignore[arg-type]


def test_graph_names_are_url_safe(mlab):
    with pytest.raises(GraphDefinitionError, match="URL-safe"):
        mlab.graph("my graph/v1")


def test_field_named_node_id_is_refused(mlab):
    g = mlab.graph("bad", state_type=Counter)

    @g.node
    @dataclass
    class Envelope(BaseNode[Counter, None, int]):
        node_id: str = "x"

        async def run(self, ctx: GraphRunContext[Counter, None]) -> End[int]:
            return End(1)

    with pytest.raises(StateContractError, match="'node_id', which belongs to the checkpoint envelope"):
        g.build()


@dataclass
class Elsewhere(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> End[int]:
        return End(1)


@dataclass
class LiveState:
    count: int = 0
    lock: Any = field(default_factory=threading.Lock)


@dataclass
class UsesLive(BaseNode[LiveState, None, int]):
    async def run(self, ctx: GraphRunContext[LiveState, None]) -> End[int]:
        return End(1)


def test_state_that_does_not_round_trip_is_refused_at_start(mlab):
    g = mlab.graph("live", state_type=LiveState, output_type=int)
    g.node(UsesLive)
    with pytest.raises(StateContractError, match="deps"):
        g.start(UsesLive(), state=LiveState())
    assert mlab.runs() == [], "nothing is written for a refused start"


class Client:  # a live object: no schema
    pass


@dataclass
class HoldsClient:
    client: Client


def test_state_type_without_schema_is_refused(mlab):
    g = mlab.graph("live2", state_type=HoldsClient, output_type=int)
    g.node(UsesLive)
    with pytest.raises(StateContractError, match="keep live objects"):
        g.start(UsesLive(), state=HoldsClient(Client()))


def test_start_needs_a_declared_node_instance(mlab):
    g = declare_counter(mlab)
    with pytest.raises(GraphDefinitionError, match="declared nodes"):
        g.start("Inc", state=Counter())  # type: ignore[arg-type]


def test_state_defaults_when_the_type_has_one(mlab):
    run = declare_counter(mlab).start(Inc(by=2))
    assert run.state == Counter()


def test_graph_without_nodes(mlab):
    with pytest.raises(GraphDefinitionError, match="has no nodes yet"):
        mlab.graph("empty").build()


async def _a(ctx: StepContext[None, None, int]) -> int:
    return ctx.inputs


async def _b(ctx: StepContext[None, None, int]) -> int:
    return ctx.inputs


def test_broadcast_map_and_join_are_refused_by_name():
    b = GraphBuilder(input_type=int, output_type=list[int])
    a, c = b.step(_a), b.step(_b)
    join = b.join(reduce_list_append, initial_factory=list[int])
    b.add(b.edge_from(b.start_node).to(a, c), b.edge_from(a, c).to(join), b.edge_from(join).to(b.end_node))
    with pytest.raises(UnsupportedTopologyError, match="broadcast"):
        check_serial_topology(b.build())

    b2 = GraphBuilder(input_type=list[int], output_type=list[int])
    a2 = b2.step(_a)
    join2 = b2.join(reduce_list_append, initial_factory=list[int])
    b2.add(b2.edge_from(b2.start_node).map().to(a2), b2.edge_from(a2).to(join2), b2.edge_from(join2).to(b2.end_node))
    with pytest.raises(UnsupportedTopologyError, match="map/spread"):
        check_serial_topology(b2.build())


def test_source_fingerprint_changes_with_the_body():
    def f():
        return 1

    def g():
        return 2

    assert source_fingerprint(f) != source_fingerprint(g)
    assert source_fingerprint(Inc) == source_fingerprint(Inc)
