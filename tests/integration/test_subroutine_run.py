"""Seed 000 ("State") through real runs: subroutines on the lab's engine, a DuckDB file, the widget.

Scenarios, each quoting the seed sentence it proves:
- the payload flows from Input through visits to Output; a Feature visit preserves it
- params are selected per invocation and read as context.params
- node-local state is constructed before the enter port, kept across revisits and shared by every
  incoming visit; a wrong returned state fails the visit naming the value
- feature state starts at None in every invocation; a Feature visit's first assignment goes through
  an assigning effect; a condition on a None feature fails the station with ValueError
- the commit rule: a refused (ambiguous) edge fails the station, the head stays, the candidate state
  is nowhere, and a file the visit wrote is still there; the widget says so
- time travel and the run widget show node-local and feature state per checkpoint; the diff shows
  feature changes; a reopened store resumes the run
- child calls: a Subroutine call in this process and a Workflow call in a real child process, each
  with its own node and feature state, returning only the output; a retried call adapter continues
  the same durable child; a parent killed mid-child (SIGKILL, with its child) resumes and only the
  returned Success commits the call node's state
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab import Lab
from lab.subroutine import (
    AmbiguousEdgeError,
    FeatureState,
    FeatureSuccess,
    FeatureUnsetError,
    NodeStateValueError,
    Success,
    Workflow,
)
from tests.integration.subroutine_flows import Files, counting_child, slow_child, workflow_parent

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Count:
    visits: int = 0
    seen: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Untouched:
    marker: str = "constructed"


@dataclass
class Params:
    limit: int = 2
    suffix: str = "!"


def declare_loop(lab: Lab, name: str = "loop"):
    """grow (node-local Count) -> decide (Feature: mode) -> grow again or Output; `spare` is never visited."""
    sub = lab.subroutine(name, input=str, output=str, params=Params)
    mode = sub.feature("mode", ("short", "long"))

    @sub.node(state=Count)
    async def grow(text: str, state: Count, context) -> Success:
        context.params.limit = 99  # a copy: later visits still read the invocation's params
        return Success(
            output=text + context.params.suffix, state=Count(state.visits + 1, state.seen + (text,))
        )

    @sub.feature_node
    async def decide(text: str, context) -> FeatureSuccess:
        FeatureState.replace(mode, "long" if len(text) >= context.params.limit + 3 else "short")
        return FeatureSuccess()

    @sub.node(state=Untouched)
    async def spare(text: str, state: Untouched, context) -> Success:  # pragma: no cover - never visited
        return Success(output=text, state=state)

    sub.edge(sub.input, grow)
    sub.edge(grow, decide)
    sub.edge(decide, grow, effect=mode.assign("short"))
    sub.edge(decide, sub.output, effect=mode.assign("long"))
    sub.edge(spare, sub.output)
    return sub


@pytest.fixture
def lab(file_lab: Lab) -> Lab:
    return file_lab


def _payloads(run) -> list[tuple[str, object]]:
    return [(cp.next[0].node_id, cp.next[0].fields["payload"]) for cp in run.history() if cp.next]


# -- the four kinds of value ----------------------------------------------------------------------


def test_payload_flows_from_input_through_visits_to_output(lab: Lab) -> None:
    """Seed: "Payload — Flows from the subroutine Input through visits to its Output. A visit receives its
    edge-specific Input and, except for a Feature visit, returns Success.output." """
    run = declare_loop(lab).start("ab", params=Params(limit=2)).run()
    assert run.status == "done" and run.output == "ab!!!"
    assert _payloads(run) == [
        ("grow", "ab"), ("decide", "ab!"), ("grow", "ab!"), ("decide", "ab!!"), ("grow", "ab!!"), ("decide", "ab!!!"),
    ]  # fmt: skip
    # the Feature visit (decide) passed its input on unchanged: grow got what decide received
    assert run.history()[-1].output == "ab!!!"


