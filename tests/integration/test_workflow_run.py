"""Workflow runs on the serial engine (seed 004; issue 19 requirements 2, 4 and 5), on a DuckDB file.

Scenarios:
- exits are tested in declaration order; the first that holds wins, else the default; none and no
  default is a clear error that leaves the head intact
- determinism: 1,000 random bags choose the same exit twice (and agree with a one-line oracle);
  whole runs over random worker outputs replay the same path twice
- the bag is written by checkpoint effects (setVariable; an exit effect names the exit outright)
  and worker outputs (only declared variables, of their declared types), and every write is
  validated, a person's state edit included
- step manifests are checked warn-only; each warning is a `warning` event, and routing goes on
- the drawing labels exits with their `when` and dashes the default exit; the widget offers a
  checkpoint's choices as buttons and its state inspector shows the bag
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from lab import Lab
from lab.errors import StateEditError, WaitError
from lab.workflow.definition import load
from lab.workflow.errors import ChoiceError, NoExitError
from lab.workflow.exits import check_manifest, choose_exit
from tests.integration.workflow_flows import FLOW, FULL_MANIFEST, workers


@pytest.fixture
def lab(file_lab: Lab) -> Lab:
    return file_lab


def trail(run) -> list[tuple[str, str | None, str]]:
    return [(t.activity, t.exit, t.reason) for t in run.graph.trail(run)]


def test_exits_first_that_holds_in_declaration_order_else_the_default(lab: Lab) -> None:
    """When the activity completes, the worker tests its exits in order against the current variables,
    takes the first whose when holds, and otherwise takes the one marked isDefault."""
    wf = lab.workflow(FLOW, workers=workers([(2, True), (1, False), (0, False)]))
    run = wf.start(user_request="review PR 12")
    run.run()
    wf.choose(run, "quick")
    run.run()
    assert run.status == "done"
    # (2, True): both `urgent` and `fix` hold; `urgent` is declared first and wins
    assert trail(run) == [
        ("triage", "review", "default"),
        ("review", "urgent", "when"),
        ("urgent", "back", "default"),
        ("review", "fix", "when"),
        ("fix", "back", "default"),
        ("review", "done", "default"),
    ]
    assert run.output == {
        "mode": "standard",
        "bug_count": 0,
        "critical": False,
        "notes": [],
        "user_request": "review PR 12",
    }
    settled = [e.node_id for e in run.events("settled")]
    assert settled == ["triage", "review", "urgent", "review", "fix", "review"]


def test_no_exit_holds_and_no_default_is_a_clear_error(lab: Lab) -> None:
    """The first exit whose condition holds, or else the default exit, is taken: with neither, the
    station fails with a message naming the exits tested and the bag, and the head stays."""
    flow = copy.deepcopy(FLOW)
    flow["activities"][1]["exits"].pop()  # review loses its default
    del flow["exit_destinations"]["review"]["done"]
    wf = lab.workflow(flow, workers=workers([(0, False)]))
    run = wf.start(at="review")
    run.run()
    assert run.status == "failed"
    err = run.error
    assert err["type"].endswith("NoExitError") and err["node_id"] == "review"
    assert "none of its exits holds and it has no default exit" in err["message"]
    assert "urgent (critical && bug_count > 0), fix (bug_count > 0)" in err["message"]
    assert "'bug_count': 0" in err["message"]
    assert run.head == 0 and run.state.variables["bug_count"] == 0
    with pytest.raises(NoExitError):
        choose_exit(wf.definition.activities["review"], {"bug_count": 0})


def _oracle(activity, bag: dict[str, Any]) -> str | None:
    """First exit whose `when` holds by Python's own reading of these three conditions, else the default."""
    conds = {
        "urgent": lambda b: bool(b.get("critical")) and b.get("bug_count") is not None and b["bug_count"] > 0,
        "fix": lambda b: b.get("bug_count") is not None and b["bug_count"] > 0,
    }
    return next((e.id for e in activity.exits if e.id in conds and conds[e.id](bag)), "done")


