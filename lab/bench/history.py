"""`python -m lab.bench.history`: time travel on a long run, on a DuckDB file.

Builds one run of `--checkpoints` boundaries (default 100,000) with `durability="batch"`, then
measures loading the state at random checkpoints, listing the current branch's history, and
diffing two checkpoints. Targets: state_at median < 5 ms, history < 100 ms, diff < 10 ms.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from pydantic_graph import BaseNode, End, GraphRunContext

from .. import Lab

__all__ = ("main", "measure")


@dataclass
class Ledger:
    n: int = 0
    limit: int = 100_000
    notes: list[str] = field(default_factory=list)


@dataclass
class Tick(BaseNode[Ledger, None, int]):
    async def run(self, ctx: GraphRunContext[Ledger, None]) -> Tick | End[int]:
        ctx.state.n += 1
        if ctx.state.n % 1000 == 0:
            ctx.state.notes = ctx.state.notes[-4:] + [f"at {ctx.state.n}"]
        return End(ctx.state.n) if ctx.state.n >= ctx.state.limit else Tick()


def measure(checkpoints: int = 100_000, samples: int = 200, seed: int = 7) -> dict[str, float]:
    """Build the run, then time the three reads; returns milliseconds per measure."""
    rng = random.Random(seed)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lab = Lab(f"{tmp}/lab.duckdb", durability="batch", batch_size=1000)
        try:
            g = lab.graph("ledger", state_type=Ledger, output_type=int)
            g.node(Tick)
            t = time.perf_counter()
            run = g.start(Tick(), state=Ledger(limit=checkpoints - 1), step_limit=None).run()
            lab.store.fold()
            out["build_s"] = time.perf_counter() - t
            last = run.head or 0
            times = []
            for _ in range(samples):
                seq = rng.randint(0, last)
                t = time.perf_counter()
                run.state_at(seq)
                times.append(time.perf_counter() - t)
            out["state_at_median_ms"] = statistics.median(times) * 1000
            times = []
            for _ in range(5):
                t = time.perf_counter()
                rows = run.history()
                times.append(time.perf_counter() - t)
            assert len(rows) == last + 1
            out["history_rows"] = float(len(rows))
            out["history_median_ms"] = statistics.median(times) * 1000
            times = []
            for _ in range(max(5, samples // 10)):
                a, b = rng.randint(0, last), rng.randint(0, last)
                t = time.perf_counter()
                run.diff(a, b)
                times.append(time.perf_counter() - t)
            out["diff_median_ms"] = statistics.median(times) * 1000
        finally:
            lab.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.history", description=__doc__)
    parser.add_argument("--checkpoints", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args(argv)
    r = measure(args.checkpoints, args.samples)
    print(f"machine: {platform.platform()}, python {platform.python_version()}")
    print(f"built a {int(r['history_rows']):,}-checkpoint run (batch durability) in {r['build_s']:.1f} s\n")
    print("| measure | median | target |")
    print("| --- | --- | --- |")
    print(f"| state_at(random seq) | {r['state_at_median_ms']:.2f} ms | < 5 ms |")
    print(f"| history() of {int(r['history_rows']):,} rows | {r['history_median_ms']:.1f} ms | < 100 ms |")
    print(f"| diff(a, b) | {r['diff_median_ms']:.2f} ms | < 10 ms |")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
