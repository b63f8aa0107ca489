"""Delegated stations with the kernel's other capabilities (issue 26 "Kinds do not compose"):
`interrupt()` inside a delegated station, a `Retry` policy on one, and a run timeout while its job runs.

Every agent is a pydantic-ai `Agent` on `FunctionModel`, run as an asyncio task: no network.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, Retry, RunTimeout, interrupt
from lab.agents import DelegatedAgentNode

from .agent_defs import Plan

TRIES: dict[str, int] = {}
"""Calls of the flaky model in this process, by test."""


def _flaky(key: str, fails: int):
    """A model function that raises ConnectionError on its first `fails` calls (counted under `key`)."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        TRIES[key] = TRIES.get(key, 0) + 1
        if TRIES[key] <= fails:
            raise ConnectionError(f"the model service dropped the connection (call {TRIES[key]})")
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"title": "Flaky", "points": [str(TRIES[key])]})])

    return model


@dataclass
class Notes:
    topic: str = "kites"
    asked: list[Any] = field(default_factory=list)
    title: str = ""


def _graph(lab: Lab, name: str, runtime: str, *, ask_in: str = "", retry: Retry | None = None):
    """Outline (delegated to `runtime`; may call interrupt() in prompt() and/or route()) -> Publish."""
    g = lab.graph(name, state_type=Notes, output_type=str)

    @dataclass
    class Outline(DelegatedAgentNode[Notes]):
        def prompt(self, ctx: GraphRunContext[Notes]) -> str:
            if "prompt" in ask_in:
                ctx.state.asked.append(interrupt("which angle?"))
            return f"Outline {ctx.state.topic} from the angle {ctx.state.asked}"

        async def route(self, ctx: GraphRunContext[Notes], result: Plan) -> Publish:
            ctx.state.title = result.title
            if "route" in ask_in:
                ctx.state.asked.append(interrupt({"question": "publish under which name?", "title": result.title}))
            return Publish()

    Outline.runtime = runtime

    @dataclass
    class Publish(BaseNode[Notes, None, str]):
        async def run(self, ctx: GraphRunContext[Notes]) -> End[str]:
            return End(f"{ctx.state.title} {ctx.state.asked}")

    g.node(Outline, retry=retry)
    g.node(Publish)
    return g, Outline


def _job_statuses(lab: Lab, run: Any) -> list[str]:
    return [j.status for j in lab.agents.jobs(run_id=run.id)]


def test_interrupt_in_route_reuses_the_finished_job(lab):
    """issue 26 "Kinds do not compose": an `interrupt()` inside a delegated station submitted a new agent
    job on every answer and never got it. Now the answered station routes on the finished job's
    result (one job, one request id) and `interrupt()` returns the answer."""
    g, Outline = _graph(lab, "ask_after", "planner", ask_in="route")
    run = g.start(Outline(), state=Notes())
    run.run()
    assert run.wait.kind == "interrupt" and run.wait.details["title"] == "Durable agents"
    run.resume_with("Ada")
    run.run()
    assert run.status == "done" and run.output == "Durable agents ['Ada']"
    assert _job_statuses(lab, run) == ["SUCCEEDED"]
    assert [w.kind for w in run.waits()] == ["delegate", "interrupt"]


def test_interrupt_in_route_answered_after_a_restart(tmp_path: Path):
    """issue 26: the job's outcome is kept with the interrupt wait (its answer log), so a lab opened
    again answers it without submitting the request again."""
    from .agent_defs import planner

    path = tmp_path / "lab.duckdb"
    with Lab(path) as lab:
        lab.agents.register("planner", planner)
        g, Outline = _graph(lab, "ask_restart", "planner", ask_in="route")
        run = g.start(Outline(), state=Notes())
        run.run()
        run_id = run.id
        assert run.wait.kind == "interrupt"
    with Lab(path) as lab:
        lab.agents.register("planner", planner)
        _graph(lab, "ask_restart", "planner", ask_in="route")
        again = lab.resume(run_id)
        again.resume_with("Grace")
        again.run()
        assert again.status == "done" and again.output == "Durable agents ['Grace']"
        assert _job_statuses(lab, again) == ["SUCCEEDED"]


def test_interrupt_in_prompt_and_route(lab):
    """issue 26: an `interrupt()` in `prompt()` gets its answer before the job is submitted, keeps it
    while the job runs, and one in `route()` after it gets its own: two answers, one job."""
    g, Outline = _graph(lab, "ask_twice", "planner", ask_in="prompt route")
    run = g.start(Outline(), state=Notes())
    run.run()
    assert run.wait.kind == "interrupt" and run.wait.details == "which angle?"
    assert lab.agents.jobs(run_id=run.id) == []
    run.resume_with("history")
    run.run()
    assert run.wait.kind == "interrupt" and run.wait.details["question"] == "publish under which name?"
    job = lab.agents.jobs(run_id=run.id)[0]
    assert job.record.request["prompt"] == "Outline kites from the angle ['history']"
    run.resume_with("Ada")
    run.run()
    assert run.status == "done" and run.output == "Durable agents ['history', 'Ada']"
    assert _job_statuses(lab, run) == ["SUCCEEDED"]