def test_same_inputs_same_path_for_1000_random_bags_replayed_twice() -> None:
    """Exits, artifact contracts, binding provenance, and delivery payloads are all computed from
    definitions and state — same inputs, same path, with model judgment reserved for the work itself."""
    review = load(FLOW).activities["review"]
    rng = random.Random(19)
    bags = []
    for _ in range(1000):
        bag: dict[str, Any] = {"mode": rng.choice(["standard", "deep"])}
        if rng.random() < 0.9:
            bag["bug_count"] = rng.choice([0, 1, 2, 0.5, -1, 40])
        if rng.random() < 0.9:
            bag["critical"] = rng.random() < 0.5
        bags.append(bag)
    first = [choose_exit(review, b) for b in bags]
    second = [choose_exit(review, copy.deepcopy(b)) for b in bags]
    assert first == second
    assert [t.exit for t in first] == [_oracle(review, b) for b in bags]
    assert {t.exit for t in first} == {"urgent", "fix", "done"}  # every route is exercised


def test_whole_runs_replay_the_same_path(lab: Lab) -> None:
    """Conversational context plays no part in routing: the same worker outputs give the same trail and
    the same sequence of settled stations, run after run."""
    rng = random.Random(7)
    scripts = [
        [(rng.choice([0, 1, 3]), rng.random() < 0.4) for _ in range(rng.randint(0, 3))] for _ in range(12)
    ]
    for script in scripts:
        paths = []
        for _ in range(2):
            wf = lab.workflow(FLOW, workers=workers(script))
            run = wf.start(at="review")
            run.run()
            assert run.status == "done"
            paths.append((trail(run), [e.node_id for e in run.events("settled")], run.output))
        assert paths[0] == paths[1]


def test_checkpoint_effects_set_variables_or_name_the_exit(lab: Lab) -> None:
    """Checkpoint effects (your choice at a checkpoint carries a declared setVariable effect) ... A
    checkpoint option's exit effect names an exit outright."""
    reviewed: list[dict[str, Any]] = []

    def review(ctx):
        reviewed.append(dict(ctx.variables))
        return None

    wf = lab.workflow(FLOW, workers={"review": review})
    run = wf.start()
    run.run()
    assert run.status == "waiting" and run.wait.kind == "interrupt"
    assert run.wait.details["choices"] == [
        {"id": "deep", "label": "Deep review"},
        {"id": "quick", "label": "Quick look"},
        {"id": "skip", "label": "Skip it"},
    ]
    with pytest.raises(
        ChoiceError, match=r"'deeper' is not a choice of checkpoint depth .*\['deep', 'quick', 'skip'\]"
    ):
        wf.choose(run, "deeper")
    wf.choose(run, "deep")
    with pytest.raises(WaitError):
        wf.choose(run, "quick")  # one answer per wait
    run.run()
    assert run.status == "done" and reviewed[0]["mode"] == "deep"
    assert trail(run)[0] == ("triage", "review", "default")

    skip = wf.start()
    skip.run()
    wf.choose(skip, "skip")
    skip.run()
    assert skip.status == "done" and trail(skip) == [("triage", "skipped", "checkpoint")]
    assert len(reviewed) == 1  # the exit effect ended triage; review never ran


def test_an_answer_that_is_not_a_choice_fails_the_station(lab: Lab) -> None:
    wf = lab.workflow(FLOW)
    run = wf.start()
    run.run()
    run.resume_with("sideways")  # past wf.choose's check
    run.run()
    assert run.status == "failed" and run.error["type"].endswith("ChoiceError")
    assert "not one of its choices ['deep', 'quick', 'skip']" in run.error["message"]


def test_worker_outputs_are_validated_against_the_schema_and_the_writes(lab: Lab) -> None:
    """Worker outputs (an activity worker returns variables it determined from its domain work, like
    has_critical_bugs: true after a failing test run) — and a schema-validated variable bag holds the state."""
    outputs: list[Any] = [
        {"variables": {"bug_count": "three"}},
        {"variables": {"mode": "deep"}},
        {"variables": {"bug_count": 1}, "extra": 1},
        ["not", "a", "result"],
    ]
    wf = lab.workflow(FLOW, workers={"review": lambda ctx: outputs.pop(0)})
    run = wf.start(at="review")
    messages = []
    for _ in range(4):
        run.run() if run.status != "failed" else run.retry()
        assert run.status == "failed" and run.error["type"].endswith("BagError")
        messages.append(run.error["message"])
        assert run.head == 0 and run.state.variables["bug_count"] == 0  # nothing half-written
    assert "'bug_count': expected a number, got the string 'three'" in messages[0]
    assert "'mode' is not among the variables this activity writes" in messages[1]
    assert "returned keys ['extra']" in messages[2]
    assert "returned a list" in messages[3]


