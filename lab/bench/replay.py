"""`python -m lab.bench.replay` (and `python -m lab.bench --replay`): what recording a station's model
calls costs (docs/replay.md), against raw pydantic-graph running the same stations.

Each station asks a pydantic-ai agent on `TestModel` once (no network, no sleep): the cheapest model
call there is, so the recorder's own work shows as much as it ever can. Timed round-robin, each round
in a shuffled order (so no variant always runs after the same one):

* `raw` — pydantic-graph's own `GraphBuilder` graph of the same station, `await graph.run()`;
* `lab` — a lab run on a DuckDB file, the agent's model not recorded;
* `lab_recorded` — the same with `lab.recorded(agent)`: every model request written to `calls`
  (and a `recorded` event) as it happens;
* `lab_replayed` — a fork of a recorded run from its first checkpoint: every request answered
  from the recordings (the fork itself, a read of the checkpoint, is timed with it).

Before each run the store's journal is folded, untimed, so no variant pays for another's rows.

The row that matters is recording's cost, `lab_recorded / lab - 1`, against its target (≤ 5%).
A benchmark, not a test: it exits 0 whatever the numbers, and a missed target prints "no".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext

__all__ = ("ReplayBenchReport", "run_replay_benchmark", "replay_markdown", "main", "TARGET")

TARGET = 0.05
"""Recording may add at most this share to a lab station whose model call is the test model's."""
VARIANTS = ("raw", "lab", "lab_recorded", "lab_replayed")
AGENT: dict[str, Any] = {}
"""The agent the stations ask (`AGENT["now"]`): swapped per variant, so one node class serves all."""


@dataclass
class AskState:
    count: int = 0
    limit: int = 50


@dataclass
class Ask(BaseNode[AskState, None, int]):
    """One station: ask the agent once; end after `limit` visits."""

    async def run(self, ctx: GraphRunContext[AskState, None]) -> Ask | End[int]:
        await AGENT["now"].run(f"visit {ctx.state.count}")
        ctx.state.count += 1
        if ctx.state.count >= ctx.state.limit:
            return End(ctx.state.count)
        return Ask()


@dataclass
class ReplayBenchReport:
    visits: int
    times: dict[str, list[float]]
    """Seconds per run of `visits` stations, per variant (wall clock)."""
    cpu: dict[str, list[float]]
    """CPU seconds of this process per run, per variant: what the machine's load does not inflate."""

    def per_station_ms(self, name: str) -> float:
        return statistics.median(self.times[name]) / self.visits * 1000

    def ratio(self, name: str) -> float:
        return statistics.median(self.times[name]) / statistics.median(self.times["raw"])

    def cpu_ms(self, name: str) -> float:
        return statistics.median(self.cpu[name]) / self.visits * 1000

    @property
    def recording_cost(self) -> float:
        """Recording's share of a lab station, on wall clock."""
        return statistics.median(self.times["lab_recorded"]) / statistics.median(self.times["lab"]) - 1

    @property
    def recording_cpu_cost(self) -> float:
        """Recording's share of a lab station, on CPU time."""
        return statistics.median(self.cpu["lab_recorded"]) / statistics.median(self.cpu["lab"]) - 1

    @property
    def recording_cpu_cost_fastest(self) -> float:
        """Recording's share on the fastest run of each (a shared machine's load only ever adds time)."""
        return min(self.cpu["lab_recorded"]) / min(self.cpu["lab"]) - 1


