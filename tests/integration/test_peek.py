"""Seed 003 get-state: `lab.peek(run_id)` reads a run without running or claiming it (issue 30)."""

from __future__ import annotations

from lab import Lab
from tests.conftest import Check, Counter, Inc, declare_counter
from tests.integration import graphs_for_tests
from tests.integration.test_many_processes import Peer, within_a_second


def test_peek_reads_where_a_run_stopped_and_writes_nothing(lab):
    """Seed 003: "Returns where the run of GraphConfig.threadId stopped, read from its last
    checkpoint, without running anything." Status, head, decoded state, next stations, history and
    events; no event is written (no `resumed`), nothing is claimed, and the run steps on as before."""
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    run.step()
    run.step()
    before = lab.events(run.id)
    seen = lab.peek(run.id)
    assert (seen.status, seen.head) == ("running", 2)
    assert seen.decoded and seen.state == Counter(count=2, seen=["inc2"])
    assert seen.state_json == {"count": 2, "seen": ["inc2"]}
    assert seen.next_stations == ("Inc",) and seen.next == (Inc(by=2),)
    assert [cp.seq for cp in seen.history()] == [0, 1, 2]
    assert seen.state_at(1) == Counter(count=2, seen=["inc2"])
    assert [e.kind for e in seen.events()] == [e.kind for e in before]
    assert lab.events(run.id) == before  # nothing written: no `resumed`, no other event
    assert "resumed" not in [e.kind for e in lab.events(run.id)]
    assert lab.store.writer(run.id) is None  # this process still advances it; nothing was taken over
    run.run()
    assert (seen.status, seen.output, seen.next_stations) == ("done", 6, ())  # each read is the store now
    assert isinstance(seen.next, tuple) and not seen.next
    assert "read-only" in repr(seen) and Check  # repr says so


def test_peek_works_while_another_process_owns_the_run(tmp_path):
    """Seed 003 get-state, "without running anything", on a run another live process advances: the
    state is the stored JSON until the graph is declared here, then decoded; the peek writes no
    event and takes nothing over, and the owner steps on."""
    db = tmp_path / "lab.duckdb"
    peer = Peer(db)
    try:
        run_id = peer.do("run = counter.start(Inc(by=2), state=State()); run.run(max_steps=3); out = run.id")
        lab = Lab(str(db))
        try:
            seen = lab.peek(run_id)
            assert not seen.decoded and "not defined in this process" in seen.decoded_because
            assert (seen.status, seen.head) == ("running", 3)
            assert seen.state == {"count": 4}  # stored JSON
            assert seen.next_stations == ("Check",)
            assert seen.next[0].node_id == "Check" and seen.next[0].fields == {}
            events = lab.events(run_id)
            graphs_for_tests.declare(lab)  # the same source as the peer's: the run's revision
            assert seen.decoded and seen.state == graphs_for_tests.State(count=4)
            assert seen.next == (graphs_for_tests.Check(),)
            assert len(seen.history()) == 4
            assert lab.events(run_id) == events and "resumed" not in [e.kind for e in events]
            writer = lab.store.writer(run_id)
            assert writer is not None and writer.pid == peer.pid  # still the peer's run
            assert peer.do("run.run(max_steps=2); out = run.head") == 5  # the owner steps on
            assert within_a_second(lambda: seen.head == 5)  # the owner's journal is read within a second
        finally:
            lab.close()
    finally:
        peer.close()