def test_retry_policy_retries_a_failed_job(lab):
    """issue 26 "a `Retry` policy on a delegated station is silently ignored": a job that ended FAILED
    with an error the policy's `on` names is tried again as a new job, with a `retry` event per
    failed try, until one succeeds."""
    lab.agents.register("flaky", Agent(FunctionModel(_flaky("retried", fails=2)), output_type=Plan))
    g, Outline = _graph(lab, "flaky", "flaky", retry=Retry(max_attempts=3, on=(ConnectionError,)))
    run = g.start(Outline(), state=Notes())
    run.run()
    assert run.status == "done" and run.output == "Flaky []"
    assert _job_statuses(lab, run) == ["FAILED", "FAILED", "SUCCEEDED"]
    retries = run.events("retry")
    assert [e.payload["try"] for e in retries] == [1, 2]
    assert retries[0].payload["error"]["type"].endswith("DelegatedJobFailed")
    assert "dropped the connection" in retries[0].payload["error"]["message"]
    ids = [j.request_id for j in lab.agents.jobs(run_id=run.id)]
    assert len(set(ids)) == 3  # each try is a new request


def test_retry_policy_limits_and_matches_the_agents_error(lab):
    """issue 26: the policy's `max_attempts` bounds the jobs, and an error its `on` does not name is not
    retried (the agent's error class is what `on` is matched against, not DelegatedJobFailed)."""
    lab.agents.register("down", Agent(FunctionModel(_flaky("exhausted", fails=99)), output_type=Plan))
    g, Outline = _graph(lab, "down", "down", retry=Retry(max_attempts=2, on=(OSError,)))  # ConnectionError is one
    run = g.start(Outline(), state=Notes())
    run.run(raise_on_failure=False)
    assert run.status == "failed" and "ended FAILED" in run.error["message"]
    assert _job_statuses(lab, run) == ["FAILED", "FAILED"] and len(run.events("retry")) == 1

    lab.agents.register("other", Agent(FunctionModel(_flaky("unmatched", fails=99)), output_type=Plan))
    g2, Outline2 = _graph(lab, "other", "other", retry=Retry(max_attempts=3, on=(ValueError,)))
    run2 = g2.start(Outline2(), state=Notes())
    run2.run(raise_on_failure=False)
    assert run2.status == "failed" and _job_statuses(lab, run2) == ["FAILED"] and run2.events("retry") == []


def test_run_timeout_cancels_the_running_job(lab, tmp_path: Path):
    """issue 26 (the matrix's timeout cell): a run timeout while the delegated station's job runs stops
    the job (CANCELLED, its task gone) and fails the run with RunTimeout; driven again after, the
    station delegates afresh."""
    release = tmp_path / "released"

    async def waits(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        deadline = time.monotonic() + 120
        while not release.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"title": "Late", "points": []})])

    lab.agents.register("waits", Agent(FunctionModel(waits), output_type=Plan))
    g, Outline = _graph(lab, "timed_run", "waits")
    run = g.start(Outline(), state=Notes(), timeout=0.5)
    with pytest.raises(RunTimeout):
        run.run(raise_on_failure=True)
    assert run.status == "failed" and run.error["type"].endswith("RunTimeout")
    job = lab.agents.jobs(run_id=run.id)[0]
    assert job.status == "CANCELLED" and job.transitions()[-3:] == ["RUNNING", "CANCELLING", "CANCELLED"]
    assert job.request_id not in repr(lab.agents)  # its task is gone: "jobs in flight=[...]"
    release.touch()
    run.run(timeout=None)
    assert run.status == "done" and run.output == "Late []"
    assert _job_statuses(lab, run) == ["CANCELLED", "SUCCEEDED"]


def test_retry_policy_on_timed_out_and_cancelled_jobs(lab, release):
    """issue 26: a job that ran past the station's `timeout` (TIMED_OUT) counts as a `TimeoutError` for
    the policy and is tried again; a job a person cancelled is never retried, whatever `on` says."""
    g, Outline = _graph(lab, "timed_retry", "slow", retry=Retry(max_attempts=2, on=(TimeoutError,)))
    Outline.timeout = 0.2
    run = g.start(Outline(), state=Notes())
    run.run(raise_on_failure=False)
    assert run.status == "failed" and "ended TIMED_OUT" in run.error["message"]
    assert _job_statuses(lab, run) == ["TIMED_OUT", "TIMED_OUT"] and len(run.events("retry")) == 1

    g2, Outline2 = _graph(lab, "cancelled_retry", "slow", retry=Retry(max_attempts=3))
    run2 = g2.start(Outline2(), state=Notes())
    t = threading.Thread(target=run2.run, kwargs={"raise_on_failure": False})
    t.start()
    deadline = time.monotonic() + 60
    while not (run2.job is not None and run2.job.status == "RUNNING"):
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.02)
    run2.job.cancel()
    t.join(120)
    assert run2.status == "failed" and "ended CANCELLED" in run2.error["message"]
    assert _job_statuses(lab, run2) == ["CANCELLED"] and run2.events("retry") == []
