"""Time travel against a DuckDB file and `:memory:` (seed 003 "History": history, get-state, fork).

Scenarios:
- the walk of the issue: 10 steps, rewind to 4, edit, finish, fork from 6 onto an edited node,
  diff the two ends, lineage and events by SQL
- rewind never deletes; stepping after it writes a child of the rewound checkpoint
- edits validate with the declared type; a refused edit writes nothing
- forks refuse a revision that lacks the pending station
- prune and delete only finished runs
- every refusal leaves the store's tables exactly as they were
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import CheckpointError, GraphDefinitionError, RunStateError, StateEditError
from tests.conftest import Counter


@dataclass
class TInc(BaseNode[Counter, None, int]):
    by: int = 1

    async def run(self, ctx: GraphRunContext[Counter, None]) -> TCheck:
        ctx.state.count += self.by
        ctx.state.seen.append(f"inc{self.by}")
        return TCheck()


@dataclass
class TCheck(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> TInc | End[int]:
        return End(ctx.state.count) if ctx.state.count >= 20 else TInc(by=2)


@dataclass
class FastInc(BaseNode[Counter, None, int]):
    """An edited TInc: same node id, a body that adds ten times as much."""

    by: int = 1

    async def run(self, ctx: GraphRunContext[Counter, None]) -> TCheck:
        ctx.state.count += self.by * 10
        ctx.state.seen.append(f"fast{self.by}")
        return TCheck()


FastInc.get_node_id = classmethod(lambda cls: "TInc")  # type: ignore[method-assign]


def declare(lab, name="tt"):
    g = lab.graph(name, state_type=Counter, output_type=int)
    g.node(TInc)
    g.node(TCheck)
    return g


def start(g):
    return g.start(TInc(by=2), state=Counter(), durability="step")


def test_the_walk(lab):
    g = declare(lab)
    run = start(g)
    for _ in range(10):
        run.step()
    assert run.head == 10 and run.state.count == 10

    run.rewind(4)
    assert run.head == 4 and run.state == run.state_at(4) and run.state.count == 4
    assert run.next_stations == ("TInc",)
    rewind = run.events("rewind")[0]
    assert rewind.payload["from"] == 10 and rewind.payload["to"] == 4
    assert rewind.payload["may_repeat_effects_of"] == ["TInc", "TCheck"] * 3

    edit = run.edit_state(lambda s: replace(s, count=100))
    assert edit.seq == 11 and edit.parent_seq == 4 and run.head == 11
    edited = run.events("edited")[0]
    assert edited.payload["diff"] == [{"path": "count", "kind": "changed", "old": 4, "new": 100}]

    run.run()
    assert run.status == "done" and run.output == 102
    branch = [c.seq for c in run.history()]
    assert branch == [0, 1, 2, 3, 4, 11, 12, 13]
    tree = run.history(all_branches=True)
    assert [c.seq for c in tree] == list(range(14)), "the old branch 5..10 stays"
    assert {c.seq: c.parent_seq for c in tree}[12] == 11

    # fix TInc's code in a cell, then re-run from the middle of the original branch
    g.node(FastInc)
    child = run.fork(6, revision="current")
    assert child.revision == g.revision != run.revision
    assert child.state == run.state_at(6) and child.next_stations == ("TInc",)
    child.run()
    assert child.status == "done" and child.output == 6 + 20

    diff = lab.diff((run, run.head), (child, child.head))
    assert [c.path for c in diff.changed] == ["count"]
    assert [(c.path, c.new) for c in diff.added] == [("seen[3]", "fast2")]
    assert "count: 102 -> 26" in str(diff)

    family = lab.lineage(child.id)
    assert [r.run_id for r in family] == [run.id, child.id]
    assert family[1].parent_run_id == run.id and family[1].parent_seq == 6
    rows = lab.sql(
        "select r.run_id, r.parent_run_id, r.parent_seq, count(e.seq) filter (where e.kind = 'settled') "
        "from runs r join events e using (run_id) group by all order by r.run_id"
    ).fetchall()
    assert rows == [(run.id, None, None, 12), (child.id, run.id, 6, 2)]
    kinds = [k for (k,) in lab.sql("select kind from events where run_id = ? order by seq", [run.id]).fetchall()]
    assert "rewind" in kinds and "edited" in kinds and "fork" in kinds


def test_state_at_and_checkpoint(lab):
    run = start(declare(lab)).run()
    cp = run.checkpoint(3)
    assert cp.seq == 3 and cp.parent_seq == 2 and cp.status == "running"
    assert cp.state == Counter(count=4, seen=["inc2", "inc2"]) and cp.next_stations == ("TCheck",)
    assert [e.kind for e in cp.events] == ["settled"] and cp.events[0].node_id == "TInc"
    final = run.checkpoint(run.head)
    assert final.status == "done" and final.output == 20 and final.next == ()
    assert [e.kind for e in final.events] == ["settled", "done"]


def test_fork_with_state_and_onto_the_same_revision(lab):
    run = start(declare(lab)).run()
    child = run.fork(2, state=Counter(count=5))
    assert child.revision == run.revision and child.state.count == 5
    child.run()
    assert child.output == 21
    assert lab.run(child.id).parent_seq == 2
    forked = run.fork()  # from the head: a finished run forks into a finished copy
    assert forked.status == "done" and forked.output == 20


def test_diff_structure_and_display(lab):
    run = start(declare(lab)).run()
    d = run.diff(0, 6)
    assert [(c.path, c.kind) for c in d.changes] == [
        ("count", "changed"),
        ("seen[0]", "added"),
        ("seen[1]", "added"),
        ("seen[2]", "added"),
    ]
    assert d.added[0].new == "inc2" and len(d) == 4
    assert not run.diff(3, 3)
    html = d._repr_html_()
    assert "<table>" in html and "seen[0]" in html


# -- bad input: a clear error, and the store unchanged -----------------------------------


@pytest.fixture
def finished(lab):
    g = declare(lab)
    run = start(g)
    run.run(max_steps=5)
    return lab, g, run


def _unchanged(lab, action, error, match):
    before = lab.store.table_snapshot()
    with pytest.raises(error, match=match):
        action()
    assert lab.store.table_snapshot() == before


def test_rewind_to_a_missing_checkpoint(finished):
    lab, _, run = finished
    _unchanged(lab, lambda: run.rewind(99), CheckpointError, r"no checkpoint 99 in this run \(it has 0..5\)")
    _unchanged(lab, lambda: run.fork(-1), CheckpointError, "no checkpoint -1")
    _unchanged(lab, lambda: run.rewind("3"), TypeError, "sequence number")


def test_rewind_to_a_checkpoint_of_another_run(finished):
    lab, g, run = finished
    other = start(g)
    other.run()
    other_head = other.head
    short = start(g)
    _unchanged(lab, lambda: short.rewind(other_head), CheckpointError, "no checkpoint")


def test_rewind_while_running_in_another_task(finished):
    lab, _, run = finished
    run._busy.acquire()  # as if a run() were in flight in another task
    try:
        _unchanged(lab, lambda: run.rewind(2), RunStateError, "running in another task")
        _unchanged(lab, lambda: run.edit_state(count=1), RunStateError, "running in another task")
    finally:
        run._busy.release()


def test_edit_that_fails_validation(finished):
    lab, _, run = finished
    _unchanged(lab, lambda: run.edit_state(count="many"), StateEditError, "(?s)does not validate.*count")
    _unchanged(lab, lambda: run.edit_state(lambda s: replace(s, seen=[1, 2])), StateEditError, "(?s)does not validate.*seen")
    _unchanged(lab, lambda: run.edit_state(colour="red"), StateEditError, r"no field\(s\) \['colour'\]")
    _unchanged(lab, lambda: run.fork(2, state={"count": []}), StateEditError, "does not validate")


def test_fork_onto_a_revision_lacking_the_pending_station(finished):
    lab, g, run = finished
    assert run.next_stations == ("TCheck",)

    @dataclass
    class Final(BaseNode[Counter, None, int]):
        async def run(self, ctx: GraphRunContext[Counter, None]) -> End[int]:
            return End(0)

    g.remove("TCheck")
    g.remove("TInc")
    g.node(Final)
    g.build()  # building the new definition registers its revision; the refused fork writes nothing
    _unchanged(lab, lambda: run.fork(5, revision="current"), GraphDefinitionError, r"lacks the pending station\(s\) \['TCheck'\]")


def test_prune_and_delete_only_finished_runs(finished):
    lab, g, run = finished
    _unchanged(lab, lambda: lab.prune(run.id), RunStateError, "cannot prune .* it is running")
    _unchanged(lab, lambda: lab.delete_run(run.id), RunStateError, "cannot delete")
    run.run()
    assert lab.prune(run.id, keep=3) == 18
    assert [c.seq for c in lab.store.checkpoints(run.id)] == [18, 19, 20]
    assert lab.prune(run.id) == 2
    assert [c.seq for c in lab.store.checkpoints(run.id)] == [20]
    assert lab.run(run.id).status == "done" and len(run.events()) > 0
    lab.delete_run(run.id)
    assert run.id not in [r.run_id for r in lab.runs()]
    assert lab.sql("select count(*) from events where run_id = ?", [run.id]).fetchall() == [(0,)]


def test_diff_of_two_different_state_types(finished):
    lab, _, run = finished

    @dataclass
    class Other:
        name: str = ""

    @dataclass
    class Hello(BaseNode[Other, None, str]):
        async def run(self, ctx: GraphRunContext[Other, None]) -> End[str]:
            return End("hi")

    h = lab.graph("hello", state_type=Other, output_type=str)
    h.node(Hello)
    other = h.start(Hello(), state=Other()).run()
    with pytest.raises(StateEditError, match="different types"):
        lab.diff((run, 0), (other, 0))
