"""`python -m lab.bench.replay` (and `python -m lab.bench --replay`): what recording a station's model
calls costs (docs/replay.md), against raw pydantic-graph running the same stations.

Each station asks a pydantic-ai agent on `TestModel` once (no network, no sleep): the cheapest model
call there is, so the recorder's own work shows as much as it ever can. Four variants:

* `raw` — pydantic-graph's own `GraphBuilder` graph of the same station, `await graph.run()`;
* `lab` — a lab run on a DuckDB file, the agent's model not recorded;
* `lab_recorded` — the same with `lab.recorded(agent)`: every model request written to `calls`
  (and a `recorded` event) as it happens;
* `lab_replayed` — a fork of a recorded run from its first checkpoint: every request answered
  from the recordings (the fork itself, a read of the checkpoint, is timed with it).

Each timed run is `visits` stations with the run's start and end; before each, the store's journal is
folded, untimed, so no variant pays for another's rows.

The verdict, recording's cost on wall clock against its target (≤ 5%), is taken station by station:
a fifth timed run each round, `mixed`, is a lab run whose stations alternate between the plain and the
recorded agent (which one starts alternates round by round), and each station's wall time, from its
start to the next one's (its settlement and the lab's step between them included), is paired with its
neighbour's: recording's cost is the median of `recorded / plain - 1` over those adjacent pairs. On a
shared machine the time a run gets drifts by ±30% from one run to the next (docs/benchmarks.md, rec28d:
the same pure Python loop's CPU time does so too), so whole runs compared a run apart cannot resolve a
few percent; two stations a few milliseconds apart share the machine's state. The rounds run in
`processes` fresh processes one after another (each its own interpreter, heap and hash seed), and the
verdict is the median of the processes' medians, printed with their spread. The whole-run pairs are
printed beside it: `lab` and `lab_recorded` back to back in every round (which first alternates), the
ratio of each pair. A benchmark, not a test: it exits 0 whatever the numbers, and a missed target
prints "no".
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext

__all__ = ("ReplayBenchReport", "run_replay_benchmark", "replay_markdown", "main", "TARGET")

TARGET = 0.05
"""Recording may add at most this share to a lab station whose model call is the test model's."""
VARIANTS = ("raw", "lab", "lab_recorded", "lab_replayed")
AGENT: dict[str, Any] = {"mixed": None, "stamps": []}
"""The agent the stations ask (`AGENT["now"]`): swapped per variant, so one node class serves all; in a
`mixed` run, `AGENT["mixed"]` holds the two agents, station `count` asking `mixed[count % 2]`. Each station
appends its start (`perf_counter`) to `AGENT["stamps"]`."""


@dataclass
class AskState:
    count: int = 0
    limit: int = 50


@dataclass
class Ask(BaseNode[AskState, None, int]):
    """One station: ask the agent once; end after `limit` visits."""

    async def run(self, ctx: GraphRunContext[AskState, None]) -> Ask | End[int]:
        AGENT["stamps"].append(time.perf_counter())
        mixed = AGENT["mixed"]
        await (AGENT["now"] if mixed is None else mixed[ctx.state.count % 2]).run(f"visit {ctx.state.count}")
        ctx.state.count += 1
        if ctx.state.count >= ctx.state.limit:
            return End(ctx.state.count)
        return Ask()


@dataclass
class ProcessTimes:
    """One process's timed runs: seconds per run of `visits` stations, per variant, in the order run."""

    times: dict[str, list[float]]
    """Wall clock."""
    cpu: dict[str, list[float]]
    """CPU seconds of the process (all threads)."""
    pairs: list[float]
    """`lab_recorded / lab - 1` of each back-to-back pair, on wall clock."""
    cpu_pairs: list[float]
    """The same pairs on CPU time."""
    stations: list[float] = field(default_factory=list)
    """`recorded / plain - 1` of each two adjacent stations of the `mixed` runs, on wall clock."""

    @property
    def cost(self) -> float:
        """Recording's cost in this process: the median of its adjacent stations' ratios."""
        return statistics.median(self.stations)

    @property
    def run_cost(self) -> float:
        """The median of its whole-run pairs."""
        return statistics.median(self.pairs)

    @property
    def cpu_cost(self) -> float:
        return statistics.median(self.cpu_pairs)