def test_params_are_selected_per_invocation_and_read_as_context_params(lab: Lab) -> None:
    """Seed: "Params — Selected for one subroutine invocation. Visits read context.params." """
    sub = declare_loop(lab)
    short = sub.start("ab", params=Params(limit=1, suffix="?")).run()
    long = sub.start("ab", params={"limit": 4, "suffix": "."}).run()
    assert short.output == "ab??" and long.output == "ab....."
    assert short.state.params == Params(limit=1, suffix="?")  # a visit's write to its copy did not stick
    assert [cp.state["params"] for cp in long.history()] == [{"limit": 4, "suffix": "."}] * len(
        long.history()
    )


def test_node_local_state_is_constructed_before_the_enter_port_and_kept_across_revisits(lab: Lab) -> None:
    """Seed: "The runtime constructs every node-local State with no arguments before executing the enter
    port." and "Node-local State — One value per non-Feature executable node, initialized at graph entry and
    retained across revisits. Each visit receives its target node's state and returns a replacement through
    Success.state." """
    run = declare_loop(lab).start("ab")
    first = run.history()[0]
    assert first.next[0].node_id == "grow" and first.status == "created"  # nothing has run yet
    assert first.state["nodes"] == {"grow": {"visits": 0, "seen": []}, "spare": {"marker": "constructed"}}
    assert "decide" not in first.state["nodes"]  # a Feature node has no node-local state
    run.run()
    grows = [cp.state["nodes"]["grow"] for cp in run.history()]
    assert [g["visits"] for g in grows] == [0, 1, 1, 2, 2, 3, 3]
    assert grows[-1]["seen"] == ["ab", "ab!", "ab!!"]  # every revisit received the previous replacement
    assert run.state.nodes["grow"] == Count(3, ("ab", "ab!", "ab!!"))
    assert run.state.nodes["spare"] == Untouched()


def test_all_incoming_visits_to_a_node_share_its_state(lab: Lab) -> None:
    """Seed: "All incoming visits to a node share that node's state. A value required by another node should
    travel through the payload; a temporary value used only within one visit should remain a local
    variable." """
    sub = lab.subroutine("shared", input=int, output=tuple[int, ...])
    phase = sub.feature("phase", ("one", "two"))

    @sub.node(state=Count)
    async def hub(n: int, state: Count, context) -> Success:
        local = state.visits + 1  # a temporary value stays a local variable
        return Success(output=n + local, state=Count(local, state.seen + (f"from-{n}",)))

    @sub.feature_node
    async def switch(n: int, context) -> FeatureSuccess:
        FeatureState.replace(phase, "one" if FeatureState.get(phase) is None else "two")
        return FeatureSuccess()

    @sub.node
    async def detour(n: int, state, context) -> Success:
        return Success(output=n * 10)

    @sub.node(state=Count)
    async def report(n: int, state: Count, context) -> Success:
        return Success(output=(n,), state=state)

    sub.edge(sub.input, hub)
    sub.edge(hub, switch)
    sub.edge(switch, detour, effect=phase.assign("one"))
    sub.edge(switch, report, effect=phase.transition("one", "two"))
    sub.edge(detour, hub)  # a second incoming edge of hub
    sub.edge(report, sub.output)
    run = sub.start(1).run()
    assert run.status == "done", run.error
    assert run.state.nodes["hub"] == Count(2, ("from-1", "from-20"))  # both edges' visits saw one state
    assert run.output == (22,)


