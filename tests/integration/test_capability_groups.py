"""Seed 001 "Capability handshake": capability signals raised inside a task group."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Budgets, CapabilityRequired, Lab, granted


@dataclass
class Rig:
    log: list[str] = field(default_factory=list)


async def _needs(name: str) -> str:
    await asyncio.sleep(0)
    value = granted(name)
    if value is None:
        raise CapabilityRequired(name, {"need": name})
    return value


async def _fine() -> str:
    await asyncio.sleep(0)
    return "fine"


async def _broken() -> str:
    await asyncio.sleep(0)
    raise ValueError("the sensor is unplugged")


@dataclass
class OneInGroup(BaseNode[Rig, None, str]):
    async def run(self, ctx: GraphRunContext[Rig, None]) -> End[str]:
        async with asyncio.TaskGroup() as tg:
            gpu = tg.create_task(_needs("gpu"))
            tg.create_task(_fine())
        return End(f"ran on {gpu.result()}")


@dataclass
class Mixed(BaseNode[Rig, None, str]):
    async def run(self, ctx: GraphRunContext[Rig, None]) -> End[str]:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(_needs("gpu"))
            tg.create_task(_broken())
        return End("unreachable")


@dataclass
class Two(BaseNode[Rig, None, str]):
    async def run(self, ctx: GraphRunContext[Rig, None]) -> End[str]:
        async with asyncio.TaskGroup() as tg:
            gpu = tg.create_task(_needs("gpu"))
            tpu = tg.create_task(_needs("tpu"))
        return End(f"{gpu.result()}+{tpu.result()}")


def _graph(lab: Lab, node: type, **kw):
    g = lab.graph(node.__name__.lower(), state_type=Rig, output_type=str, **kw)
    g.node(node)
    return g


def test_a_capability_signal_is_found_through_a_task_group(tmp_path) -> None:
    """Seed 001: "On HardwareTransitionRequired GraphRunner finds the signal even through a task group,
    snapshots state only when the exception tree resolves unambiguously to that signal". The group's
    only failure is the capability signal: the run parks for it, and goes on once granted."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        run = _graph(lab, OneInGroup).start(OneInGroup(), state=Rig()).run()
        assert run.status == "waiting" and run.wait.kind == "capability"
        assert run.wait.details["capability"] == "gpu" and "also" not in run.wait.details
        run.grant("gpu", "gpu-0")
        run.run()
        assert run.status == "done" and run.output == "ran on gpu-0"


def test_a_group_mixing_a_signal_and_a_failure_fails_closed(tmp_path) -> None:
    """Seed 001: "mixed signal/failure groups fail closed rather than swallowing a sibling". The run fails
    with the whole group (the sibling's ValueError is in it), and no wait is recorded."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        run = _graph(lab, Mixed).start(Mixed(), state=Rig()).run(raise_on_failure=False)
        assert run.status == "failed" and run.waits() == []
        assert "ExceptionGroup" in run.error["type"] and "the sensor is unplugged" in run.error["traceback"]


def test_two_capabilities_asked_by_one_group_are_both_counted(tmp_path) -> None:
    """Seed 001: "three consecutive requests for one capability; exceeding either fails. The counters live
    in checkpointed Run state". A task group that asks for gpu and tpu at once parks once (one resume)
    and counts a request for each; with a budget of one consecutive request, the station asking for tpu
    again after gpu was granted exceeds it."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        g = _graph(lab, Two, budgets=Budgets(consecutive=1))
        run = g.start(Two(), state=Rig()).run()
        asked = run.wait.details["capability"]
        other = {"gpu": "tpu", "tpu": "gpu"}[asked]
        assert run.status == "waiting" and run.wait.details["also"] == [other]
        counters = run.history()[-1].counters
        assert counters["capability_resumes"] == 1 and counters["consecutive"] == {"gpu": 1, "tpu": 1}
        run.grant(asked, f"{asked}-0")
        run.run(raise_on_failure=False)
        assert run.status == "failed" and "CapabilityBudgetError" in run.error["type"]
        assert f"{other!r} 2 times in a row" in run.error["message"]


def test_a_grant_event_carries_the_attempt_it_admits(tmp_path) -> None:
    """Seed 001: "Each node attempt gets a process-local station-attempt correlation and an entered, settled,
    waiting (hardware/consent/delegate), or failed event ... Dispatch adds its grant event only after lease
    admission; Orchestrator events retain the station-attempt correlation." The grant's `verdict` event
    carries the attempt of the try that parked (its `entered` and `waiting` events' attempt)."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        run = _graph(lab, OneInGroup).start(OneInGroup(), state=Rig()).run()
        run.grant("gpu", "gpu-0")
        (waiting,) = run.events("waiting")
        (verdict,) = run.events("verdict")
        assert verdict.attempt is not None and verdict.attempt == waiting.attempt
        assert waiting.attempt in {e.attempt for e in run.events("entered")}
        run.run()
        assert run.status == "done"


def test_a_grant_given_after_a_reopen_carries_the_attempt_read_back(tmp_path) -> None:
    """The handle that parked knows its wait's attempt without reading events back (issue 27); a handle
    reopened in a new lab reads it from the stored `waiting` event, so its verdict carries it too."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        run_id = _graph(lab, OneInGroup).start(OneInGroup(), state=Rig()).run().id
    with Lab(tmp_path / "lab.duckdb") as lab:
        _graph(lab, OneInGroup)
        run = lab.resume(run_id)
        run.grant("gpu", "gpu-0")
        (waiting,) = run.events("waiting")
        (verdict,) = run.events("verdict")
        assert verdict.attempt is not None and verdict.attempt == waiting.attempt