@dataclass
class ReplayBenchReport:
    visits: int
    processes: list[ProcessTimes] = field(default_factory=list)

    def _all(self, what: str, name: str) -> list[float]:
        return [t for p in self.processes for t in getattr(p, what)[name]]

    @property
    def times(self) -> dict[str, list[float]]:
        """Seconds per run of `visits` stations, per variant, all processes (wall clock)."""
        return {name: self._all("times", name) for name in VARIANTS}

    @property
    def cpu(self) -> dict[str, list[float]]:
        return {name: self._all("cpu", name) for name in VARIANTS}

    def per_station_ms(self, name: str) -> float:
        return statistics.median(self._all("times", name)) / self.visits * 1000

    def ratio(self, name: str) -> float:
        return statistics.median(self._all("times", name)) / statistics.median(self._all("times", "raw"))

    def cpu_ms(self, name: str) -> float:
        return statistics.median(self._all("cpu", name)) / self.visits * 1000

    @property
    def recording_cost(self) -> float:
        """Recording's share of a lab station on wall clock, the verdict: the median of the processes' medians
        of adjacent stations' ratios in `mixed` runs."""
        return statistics.median(p.cost for p in self.processes)

    @property
    def run_pairs_cost(self) -> float:
        """The same from whole runs: the median of the processes' median `lab_recorded / lab - 1` of back-to-back runs."""
        return statistics.median(p.run_cost for p in self.processes)

    @property
    def recording_cpu_cost(self) -> float:
        """The same on CPU time (not the verdict: what the machine's load inflates less)."""
        return statistics.median(p.cpu_cost for p in self.processes)

    @property
    def pooled_cost(self) -> float:
        """The median of every adjacent stations' ratio, all processes pooled."""
        return statistics.median(r for p in self.processes for r in p.stations)


def _agents() -> tuple[Any, Any]:
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from ..replay import recorded

    return Agent(TestModel()), recorded(Agent(TestModel()))


def _round(order: random.Random, lead: str) -> list[str]:
    """One round's order: `raw`, the pair (`lead` first), `lab_replayed` and `mixed` as four units, shuffled."""
    pair = [lead, "lab_recorded" if lead == "lab" else "lab"]
    units: list[list[str]] = [["raw"], pair, ["lab_replayed"], ["mixed"]]
    order.shuffle(units)
    return [name for unit in units for name in unit]


def adjacent_ratios(stamps: list[float], recorded_first: bool) -> list[float]:
    """`recorded / plain - 1` of stations (0, 1), (2, 3), ... of a `mixed` run, from their starts (`stamps`):
    a station's time runs to the next one's start, so the last station, which has none, is left out."""
    took = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    out = []
    for k in range(0, len(took) - 1, 2):
        first, second = took[k], took[k + 1]
        out.append((first / second if recorded_first else second / first) - 1)
    return out