def test_returned_state_of_another_type_fails_the_visit_naming_the_value(lab: Lab) -> None:
    """Seed: "A returned state must have exactly the declared node state type and recursively immutable
    contents." """
    sub = lab.subroutine("bad-state", input=int, output=int)

    @sub.node(state=Count)
    async def sloppy(n: int, state: Count, context) -> Success:
        return Success(output=n, state=Count(1, ("a", ["b"])))  # type: ignore[arg-type]

    sub.edge(sub.input, sloppy)
    sub.edge(sloppy, sub.output)
    run = sub.start(1).run()
    assert run.status == "failed" and run.head == 0
    assert run.error["type"].endswith("NodeStateValueError")
    assert "state.seen[1] is a list" in run.error["message"] and "node sloppy" in run.error["message"]
    assert run.state.nodes["sloppy"] == Count()
    assert issubclass(NodeStateValueError, TypeError)


# -- feature state ---------------------------------------------------------------------------------


def test_features_start_at_none_in_each_invocation_and_first_assignment_goes_through_an_effect(
    lab: Lab,
) -> None:
    """Seed: "Every feature starts at None, with no initializer callback." and "It returns FeatureSuccess and
    preserves the payload. The first assignment requires an assignment or unconstrained effect on the
    outgoing edge" """
    sub = declare_loop(lab)
    for _ in range(2):
        run = sub.start("abcdef")
        assert run.history()[0].state["features"] == {"mode": None}
        run.step()  # grow
        assert run.state.features == {"mode": None}
        run.step()  # decide: the first assignment, admitted by the edge decide -> Output (mode := 'long')
        assert run.state.features == {"mode": "long"} and run.status == "done"
        assert run.output == "abcdef!"  # the Feature visit preserved the payload


def test_first_assignment_without_an_assigning_effect_is_refused(lab: Lab) -> None:
    """Seed: "The first assignment requires an assignment or unconstrained effect on the outgoing edge;" """
    sub = lab.subroutine("needs-assign", input=int, output=int)
    mode = sub.feature("mode", ("a", "b"))

    @sub.feature_node
    async def pick(n: int, context) -> FeatureSuccess:
        FeatureState.replace(mode, "b")
        return FeatureSuccess()

    sub.edge(sub.input, pick)
    sub.edge(pick, sub.output, effect=mode.transition("a", "b"))
    run = sub.start(1).run()
    assert run.status == "failed" and run.head == 0 and run.state.features == {"mode": None}
    assert "first assignment (None → 'b') needs an assignment or unconstrained effect" in run.error["message"]


def test_condition_on_a_none_feature_fails_the_station_with_value_error(lab: Lab) -> None:
    """Seed: "evaluating a condition on a feature that is still None raises ValueError." """
    sub = lab.subroutine("too-early", input=int, output=int)
    mode = sub.feature("mode", ("a", "b"))

    @sub.node
    async def work(n: int, state, context) -> Success:
        return Success(output=n)

    sub.edge(sub.input, work)
    sub.edge(work, sub.output, when=mode.equals("a"))
    run = sub.start(1).run()
    assert run.status == "failed" and run.head == 0
    assert run.error["type"].endswith("FeatureUnsetError") and issubclass(FeatureUnsetError, ValueError)
    assert "feature 'mode', which is still None" in run.error["message"]


# -- the commit rule -------------------------------------------------------------------------------