def test_a_state_edit_is_schema_validated_too(lab: Lab) -> None:
    """The variable bag is schema-validated on every write, a person's edit included."""
    wf = lab.workflow(FLOW)
    run = wf.start(at="review")
    with pytest.raises(StateEditError, match="expected a number, got the string 'lots'"):
        run.edit_state(variables={**run.state.variables, "bug_count": "lots"})
    with pytest.raises(StateEditError, match="'ghost' is not a declared variable"):
        run.edit_state(variables={**run.state.variables, "ghost": 1})
    run.edit_state(variables={**run.state.variables, "bug_count": 4})
    assert run.state.variables["bug_count"] == 4


@pytest.mark.parametrize(
    ("manifest", "warnings"),
    [
        (FULL_MANIFEST, []),
        ([FULL_MANIFEST[0], {"step_id": "lint", "output": {"issues": 2}}, FULL_MANIFEST[1]], []),
        (
            [FULL_MANIFEST[0], {"step_id": "check_file", "output": {"ok": True}}, FULL_MANIFEST[1]],
            [],
        ),
        ([FULL_MANIFEST[1]], ["step run_tests is missing from the manifest"]),
        ([FULL_MANIFEST[1], FULL_MANIFEST[0]], ["step run_tests is reported after a step declared later"]),
        (
            [{"step_id": "run_tests", "output": {}}, FULL_MANIFEST[1]],
            ["step run_tests reported an empty output"],
        ),
        (
            [{"step_id": "run_tests", "output": {"failed": 0, "passed": 3}}, FULL_MANIFEST[1]],
            ["step run_tests reported output key(s) ['passed'] its operation does not declare (failed)"],
        ),
        (
            [*FULL_MANIFEST, {"step_id": "deploy", "output": {"x": 1}}],
            ["step deploy is not a step of activity review"],
        ),
        ([*FULL_MANIFEST, "junk"], ["manifest entry 2 is not a {step_id, output} object"]),
        (None, ["step run_tests is missing", "step per_file is missing"]),
    ],
)
def test_step_manifest_is_validated_warn_only(manifest: Any, warnings: list[str]) -> None:
    """The server validates warn-only: every ungated top-level step present, declaration order preserved,
    non-empty outputs, and every reported key an id the step's operation declares. Steps gated by when or
    condition may be omitted; loop-body step ids are accepted but never required."""
    got = check_manifest(load(FLOW).activities["review"], manifest)
    assert len(got) == len(warnings), got
    for message, fragment in zip(got, warnings, strict=True):
        assert fragment in message


def test_manifest_warnings_are_events_and_routing_goes_on(lab: Lab) -> None:
    """When an activity ends, the orchestrator passes a step_manifest to next_activity — a structured
    summary of completed steps from the activity just finished ... The server validates warn-only."""
    wf = lab.workflow(
        FLOW,
        workers={
            "review": lambda ctx: {
                "variables": {"bug_count": 0},
                "step_manifest": [{"step_id": "per_file", "output": {}}],
            }
        },
    )
    run = wf.start(at="review")
    run.run()
    assert run.status == "done"
    warned = run.events("warning")
    assert [(e.node_id, e.payload["check"]) for e in warned] == [("review", "step_manifest")] * 2
    assert [e.payload["message"] for e in warned] == [
        "step run_tests is missing from the manifest (it is not gated, so it always runs)",
        "step per_file reported an empty output",
    ]
    settled = run.events("settled")[0]
    assert warned[0].seq < settled.seq and warned[0].checkpoint_seq == 0  # observed during the station
    rows = lab.sql("select count(*) from events where kind = 'warning' and run_id = ?", [run.id]).fetchall()
    assert rows == [(2,)]


