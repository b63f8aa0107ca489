"""`python -m lab.bench.agents`: what a delegated agent station costs, against the agent run alone.

One pydantic-ai agent on `FunctionModel` (one model round, the result through the output tool:
no network, no sleep), timed three ways, round-robin so machine noise hits them alike:

* `agent` — `await agent.run(prompt)`, the agent alone (the floor);
* `station_task` — a run of a one-station graph whose station is delegated to that agent as an
  asyncio task: park (job QUEUED, waiting checkpoint and wait), job ADMITTED → PREPARING →
  RUNNING → SUCCEEDED with its messages and usage recorded, adoption, route, End — on a DuckDB file;
* `station_subprocess` — the same with the job in a worker subprocess (a Python start, an import
  of pydantic-ai and the agent, the job folder, the watch).

It prints the median and minimum per variant, each median's ratio to the agent's, and issue 27 item
4's target (the agent's median + 10 ms in process; 1.5 s in a worker), "no" where a median misses it.
A benchmark, not a test: it exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_graph import End, GraphRunContext

__all__ = ("bench_agent", "run_agent_benchmark", "agents_markdown", "main")


def _model(messages: Any, info: Any) -> Any:
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"title": "t", "points": ["a", "b"]})])


def _make_agent() -> Any:
    from pydantic import BaseModel
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    class Plan(BaseModel):
        title: str
        points: list[str]

    return Agent(FunctionModel(_model), output_type=Plan, name="bench")


bench_agent = None
"""The agent a worker subprocess imports (`lab.bench.agents:bench_agent`), made on first import of pydantic-ai."""
try:  # pragma: no cover - only without the agents extra
    bench_agent = _make_agent()
except ImportError:
    pass


@dataclass
class AgentBenchReport:
    times: dict[str, list[float]]
    """Seconds per variant, one entry per repetition."""

    def median(self, name: str) -> float:
        return statistics.median(self.times[name])

    def ratio(self, name: str) -> float:
        return self.median(name) / self.median("agent")


def _graph(lab: Any, runtime: str) -> Any:
    from dataclasses import dataclass as dc

    from ..agents import DelegatedAgentNode

    g = lab.graph(f"bench-{runtime}", output_type=str)

    @g.node
    @dc
    class Plan(DelegatedAgentNode[None]):
        def prompt(self, ctx: GraphRunContext[None]) -> str:
            return "Plan the benchmark"

        async def route(self, ctx: GraphRunContext[None], result: Any) -> End[str]:
            return End(result["title"])

    Plan.runtime = runtime
    return g


def run_agent_benchmark(repeat: int = 20, warmup: int = 2, *, subprocess_repeat: int | None = None) -> AgentBenchReport:
    """Time the three variants `repeat` times each (the worker variant `subprocess_repeat` times)."""
    from .. import Lab

    agent = bench_agent or _make_agent()
    sub_repeat = max(1, repeat // 4) if subprocess_repeat is None else subprocess_repeat
    times: dict[str, list[float]] = {"agent": [], "station_task": [], "station_subprocess": []}
    with tempfile.TemporaryDirectory(prefix="graphlab-bench-agents-") as tmp, Lab(os.path.join(tmp, "lab.duckdb")) as lab:
        lab.agents.register("task", agent)
        lab.agents.register("worker", target="lab.bench.agents:bench_agent", runner="subprocess")
        task_graph, worker_graph = _graph(lab, "task"), _graph(lab, "worker")

        def once(name: str) -> None:
            t0 = time.perf_counter()
            if name == "agent":
                asyncio.run(agent.run("Plan the benchmark"))
            else:
                g = task_graph if name == "station_task" else worker_graph
                run = g.start(g.nodes["Plan"]())
                run.run()
                assert run.status == "done", run.error
            times[name].append(time.perf_counter() - t0)

        for _ in range(warmup):
            once("agent")
            once("station_task")
        times = {k: [] for k in times}
        for i in range(repeat):
            once("agent")
            once("station_task")
            if i < sub_repeat:
                once("station_subprocess")
    return AgentBenchReport(times)


TARGET_OVER_AGENT = 0.010
"""Issue 27 item 4: a delegated station in the lab's process costs the agent's own time + at most this (s)."""
TARGET_SUBPROCESS = 1.5
"""Issue 27 item 4: a worker subprocess station costs at most this (s)."""


def _target(report: AgentBenchReport, name: str) -> tuple[str, str]:
    """The variant's target (ms) and whether its median meets it ("yes"/"no"; "" for the agent itself)."""
    if name == "station_task":
        limit = report.median("agent") + TARGET_OVER_AGENT
        return f"agent + {TARGET_OVER_AGENT * 1000:.0f} = {limit * 1000:.1f}", "yes" if report.median(name) <= limit else "no"
    if name == "station_subprocess":
        return f"{TARGET_SUBPROCESS * 1000:.0f}", "yes" if report.median(name) <= TARGET_SUBPROCESS else "no"
    return "", ""


def agents_markdown(report: AgentBenchReport) -> str:
    lines = [
        "| variant | runs | median ms | min ms | median / agent | target ms | met |",
        "| --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for name, values in report.times.items():
        if not values:
            continue
        target, met = _target(report, name)
        lines.append(
            f"| {name} | {len(values)} | {report.median(name) * 1000:.1f} | {min(values) * 1000:.1f} | "
            f"{report.ratio(name):.1f}x | {target} | {met} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.bench.agents", description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=20, help="timed runs per in-process variant (default 20)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    p.add_argument("--subprocess-repeat", type=int, default=None, help="timed worker runs (default repeat / 4)")
    args = p.parse_args(argv)
    report = run_agent_benchmark(args.repeat, args.warmup, subprocess_repeat=args.subprocess_repeat)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    print(agents_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