def test_a_refused_edge_keeps_the_head_and_does_not_undo_external_effects(lab: Lab, tmp_path: Path) -> None:
    """Seed: "Zero or multiple compatible edges raise an exception; the candidate state does not become the
    next graph state. This commit rule does not undo files, agent requests, or other external effects
    performed by the visit." """
    sub = lab.subroutine("ambiguous", input=int, output=int)
    level = sub.feature("level", ("low", "high"))
    sidefile = tmp_path / "written-by-the-visit.txt"

    @sub.feature_node
    async def classify(n: int, context) -> FeatureSuccess:
        FeatureState.replace(level, "low")
        return FeatureSuccess()

    @sub.node(state=Count)
    async def write(n: int, state: Count, context) -> Success:
        sidefile.write_text(f"visit {state.visits + 1}")
        return Success(output=n, state=Count(state.visits + 1))

    sub.edge(sub.input, classify)
    sub.edge(classify, write, effect=level.assign("low"))
    sub.edge(write, sub.output, when=level.equals("low"))
    sub.edge(write, classify, when=level.one_of("low", "high"))  # also compatible: ambiguous
    run = sub.start(5)
    run.step()
    head, head_state = run.head, run.history()[-1].state
    result = run.step()
    assert result.outcome == "failed" and "AmbiguousEdgeError" in result.error
    assert run.status == "failed" and run.head == head
    assert run.state.nodes["write"] == Count(0)  # the candidate Count(1) did not become the graph state
    assert all(
        cp.state["nodes"]["write"] == {"visits": 0, "seen": []} for cp in run.history(all_branches=True)
    )
    assert lab.run(run.id).head_seq == head and run.history()[-1].state == head_state
    assert sidefile.read_text() == "visit 1"  # the file the visit wrote stays
    assert "not undone" in run.error["message"] and "head stays" in run.error["message"]
    assert issubclass(AmbiguousEdgeError, RuntimeError)

    from lab.widgets import RunWidget

    w = RunWidget(run)
    w._show_run()
    assert "AmbiguousEdgeError" in w.message.value and "not undone" in w.message.value


# -- in the lab: time travel, widget, diff, resume ---------------------------------------------------


def test_time_travel_and_the_widget_show_node_local_and_feature_state_per_checkpoint(lab: Lab) -> None:
    """Seed: "Feature state — One value per declared feature, initially None in each graph invocation. Edge
    conditions observe it" and "Node-local State — ... retained across revisits" — shown per checkpoint."""
    from lab.widgets import RunWidget

    run = declare_loop(lab).start("ab", params=Params(limit=2)).run()
    assert run.state_at(2).features == {"mode": "short"} and run.state_at(1).nodes["grow"] == Count(
        1, ("ab",)
    )
    w = RunWidget(run)
    seen = []
    for i in range(len(w._seqs)):
        w.slider.value = i
        html = w.state_panel.value
        assert (
            "node-local state" in html and "feature state" in html and "params" in html and "payload" in html
        )
        seen.append(html)
    assert "&quot;short&quot;" in seen[2] or "short" in seen[2]
    assert "null" in seen[0] or "None" in seen[0]
    w.slider.value = 2  # checkpoint 2: decide assigned mode for the first time
    assert "features.mode" in w.diff_panel.value
    diff = run.diff(1, 2)
    assert [(c.path, c.old, c.new) for c in diff.changes] == [("features.mode", None, "short")]
    assert [str(c) for c in run.diff(0, run.head).changes if c.path.startswith("features")] == [
        '~ features.mode: null -> "long"'
    ]
    w.close()


def test_a_subroutine_run_resumes_from_a_reopened_store(db_path: str) -> None:
    """Seed: "Node-local State — ... retained across revisits." — also across a store reopened from disk."""
    lab = Lab(db_path)
    run = declare_loop(lab).start("ab")
    run.step()
    run.step()
    run.step()
    run_id = run.id
    lab.close()
    lab = Lab(db_path)
    declare_loop(lab)  # after a restart the cells that declare the subroutine run again
    again = lab.resume(run_id)
    assert again.state.nodes["grow"] == Count(2, ("ab", "ab!")) and again.state.features == {"mode": "short"}
    assert again.run().output == "ab!!!"
    lab.close()


# -- child calls --------------------------------------------------------------------------------------