class _Runs:
    """The variants' runs on one DuckDB lab, each timed on its own (`once`)."""

    def __init__(self, lab: Any, visits: int):
        self.visits = visits
        self.plain, self.recorded = _agents()
        builder: GraphBuilder[AskState, None, Ask, int] = GraphBuilder(
            name="bench_replay_raw", state_type=AskState, input_type=Ask, output_type=int
        )
        builder.add(builder.node(Ask), builder.edge_from(builder.start_node).to(Ask))
        self.raw = builder.build()
        self.lab = lab
        self.graph = lab.graph("bench_replay", state_type=AskState, output_type=int)
        self.graph.node(Ask)
        self.source: Any = None
        """The last `lab_recorded` run: what `lab_replayed` forks."""

    def once(self, name: str, recorded_first: bool = False) -> tuple[float, float]:
        """Run variant `name` once: (wall, CPU) seconds; a `mixed` run starts with the recorded agent when
        `recorded_first`, and leaves its stations' starts in `AGENT["stamps"]`."""
        AGENT["now"] = self.recorded if name in ("lab_recorded", "lab_replayed") else self.plain
        pair = (self.recorded, self.plain) if recorded_first else (self.plain, self.recorded)
        AGENT["mixed"] = pair if name == "mixed" else None
        AGENT["stamps"] = []
        self.lab.store.fold()  # untimed: each variant starts on a folded store, none pays for another's rows
        c0, t0 = time.process_time(), time.perf_counter()
        if name == "raw":
            asyncio.run(self.raw.run(state=AskState(limit=self.visits), inputs=Ask()))
            return time.perf_counter() - t0, time.process_time() - c0
        run = (
            self.source.fork(0)
            if name == "lab_replayed"
            else self.graph.start(Ask(), state=AskState(limit=self.visits))
        )
        run.run()
        elapsed = time.perf_counter() - t0, time.process_time() - c0
        self._check(name, run, recorded_first)
        return elapsed

    def _check(self, name: str, run: Any, recorded_first: bool) -> None:
        """Untimed: the run did what its variant says."""
        if run.status != "done":
            raise RuntimeError(f"run {run.id} ended {run.status}: {run.error}")
        if name == "lab_recorded":
            self.source = run
        if name == "mixed" and len(run.calls()) != (
            (self.visits + 1) // 2 if recorded_first else self.visits // 2
        ):
            raise RuntimeError(
                f"the mixed run {run.id} recorded {len(run.calls())} calls: every other station should"
            )
        if name == "lab_replayed" and any(c.mode != "replayed" for c in run.calls()):
            raise RuntimeError(f"the fork {run.id} called the model: it should have replayed every call")


def time_process(visits: int = 50, repeat: int = 9, warmup: int = 1, seed: int = 0) -> ProcessTimes:
    """Time `repeat` rounds in this process after `warmup` untimed ones (`_round`'s order; the pair's
    lead and the `mixed` run's first agent alternate, starting from `lab` / plain on an even `seed`)."""
    from .. import Lab

    out = ProcessTimes({k: [] for k in VARIANTS}, {k: [] for k in VARIANTS}, [], [], [])
    times, cpu = out.times, out.cpu
    with (
        tempfile.TemporaryDirectory(prefix="graphlab-bench-replay-") as tmp,
        Lab(os.path.join(tmp, "lab.duckdb")) as lab,
    ):
        runs = _Runs(lab, visits)
        for _ in range(warmup):
            for name in (*VARIANTS, "mixed"):
                runs.once(name)
        order = random.Random(seed)
        for i in range(repeat):
            names = _round(order, "lab" if (i + seed) % 2 == 0 else "lab_recorded")
            if runs.source is None and names.index("lab_replayed") < names.index("lab_recorded"):
                names.remove("lab_replayed")  # no warm-up: no recorded run to fork yet
                names.append("lab_replayed")
            recorded_first = (i + seed) % 2 == 1
            for name in names:
                wall, used = runs.once(name, recorded_first)
                if name == "mixed":
                    out.stations.extend(adjacent_ratios(AGENT["stamps"], recorded_first))
                else:
                    times[name].append(wall)
                    cpu[name].append(used)
            out.pairs.append(times["lab_recorded"][-1] / times["lab"][-1] - 1)
            out.cpu_pairs.append(cpu["lab_recorded"][-1] / cpu["lab"][-1] - 1)
    AGENT["mixed"] = None
    return out