def test_the_drawing_labels_exits_with_when_and_dashes_the_default(lab: Lab) -> None:
    """An activity declares its outcomes as exits, and the workflow's graph binds each exit to a destination."""
    wf = lab.workflow(FLOW)
    dot = wf.render()
    assert 'review -> urgent [label="urgent: critical &amp;&amp; bug_count > 0"]' in dot
    assert 'review -> fix [label="fix: bug_count > 0"]' in dot
    assert 'review -> __end__ [label="done (default)" style=dashed]' in dot
    assert "triage -> __end__ [label=\"skipped: mode == 'none'\"]" in dot
    assert 'triage -> review [label="review (default)" style=dashed]' in dot
    svg = wf.svg()
    assert "critical &amp;&amp; bug_count &gt; 0" in svg
    assert svg.count('stroke-dasharray="5,2"') >= 4  # the three default edges (path + arrowhead)
    assert "review --> urgent: urgent#58; critical && bug_count #gt; 0" in wf.mermaid()


def test_the_widget_offers_the_choices_and_shows_the_bag(lab: Lab) -> None:
    """Your choice at a checkpoint carries a declared setVariable effect: the consent panel offers the
    checkpoint's choices as buttons; the state inspector shows the variable bag."""
    from lab.widgets import RunWidget

    wf = lab.workflow(FLOW, workers=workers([]))
    run = wf.start(user_request="look at PR 3")
    w = RunWidget(run)
    w.run_btn.click()
    assert w.wait(10) and run.status == "waiting"
    assert w.consent.layout.display is None and w.asking.layout.display == "none"
    assert w.verdicts.layout.display == "none"
    assert [b.description for b in w.choices.children] == ["Deep review", "Quick look", "Skip it"]
    assert "How deep should the review go?" in w.wait_info.value
    assert "waits for a choice" in w.step_btn.tooltip
    assert (
        '<span class="gl-k">user_request</span>: <span class="gl-s">&quot;look at PR 3&quot;</span>'
        in w.state_panel.value
    )
    w.choices.children[0].click()
    assert w.wait(10) and run.status == "done"
    assert w.consent.layout.display == "none"
    assert '<span class="gl-k">mode</span>: <span class="gl-s">&quot;deep&quot;</span>' in w.state_panel.value
    assert "⚠" not in w.events_panel.value


def test_a_changed_definition_is_a_new_revision(lab: Lab) -> None:
    wf = lab.workflow(FLOW)
    rev = wf.revision
    assert lab.workflow(copy.deepcopy(FLOW)) is wf and wf.revision == rev  # same content: same revision
    changed = copy.deepcopy(FLOW)
    changed["activities"][1]["exits"][1]["when"] = "bug_count > 1"
    assert lab.workflow(changed) is wf and wf.revision == rev + 1
    with pytest.raises(Exception, match="already a graph of this lab"):
        lab.graph("clash")
        lab.workflow({**FLOW, "name": "clash"})


def test_an_activation_variable_set_early_branches_the_rest_of_the_run(lab: Lab) -> None:
    """Path variation works through ordinary state: an activation variable set early (by a detection step
    or a checkpoint) marks a variant — review mode, monorepo handling — and exit conditions and step gates
    branch on it for the rest of the run."""
    flow = copy.deepcopy(FLOW)
    flow["activities"][0]["checkpoints"][0]["when"] = "!is_monorepo"  # a monorepo skips the question
    flow["activities"][0]["exits"][0]["when"] = "is_monorepo && mode == 'standard'"
    asked = lab.workflow(flow)
    single = asked.start(
        repo={"host_repo_path": "/r", "target_repo": "r", "component_path": "", "is_monorepo": False}
    )
    single.run()
    assert single.status == "waiting"  # the checkpoint's gate held: it asks
    mono = asked.start(
        repo={"host_repo_path": "/m", "target_repo": "m", "component_path": "a", "is_monorepo": True}
    )
    mono.run()
    assert mono.status == "done" and trail(mono) == [
        ("triage", "skipped", "when")
    ]  # no question, another exit
