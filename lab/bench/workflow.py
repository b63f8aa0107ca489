"""`python -m lab.bench.workflow`: what one workflow activity costs as its loop grows (issue 27 item 5).

A declarative workflow (seed 004) whose one activity loops on itself until its bag says stop:
`tick` adds one to `n` and takes `again` while `n < limit`. Each loop length N is run `--runs`
times on a DuckDB file (`durability="step"`), round-robin with a 1-activity loop; an activity's
cost in a loop of N is `(T(N) - T(1)) / (N - 1)` with T the median time of `run.run()`, so what
every run pays once (the call, the End, the session's closing files) is not spread over the loop
and a short loop is not judged by its fixed costs. The target: an activity in the longest loop
costs what it costs in the shortest, within 20% (the trail of exits once lived in the state, so
every checkpoint re-encoded the whole trail: a 1,000-activity loop cost 11x a 10-activity one per
activity).

Prints a Markdown table; always exits 0. Timing is never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

from .. import Lab

__all__ = ("LOOP", "TARGET", "main", "measure", "per_activity", "to_markdown")

LOOP: dict[str, Any] = {
    "name": "bench-loop",
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
"""One activity that loops on itself `limit` times."""

TARGET = 0.20
"""The longest loop's cost per activity may differ from the shortest's by this fraction at most."""


SHORT_REPEAT = 10
"""A loop shorter than 100 activities is run this many times more often than a long one (its
difference to the 1-activity run is small, so it needs more samples against the machine's noise)."""


def _tick(ctx: Any) -> dict[str, Any]:
    return {"variables": {"n": ctx.variables["n"] + 1}}


def measure(loops: list[int], runs: int) -> dict[int, list[float]]:
    """Seconds of `run.run()` for each loop length, a 1-activity loop among them (round-robin)."""
    loops = sorted({1, *loops})
    samples: dict[int, list[float]] = {n: [] for n in loops}
    with tempfile.TemporaryDirectory(prefix="graphlab-bench-wf-") as tmp:
        lab = Lab(os.path.join(tmp, "lab.duckdb"))
        try:
            wf = lab.workflow(LOOP, workers={"tick": _tick})
            for i in range(runs * SHORT_REPEAT):
                for n in loops:
                    if n >= 100 and i % SHORT_REPEAT:  # a long loop every SHORT_REPEAT rounds, interleaved
                        continue
                    run = wf.start(variables={"limit": n}, step_limit=n + 10)
                    t = time.perf_counter()
                    run.run()
                    took = time.perf_counter() - t
                    if run.status != "done" or run.output["n"] != n:
                        raise RuntimeError(f"the {n}-activity loop ended {run.status}: {run.error}")
                    samples[n].append(took)
        finally:
            lab.close()
    return samples


def per_activity(samples: dict[int, list[float]]) -> dict[int, float]:
    """Median µs one activity adds in a loop of each length N > 1: (T(N) - T(1)) / (N - 1)."""
    fixed = statistics.median(samples[1])
    return {n: (statistics.median(s) - fixed) / (n - 1) * 1e6 for n, s in samples.items() if n > 1}


def to_markdown(samples: dict[int, list[float]]) -> str:
    """A row per loop length: the median run, µs per activity, the ratio to the shortest loop."""
    cost = per_activity(samples)
    loops = sorted(cost)
    base = cost[loops[0]]
    lines = [
        f"A 1-activity run (what every run pays once): {statistics.median(samples[1]) * 1e3:.2f} ms median.",
        "",
        "| activities in the loop | median run ms | µs per activity | × shortest loop | target | met |",
        "|---:|---:|---:|---:|---:|:---:|",
    ]
    for n in loops:
        ratio = cost[n] / base
        judged = n != loops[0]
        met = ("yes" if abs(ratio - 1.0) <= TARGET else "**no**") if judged else ""
        target = f"1.00x ± {TARGET:.0%}" if judged else "—"
        run_ms = statistics.median(samples[n]) * 1e3
        lines.append(f"| {n:,} | {run_ms:.1f} | {cost[n]:.1f} | {ratio:.2f}x | {target} | {met} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.workflow", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--loops", type=int, nargs="+", default=[10, 100, 1000], help="loop lengths (default %(default)s)"
    )
    parser.add_argument(
        "--runs", type=int, default=5,
        help="runs of each loop of 100 activities or more (median; default %(default)s); shorter loops run 10x as often",
    )
    args = parser.parse_args(argv)
    if any(n < 2 for n in args.loops):
        parser.error("--loops: every length must be at least 2 (a 1-activity loop is always run, for the fixed cost)")
    samples = measure(sorted(set(args.loops)), args.runs)
    print(f"{args.runs} runs per length, DuckDB file, durability='step'; Python {platform.python_version()} on {sys.platform}")
    print()
    print(to_markdown(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