def _in_fresh_process(visits: int, repeat: int, warmup: int, seed: int) -> ProcessTimes:
    """`time_process` in a new interpreter (`--worker`), its result read back as JSON from its stdout."""
    args = [
        "--worker",
        "--visits",
        str(visits),
        "--repeat",
        str(repeat),
        "--warmup",
        str(warmup),
        "--seed",
        str(seed),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "lab.bench.replay", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"the bench's worker process failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
        )
    return ProcessTimes(**json.loads(done.stdout.strip().splitlines()[-1]))


def run_replay_benchmark(
    visits: int = 50, repeat: int = 9, warmup: int = 1, seed: int = 0, processes: int = 3
) -> ReplayBenchReport:
    """`repeat` rounds (`time_process`) in each of `processes` fresh processes, one after another (process
    k's seed is `seed + k`, so the pair's lead alternates across processes too); `processes=0` runs the
    rounds in this process instead."""
    if processes <= 0:
        return ReplayBenchReport(visits, [time_process(visits, repeat, warmup, seed)])
    return ReplayBenchReport(
        visits, [_in_fresh_process(visits, repeat, warmup, seed + k) for k in range(processes)]
    )


def _pct(values: Sequence[float]) -> str:
    return ", ".join(f"{v * 100:+.1f}" for v in values)


def replay_markdown(report: ReplayBenchReport) -> str:
    n = len(report.processes)
    rounds = len(report.processes[0].pairs)
    lines = [
        f"Recorded calls: {report.visits} stations per run, each one TestModel agent call; {rounds} rounds in each of "
        f"{n} process{'es' if n != 1 else ''}; medians of all runs",
        "",
        "| variant | ms / station | × raw pydantic-graph | CPU ms / station |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in VARIANTS:
        lines.append(
            f"| {name} | {report.per_station_ms(name):.3f} | {report.ratio(name):.2f}x | {report.cpu_ms(name):.3f} |"
        )
    lines.append("")
    procs = report.processes
    lines.append(
        f"whole runs, back to back (lab_recorded / lab - 1), median per process: wall {_pct([p.run_cost for p in procs])}%; "
        f"CPU {_pct([p.cpu_cost for p in procs])}%; median of the processes: wall {report.run_pairs_cost * 100:+.1f}%, "
        f"CPU {report.recording_cpu_cost * 100:+.1f}%"
    )
    lines.append(
        f"adjacent stations of the mixed runs (recorded / plain - 1), median per process: {_pct([p.cost for p in procs])}%; "
        f"all {sum(len(p.stations) for p in procs)} pairs pooled {report.pooled_cost * 100:+.1f}%"
    )
    cost = report.recording_cost
    verdict = "yes" if cost <= TARGET else "no"
    lines.append(
        f"recording's cost on wall clock, a station (median of the processes' medians): {cost * 100:+.1f}% "
        f"(processes {min(p.cost for p in procs) * 100:+.1f}..{max(p.cost for p in procs) * 100:+.1f}%; "
        f"target ≤ {TARGET * 100:.0f}%: {verdict})"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.bench.replay", description=__doc__.splitlines()[0])
    p.add_argument("--visits", type=int, default=50, help="stations per run (default 50)")
    p.add_argument("--repeat", type=int, default=9, help="timed rounds per process (default 9)")
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first, in each process (default 1)")
    p.add_argument("--seed", type=int, default=0, help="of the shuffled order of each round (default 0)")
    p.add_argument(
        "--processes",
        type=int,
        default=3,
        help="fresh processes, one after another (default 3; 0: this process)",
    )
    p.add_argument("--save", metavar="PATH", help="also write every timed run and pair as JSON to PATH")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(dataclasses.asdict(time_process(args.visits, args.repeat, args.warmup, args.seed))))
        return 0
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}")
    report = run_replay_benchmark(args.visits, args.repeat, args.warmup, args.seed, args.processes)
    print(replay_markdown(report))
    print(f"load {os.getloadavg()[0]:.2f}")
    if args.save:
        with open(args.save, "w") as f:
            json.dump(
                {"visits": report.visits, "processes": [dataclasses.asdict(t) for t in report.processes]}, f
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