def declare_caller(lab: Lab, *, fail_once: list[int] | None = None):
    """A parent with the same feature name as counting_child, calling it twice from one visit."""
    child = lab.subroutine(counting_child)
    sub = lab.subroutine("caller", input=int, output=tuple[int, ...])
    mode = sub.feature("mode", ("fresh", "seen"))

    @sub.feature_node
    async def mark(n: int, context) -> FeatureSuccess:
        FeatureState.replace(mode, "seen")
        return FeatureSuccess()

    @sub.node(state=Count)
    async def tally(n: int, state: Count, context) -> Success:  # the same node name as the child's
        first = await context.invoke(child, n)
        second = await context.invoke(child, n + 1)
        if fail_once is not None:
            fail_once.append(first)
            if len(fail_once) == 1:
                raise RuntimeError("the adapter failed after its child returned")
        return Success(output=(first, second), state=Count(state.visits + 1, state.seen + ("called",)))

    sub.edge(sub.input, mark)
    sub.edge(mark, tally, effect=mode.assign("seen"))
    sub.edge(tally, sub.output, when=mode.equals("seen"))
    return sub, child


def test_a_subroutine_call_runs_the_child_in_process_with_its_own_state(lab: Lab) -> None:
    """Seed: "Every child invocation initializes its own node and feature state. A Subroutine call shares the
    parent process; ... In both cases, context.invoke() returns the child's output, not its internal state. A
    call node's own state remains part of the parent invocation." """
    sub, child = declare_caller(lab)
    run = sub.start(3).run()
    assert run.status == "done", run.error
    # each child started from fresh node and feature state although the parent's mode was 'seen'
    assert run.output == (300, 400)
    children = [lab.resume(e.payload["child_run"]) for e in run.events("call")]
    assert [c.graph.name for c in children] == ["counting_child", "counting_child"]
    for c in children:
        assert c.history()[0].state["features"] == {"mode": None}
        assert c.history()[0].state["nodes"] == {"tally": {"count": 0}}
        assert c.state.features == {"mode": "fresh"} and c.state.nodes["tally"].count == 1
        assert "call" not in str(c.state.nodes)
    assert all(e.payload["call"] == "subroutine" for e in run.events("call"))
    assert run.state.nodes["tally"] == Count(1, ("called",))  # the call node's state is the parent's


def test_a_retried_call_adapter_continues_the_same_durable_child(lab: Lab) -> None:
    """Seed: "The call adapter may be evaluated again around a durable child invocation, but only the returned
    Success commits its candidate node-local state." """
    attempts: list[int] = []
    sub, child = declare_caller(lab, fail_once=attempts)
    run = sub.start(3).run()
    assert run.status == "failed" and run.state.nodes["tally"] == Count()  # no Success: nothing committed
    assert len(lab.runs(graph="counting_child")) == 2
    run.retry()  # the failed station again: it settles at End
    assert run.status == "done" and run.output == (300, 400)
    assert attempts == [300, 300]  # the adapter ran twice ...
    assert len(lab.runs(graph="counting_child")) == 2  # ... around the same two child invocations
    assert run.state.nodes["tally"] == Count(1, ("called",))  # committed once, by the returned Success


def test_a_workflow_call_runs_the_child_in_a_separate_process(lab: Lab, tmp_path: Path) -> None:
    """Seed: "A Subroutine call shares the parent process; a Workflow call uses a separate process. In both
    cases, context.invoke() returns the child's output, not its internal state." """
    log = tmp_path / "log"
    run = lab.subroutine(workflow_parent).start(3, params=Files(log=str(log))).run()
    assert run.status == "done", run.error
    assert run.output == 40 and run.state.nodes["call"].outputs == (40,)
    lines = log.read_text().splitlines()
    pids = {line.split()[0]: line.split()[1] for line in lines if len(line.split()) == 2}
    assert pids["adapter"] == str(os.getpid()) and pids["first"] != str(os.getpid())
    (call,) = [e.payload for e in run.events("call")]
    assert call["call"] == "workflow" and call["target"] == "tests.integration.subroutine_flows:slow_child"
    lab_path = call["store"]
    assert os.path.exists(lab_path) and lab_path.startswith(lab.path + ".children")
    child_lab = Lab(lab_path)
    try:
        child_lab.subroutine(slow_child)
        (rec,) = child_lab.runs()
        assert rec.status == "done" and rec.run_id != run.id and rec.output == 40
        child = child_lab.resume(rec.run_id)
        assert child.history()[0].state["nodes"] == {"first": {"count": 0}, "second": {"count": 0}}
    finally:
        child_lab.close()