def _agents() -> tuple[Any, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from ..replay import recorded

    return Agent(TestModel()), recorded(Agent(TestModel()))


def run_replay_benchmark(visits: int = 50, repeat: int = 9, warmup: int = 1, seed: int = 0) -> ReplayBenchReport:
    """Time the four variants `repeat` times each, round-robin in an order shuffled each round (`seed`), after
    `warmup` untimed rounds."""
    from .. import Lab

    plain, recorded_agent = _agents()
    builder: GraphBuilder[AskState, None, Ask, int] = GraphBuilder(
        name="bench_replay_raw", state_type=AskState, input_type=Ask, output_type=int
    )
    builder.add(builder.node(Ask), builder.edge_from(builder.start_node).to(Ask))
    raw = builder.build()
    times: dict[str, list[float]] = {k: [] for k in VARIANTS}
    cpu: dict[str, list[float]] = {k: [] for k in VARIANTS}
    with (
        tempfile.TemporaryDirectory(prefix="graphlab-bench-replay-") as tmp,
        Lab(os.path.join(tmp, "lab.duckdb")) as lab,
    ):
        g = lab.graph("bench_replay", state_type=AskState, output_type=int)
        g.node(Ask)
        source: list[Any] = []

        def once(name: str) -> tuple[float, float]:
            AGENT["now"] = recorded_agent if name in ("lab_recorded", "lab_replayed") else plain
            lab.store.fold()  # untimed: each variant starts on a folded store, none pays for another's rows
            c0, t0 = time.process_time(), time.perf_counter()
            if name == "raw":
                asyncio.run(raw.run(state=AskState(limit=visits), inputs=Ask()))
                return time.perf_counter() - t0, time.process_time() - c0
            if name == "lab_replayed":
                run = source[-1].fork(0)
                run.run()
            else:
                run = g.start(Ask(), state=AskState(limit=visits))
                run.run()
            elapsed = time.perf_counter() - t0, time.process_time() - c0
            if run.status != "done":
                raise RuntimeError(f"run {run.id} ended {run.status}: {run.error}")
            if name == "lab_recorded":
                source.append(run)
            if name == "lab_replayed" and any(c.mode != "replayed" for c in run.calls()):
                raise RuntimeError(f"the fork {run.id} called the model: it should have replayed every call")
            return elapsed

        for _ in range(warmup):
            for name in VARIANTS:
                once(name)
        order = random.Random(seed)
        for _ in range(repeat):
            names = list(VARIANTS)
            # no variant always runs after the same one (`lab` after `raw`, `lab_recorded` after `lab`)
            order.shuffle(names)
            if not source and names.index("lab_replayed") < names.index("lab_recorded"):
                names.remove("lab_replayed")  # no warm-up: no recorded run to fork yet
                names.append("lab_replayed")
            for name in names:
                wall, used = once(name)
                times[name].append(wall)
                cpu[name].append(used)
    return ReplayBenchReport(visits, times, cpu)


def replay_markdown(report: ReplayBenchReport) -> str:
    lines = [
        f"Recorded calls: {report.visits} stations per run, each one TestModel agent call; median of {len(report.times['raw'])} runs",
        "",
        "| variant | ms / station | × raw pydantic-graph | CPU ms / station |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in VARIANTS:
        lines.append(
            f"| {name} | {report.per_station_ms(name):.3f} | {report.ratio(name):.2f}x | {report.cpu_ms(name):.3f} |"
        )
    lines.append("")
    for what, cost in (
        ("wall clock", report.recording_cost),
        ("CPU time", report.recording_cpu_cost),
        ("CPU time, fastest run of each", report.recording_cpu_cost_fastest),
    ):
        verdict = "yes" if cost <= TARGET else "no"
        lines.append(
            f"recording's cost on {what} (lab_recorded / lab - 1): {cost * 100:+.1f}% (target ≤ {TARGET * 100:.0f}%: {verdict})"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.bench.replay", description=__doc__.splitlines()[0])
    p.add_argument("--visits", type=int, default=50, help="stations per run (default 50)")
    p.add_argument("--repeat", type=int, default=9, help="timed runs per variant (default 9)")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    p.add_argument("--seed", type=int, default=0, help="of the shuffled order of each round (default 0)")
    args = p.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    print(replay_markdown(run_replay_benchmark(args.visits, args.repeat, args.warmup, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
