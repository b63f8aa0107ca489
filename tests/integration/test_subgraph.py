"""Subgraphs (issue 13 requirement 6, seed 003 "Subgraphs").

Scenarios: a node runs another lab graph as one station; the child's steps are checkpointed
under its own run id with lineage to the parent; an interrupt (or a gate) inside the child parks
the parent, and answering the parent continues the child at the node that paused, never re-running
the child's earlier steps (LangGraph #8458); a parent's stream has the child's events nested; a
child that fails fails the parent's station naming it; rewinding the parent to before the station
starts a fresh child and keeps the old child's history; an adopted graph is a subgraph too.
"""

from __future__ import annotations

from pydantic_graph import GraphBuilder, StepContext

from lab import Lab
from lab.events import Completed, NodeStarted, SubgraphEvent
from tests.integration.control_graphs import CHILD, Laps, Prepare, child_graph, parent_graph


def child_of(run):  # the subgraph event names the child run
    (ev,) = run.events("subgraph")
    return ev.payload["child_run"]


def test_an_interrupt_in_the_child_parks_the_parent_and_resume_continues_inside_the_child() -> None:
    """Seed 003: "That graph takes its own steps inside one step of this graph. When one of its
    nodes calls interrupt, this run pauses as well, and resume continues inside the subgraph, at
    the node that paused." (LangGraph #8458: resuming must not re-run the subgraph's earlier nodes.)"""
    lab = Lab(":memory:")
    CHILD["graph"] = child_graph(lab)
    parent = parent_graph(lab).start(Prepare(), state=Laps())
    parent.run()
    assert parent.status == "waiting" and parent.wait is not None and parent.wait.kind == "interrupt"
    child_id = child_of(parent)
    assert parent.wait.details["subgraph"]["run"] == child_id and parent.wait.details["subgraph"]["node"] == "AskName"
    child = lab.resume(child_id)
    assert child.status == "waiting" and child.head == 2  # Intro settled into checkpoint 1, then the waiting one
    rec = lab.run(child_id)
    assert (rec.parent_run_id, rec.parent_seq) == (parent.id, 1)  # lineage: the parent's checkpoint before Delegate

    parent.resume_with("Ada")
    parent.run()
    assert parent.status == "done" and parent.output == "hello Ada"
    child = lab.resume(child_id)
    assert child.status == "done" and child.state.visits == ["Intro", "AskName"]  # the head's state
    intro = [e for e in child.events("entered") if e.node_id == "Intro"]
    asks = [e for e in child.events("entered") if e.node_id == "AskName"]
    assert len(intro) == 1 and len(asks) == 2  # continued at AskName: Intro never ran again
    assert len(parent.events("subgraph")) == 1  # the same child, continued
    assert child_id in {r.run_id for r in lab.lineage(parent.id)}


def test_the_parents_stream_has_the_childs_events_nested() -> None:
    """Seed 003: "A stream of this graph has the events of the subgraph too, each inside a GraphEvent.SubgraphEvent"."""
    lab = Lab(":memory:")
    CHILD["graph"] = child_graph(lab)
    parent = parent_graph(lab).start(Prepare(), state=Laps())
    first = list(parent.stream())
    nested = [ev for ev in first if isinstance(ev, SubgraphEvent)]
    assert nested and all(ev.node_id == "Delegate" and ev.child_run_id == child_of(parent) for ev in nested)
    assert [ev.event.node_id for ev in nested if isinstance(ev.event, NodeStarted)] == ["Intro", "AskName"]
    parent.resume_with("Bo")
    second = list(parent.stream())
    assert isinstance(second[-1], Completed) and second[-1].output == "hello Bo"
    assert [ev.event.node_id for ev in second if isinstance(ev, SubgraphEvent) and isinstance(ev.event, NodeStarted)] == ["AskName"]


def test_a_failing_child_fails_the_parents_station_naming_the_child() -> None:
    lab = Lab(":memory:")
    g = GraphBuilder(state_type=Laps, input_type=int, output_type=int)

    @g.step
    async def explode(ctx: StepContext[Laps, None, int]) -> int:
        raise ValueError("child broke")

    g.add(g.edge_from(g.start_node).to(explode), g.edge_from(explode).to(g.end_node))
    CHILD["graph"] = _InputsAdapter(lab.adopt(g.build(), name="exploding"))
    parent = parent_graph(lab).start(Prepare(), state=Laps())
    parent.run()
    assert parent.status == "failed" and parent.error["type"] == "lab.subgraph.SubgraphError"  # type: ignore[index]
    assert child_of(parent) in parent.error["message"]  # type: ignore[index]
    assert lab.run(child_of(parent)).status == "failed"


def test_an_adopted_graph_runs_as_a_subgraph() -> None:
    lab = Lab(":memory:")
    g = GraphBuilder(state_type=Laps, input_type=int, output_type=int)

    @g.step
    async def triple(ctx: StepContext[Laps, None, int]) -> int:
        return ctx.inputs * 3

    g.add(g.edge_from(g.start_node).to(triple), g.edge_from(triple).to(g.end_node))
    CHILD["graph"] = _InputsAdapter(lab.adopt(g.build(), name="triple"))
    parent = parent_graph(lab).start(Prepare(), state=Laps())
    parent.run()
    assert parent.status == "done" and parent.output == "21"


def test_rewinding_the_parent_before_the_station_starts_a_fresh_child_and_keeps_the_old_history() -> None:
    """Issue 13: "time travel of the parent to before the subgraph station discards the child's later
    branch, not its history"."""
    lab = Lab(":memory:")
    CHILD["graph"] = child_graph(lab)
    parent = parent_graph(lab).start(Prepare(), state=Laps())
    parent.run()
    parent.resume_with("Ada")
    parent.run()
    old = child_of(parent)
    old_history = len(lab.resume(old).history())
    parent.rewind(1)
    parent.run()
    assert parent.status == "waiting"
    ids = [e.payload["child_run"] for e in parent.events("subgraph")]
    assert len(ids) == 2 and ids[0] == old and ids[1] != old
    assert lab.run(old).status == "done" and len(lab.resume(old).history()) == old_history


class _InputsAdapter:
    """Lets `Delegate` (which passes `Intro()` as the node) run an adopted graph from inputs=7."""

    def __init__(self, lg):
        self.lg = lg
        self.name = lg.name

    def start(self, node=None, **kwargs):
        kwargs.pop("state", None)
        return self.lg.start(inputs=7, state=Laps(), **kwargs)


def test_a_gate_in_the_child_parks_the_parent_on_consent() -> None:
    """An approval inside the child is answered on the parent, as the parent's own gate would be."""
    from tests.integration.control_graphs import Confirm, gated_child

    class _Gated:
        def __init__(self, g):
            self.g, self.name = g, g.name

        def start(self, node=None, **kwargs):
            return self.g.start(Confirm(), **kwargs)

    lab = Lab(":memory:")
    CHILD["graph"] = _Gated(gated_child(lab))
    parent = parent_graph(lab).start(Prepare(), state=Laps())
    parent.run()
    assert parent.status == "waiting" and parent.wait.kind == "consent" and parent.wait.prompt == "ship it?"  # type: ignore[union-attr]
    parent.approve(note="go")
    parent.run()
    assert parent.status == "done" and parent.output == "shipped"
    child = lab.resume(child_of(parent))
    (verdict,) = child.events("verdict")
    assert verdict.payload["approved"] is True and verdict.payload["note"] == "go"