def test_workflow_call_needs_a_definition_a_child_process_can_import(lab: Lab) -> None:
    """Seed: "a Workflow call uses a separate process." — so its child must be importable there."""
    from lab.subroutine import SubroutineDefinitionError

    sub = lab.subroutine("local", input=int, output=int)
    with pytest.raises(SubroutineDefinitionError, match="no attribute holding this definition"):
        Workflow(sub)
    sub.definition.module = "__main__"  # as if declared in a notebook cell
    with pytest.raises(SubroutineDefinitionError, match="imports it; this definition lives in '__main__'"):
        Workflow(sub)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("parent", "kill"),
    [("workflow_parent", "group"), ("inprocess_parent", "group"), ("workflow_parent", "parent only")],
)
def test_parent_killed_mid_child_resumes_and_commits_once(parent: str, kill: str, tmp_path: Path) -> None:
    """Seed: "The call adapter may be evaluated again around a durable child invocation, but only the returned
    Success commits its candidate node-local state." — the parent SIGKILLed while the child waits at its second
    node: with its child process ("group": the child continues from its own checkpoint when the parent is
    resumed), or alone ("parent only": the orphaned child finishes and the resumed parent takes its result).
    Either way the adapter runs again, the child's work is not repeated, and the call node's state is committed
    once."""
    db, log, gate = tmp_path / "lab.duckdb", tmp_path / "log", tmp_path / "gate"
    worker = [sys.executable, str(REPO / "tests" / "integration" / "subroutine_worker.py"), str(db), parent]
    proc = subprocess.Popen([*worker, "start", str(log), str(gate)], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)  # fmt: skip
    deadline = time.monotonic() + 60
    while "second-start" not in (log.read_text() if log.exists() else ""):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the child never reached its second node"
        time.sleep(0.05)
    if kill == "group":
        os.killpg(proc.pid, signal.SIGKILL)  # the parent and any child process die together
    else:
        os.kill(proc.pid, signal.SIGKILL)  # the child process lives on, holding its store
    proc.communicate()
    run_id = (tmp_path / "log.run").read_text()
    if kill == "group":
        gate.write_text("open")
    resumed = subprocess.Popen([*worker, "resume", run_id], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path)  # fmt: skip
    if kill != "group":
        time.sleep(2)  # the resumed parent's call finds the child's store held by the orphan, and waits
        gate.write_text("open")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "done" and result["output"] == 40
    assert result["state"] == [1, [40]]  # committed once, by the Success of the second evaluation
    lines = [line.split()[0] for line in log.read_text().splitlines()]
    assert lines.count("adapter") == 2  # the call adapter was evaluated again ...
    assert lines.count("first") == 1  # ... and the child's first node was not repeated
    assert lines.count("second-start") == (2 if kill == "group" else 1) and lines.count("second-end") == 1
    (call,) = result["calls"]  # one durable child invocation
    child_lab = Lab(call["store"]) if parent == "workflow_parent" else Lab(db)
    try:
        child_lab.subroutine(slow_child)
        (rec,) = child_lab.runs(graph="slow_child")
        assert parent == "workflow_parent" or rec.run_id == call["child_run"]
        kinds = [e.kind for e in child_lab.events(rec.run_id)]
        assert rec.status == "done" and kinds.count("started") == 1
        assert ("interrupted" in kinds) == (kill == "group")
        assert "interrupted" in [e.kind for e in child_lab.events(run_id)] or parent == "workflow_parent"
    finally:
        child_lab.close()
    if parent == "workflow_parent":
        lab = Lab(db)
        try:
            assert "interrupted" in [e.kind for e in lab.events(run_id)]
        finally:
            lab.close()
