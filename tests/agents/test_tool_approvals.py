"""Tool approvals inside a delegated station's agent (seed 001 "Consent re-entry", issue 30).

The agent (`agent_defs.asker`, a pydantic-ai `Agent` on `FunctionModel`) calls a tool declared
`requires_approval=True` once per model round; each round parks the run on one consent wait
listing the calls, a person answers it with `run.approve()` / `run.deny()` (or the view's consent
panel), and the agent continues as a new job with the verdict. No network.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import Lab
from lab.agents import ApprovalRoundsExceeded
from lab.widgets.run_widget import RunWidget

from .graphs import declare_sending as declare


@pytest.fixture
def asking_lab(lab: Lab) -> Lab:
    from .agent_defs import asker

    lab.agents.register("asker", asker)
    lab.agents.register("asker-worker", target="tests.agents.agent_defs:asker", runner="subprocess")
    return lab


def _approval_round(run, n: int) -> list[dict]:
    wait = run.wait
    assert run.status == "waiting" and wait is not None and wait.kind == "consent", (run.status, wait)
    assert wait.details["round"] == n and wait.node_id == "Outline"
    assert f"send(to='desk {n}')" in wait.prompt
    return wait.details["tool_approvals"]


@pytest.mark.parametrize("runtime", ["asker", "asker-worker"])
def test_one_consent_wait_per_model_round_and_the_agent_continues_with_the_verdict(
    asking_lab: Lab, runtime: str
) -> None:
    """Seed 001 "Consent re-entry": "One approval call per model round, with bounded chained rounds,
    is current." Each round that asks for tool approval parks the run on one consent wait listing
    that round's calls; approve and deny reach the agent's tool calls, in order, in this process's
    task and in a worker subprocess alike."""
    g = declare(asking_lab, runtime, rounds=2)
    run = g.start(g.nodes["Outline"]())
    run.run()
    assert _approval_round(run, 1) == [{"tool": "send", "args": {"to": "desk 1"}, "id": "send-1"}]
    first = run.job
    assert first is not None and first.status == "SUCCEEDED"
    assert run.wait.details["request_id"] == first.request_id
    run.approve("fine")
    run.run()
    assert _approval_round(run, 2)[0]["id"] == "send-2"
    run.deny("not that desk")
    run.run()
    assert run.status == "done", run.error
    # the approved call ran; the denied one did not, and the agent read the person's note instead
    assert run.output == "sent to desk 1 | not that desk"
    jobs = asking_lab.agents.jobs(run_id=run.id)
    assert [j.status for j in jobs] == ["SUCCEEDED"] * 3  # one job per model round, each a new request id
    assert len({j.request_id for j in jobs}) == 3
    # a continued round reports only what it added, not the messages it continued from
    assert [p["kind"] for m in jobs[1].messages() for p in m["parts"]] == ["tool-return", "tool-call"]
    kinds = [
        (e.kind, (e.payload or {}).get("kind"))
        for e in asking_lab.store.events(run.id)
        if e.kind in ("waiting", "verdict")
    ]
    assert kinds == [
        ("waiting", "delegate"),
        ("verdict", "delegate"),
        ("waiting", "consent"),
        ("verdict", "consent"),
    ] * 2 + [
        ("waiting", "delegate"),
        ("verdict", "delegate"),
    ]


def test_a_chain_longer_than_the_station_allows_fails_the_station(asking_lab: Lab) -> None:
    """Seed 001 "Consent re-entry": "One approval call per model round, with bounded chained rounds"
    — an agent that asks for approval in more rounds than the station's `max_approval_rounds`
    fails the station, naming the bound, instead of asking a person without end."""
    g = declare(asking_lab, "asker", rounds=3, max_rounds=2)
    run = g.start(g.nodes["Outline"]())
    run.run()
    for n in (1, 2):
        _approval_round(run, n)
        run.approve()
        run.run()
    assert run.status == "failed"
    assert run.error["type"] == f"{ApprovalRoundsExceeded.__module__}.{ApprovalRoundsExceeded.__qualname__}"
    assert "round 3" in run.error["message"] and "max_approval_rounds" in run.error["message"]
    assert (
        len(asking_lab.agents.jobs(run_id=run.id)) == 3
    )  # the third round ran, and asked; nothing ran its call


def test_the_consent_panel_answers_a_round_and_a_restart_resumes_the_chain(
    asking_lab: Lab, tmp_path: Path
) -> None:
    """Seed 001 "Consent re-entry": "before the first node executes, its Gate/delegated station kind and
    retained owner id must match the Run's single current wait owner" — the round's wait shows in the
    run view's consent panel, whose Approve answers it; a lab opened afresh on the store (the run
    parked on round 2) resumes the chain from its answer log."""
    g = declare(asking_lab, "asker", rounds=2)
    run = g.start(g.nodes["Outline"]())
    w = RunWidget(run)
    w.run_btn.click()
    assert w.wait(60)
    assert w.consent.layout.display is None and "desk 1" in w.wait_info.value
    w.approve_btn.click()
    assert w.wait(60)
    w.run_btn.click()
    assert w.wait(60)
    _approval_round(run, 2)
    run_id = run.id
    asking_lab.close()

    from .agent_defs import asker

    with Lab(tmp_path / "lab.duckdb") as again:
        again.agents.register("asker", asker)
        declare(again, "asker", rounds=2)
        resumed = again.resume(run_id)
        _approval_round(resumed, 2)
        resumed.approve()
        resumed.run()
        assert resumed.status == "done" and resumed.output == "sent to desk 1 | sent to desk 2"
        assert len(again.agents.jobs(run_id=run_id)) == 3
