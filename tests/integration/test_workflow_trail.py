"""A workflow's trail of exits is read from its checkpoints; the state holds only the latest exit
(issue 27 item 5: a workflow activity costs the same in a 10- and a 1,000-activity loop)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab import Lab

LOOP: dict[str, Any] = {
    "name": "loop",
    "variables": [{"name": "n", "type": "number", "default": 0}, {"name": "limit", "type": "number", "default": 10}],
    "activities": [
        {
            "id": "tick",
            "variables": {"writes": ["n"]},
            "exits": [{"id": "again", "when": "n < limit"}, {"id": "stop", "isDefault": True}],
        },
    ],
    "exit_destinations": {"tick": {"again": "tick", "stop": "end"}},
}


def _tick(ctx: Any) -> dict[str, Any]:
    return {"variables": {"n": ctx.variables["n"] + 1}}


@pytest.fixture
def wf(file_lab: Lab) -> Any:
    return file_lab.workflow(LOOP, workers={"tick": _tick})


def _exits(wf: Any, run: Any, seq: int | None = None) -> list[str | None]:
    return [t.exit for t in wf.trail(run, seq)]


def test_a_checkpoint_does_not_grow_with_the_trail(wf: Any) -> None:
    """The state written at the 55th activity is as long as at the 5th: the loop's cost per
    activity does not grow with its length (it grew with the whole trail in every checkpoint)."""
    run = wf.start(variables={"limit": 60}, step_limit=100)
    run.run()
    assert run.status == "done" and run.output["n"] == 60
    states = {rec.state["taken"]: rec.state for rec in run.history()}
    early, late = json.dumps(states[5]), json.dumps(states[55])
    assert abs(len(late) - len(early)) <= 4  # only the digits of n and taken differ
    assert "trail" not in states[55] and states[55]["last"]["activity"] == "tick"
    assert _exits(wf, run) == ["again"] * 59 + ["stop"]
    assert _exits(wf, run.id) == _exits(wf, run)  # by run id, without the handle


def test_the_trail_follows_the_branch_after_a_rewind(wf: Any) -> None:
    """Rewind to the 3rd activity's checkpoint, change the bag and go on: the trail is the new
    branch's, not the abandoned one's, and the old branch's trail is still read at its seqs."""
    run = wf.start(variables={"limit": 6}, step_limit=20)
    run.run()
    at3 = next(rec.seq for rec in run.history() if rec.state["taken"] == 3)
    old_head = run.head
    run.rewind(at3)
    assert _exits(wf, run) == ["again"] * 3
    run.edit_state(variables={"n": 3, "limit": 4})
    run.run()
    assert run.output["n"] == 4 and _exits(wf, run) == ["again", "again", "again", "stop"]
    assert _exits(wf, run, old_head) == ["again"] * 5 + ["stop"]


def test_a_fork_carries_its_parents_trail(wf: Any, file_lab: Lab) -> None:
    """A fork's root holds only the parent's count and last exit; the entries before are read from
    the parent up to the checkpoint it was forked from, here and after the store is reopened."""
    run = wf.start(variables={"limit": 5}, step_limit=20)
    run.run()
    at2 = next(rec.seq for rec in run.history() if rec.state["taken"] == 2)
    fork = run.fork(at2)
    fork.run()
    assert fork.id != run.id and _exits(wf, fork) == ["again"] * 4 + ["stop"]
    assert len(wf.trail(fork)) == fork.state.taken == 5


def test_a_state_given_with_its_whole_trail_starts_from_it(wf: Any) -> None:
    """`state={'variables': ..., 'trail': [...]}` (a session resumed into another store, a state
    stored before this change) keeps that trail as what came before, and the run adds to it."""
    given = [{"activity": "tick", "exit": "again", "reason": "when", "to": "tick"}] * 2
    run = wf.start(state={"variables": {"n": 2, "limit": 3}, "trail": given}, step_limit=20)
    assert run.state.taken == 2 and len(run.state.earlier) == 1 and run.state.last.exit == "again"
    run.run()
    assert _exits(wf, run) == ["again", "again", "stop"]
    with pytest.raises(ValueError, match="trail, or earlier/last/taken, not both"):
        wf.state_type.model_validate({"variables": {"n": 0, "limit": 1}, "trail": given, "taken": 2})
