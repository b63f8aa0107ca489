"""Seed 004 "The rule of determinism": step gates are evaluated on the bag, branching on an activation variable."""

from __future__ import annotations

from typing import Any

import pytest

from lab import Lab

FLOW: dict[str, Any] = {
    "name": "layout",
    "variables": [
        {"name": "is_monorepo", "type": "boolean", "default": False},
        {"name": "packages", "type": "number", "default": 0},
    ],
    "activities": [
        {
            "id": "detect",
            "variables": {"writes": ["is_monorepo"]},
            "checkpoints": [
                {
                    "id": "kind",
                    "prompt": "Is this a monorepo?",
                    "options": [
                        {"id": "mono", "effects": {"setVariable": {"is_monorepo": True}}},
                        {"id": "single"},
                    ],
                }
            ],
            "exits": [{"id": "next", "isDefault": True}],
        },
        {
            "id": "map",
            "variables": {"writes": ["packages"]},
            "steps": [
                {"id": "scan", "outputs": ["files"]},
                {"id": "split_packages", "when": "is_monorepo", "outputs": ["packages"]},
                {"id": "single_component", "when": "!is_monorepo", "outputs": ["component"]},
            ],
            "exits": [{"id": "done", "isDefault": True}],
        },
    ],
    "exit_destinations": {"detect": {"next": "map"}, "map": {"done": "end"}},
}


def _run(choice: str, *, report_all: bool = False) -> tuple[Any, list[tuple[str, ...]]]:
    handed: list[tuple[str, ...]] = []

    def map_worker(ctx):
        handed.append(ctx.steps)
        steps = ["scan", "split_packages", "single_component"] if report_all else list(ctx.steps)
        outputs = {"scan": {"files": 3}, "split_packages": {"packages": 2}, "single_component": {"component": "x"}}
        return {"variables": {"packages": 2 if "split_packages" in ctx.steps else 1},
                "step_manifest": [{"step_id": s, "output": outputs[s]} for s in steps]}  # fmt: skip

    lab = Lab(":memory:")
    wf = lab.workflow(FLOW, workers={"map": map_worker})
    run = wf.start(user_request="map the repo")
    run.run()
    wf.choose(run, choice)
    run.run()
    return run, handed


@pytest.mark.parametrize(("choice", "steps", "packages"), [
    ("mono", ("scan", "split_packages"), 2), ("single", ("scan", "single_component"), 1),
])  # fmt: skip
def test_step_gates_branch_on_the_activation_variable(choice, steps, packages) -> None:
    """Seed 004: "an activation variable set early (by a detection step or a checkpoint) marks a variant —
    review mode, monorepo handling — and exit conditions and step gates branch on it for the rest of the
    run." The checkpoint sets is_monorepo; the next activity's worker is handed the steps whose gates hold
    on the bag (`ctx.steps`), and its manifest of exactly those draws no warning."""
    run, handed = _run(choice)
    assert run.status == "done" and handed == [steps]
    assert run.state.variables["packages"] == packages
    assert run.events("warning") == []


def test_a_reported_step_whose_gate_did_not_hold_is_warned_about() -> None:
    """Seed 004: steps "gated by when or condition may be omitted", and the gates are evaluated: a worker
    that reports the branch not taken gets a warning naming the step and its gate (warn-only: the run
    goes on)."""
    run, _ = _run("mono", report_all=True)
    assert run.status == "done"
    messages = [e.payload["message"] for e in run.events("warning")]
    assert messages == ["step single_component is reported, but its gate `!is_monorepo` did not hold on the bag it was handed"]
