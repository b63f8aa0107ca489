"""`python -m lab.bench --ray`: a batch of runs on Ray against the same runs in a plain loop.

200 runs of a 20-station graph (the benchmark's `Loop`, common.py), each run durable in the lab's store:

* `loop` — `g.start(...)` then `run.run()` for each input, one after the other, in this process;
* `ray_1`, `ray_2` — `lab.map(g, inputs, entry=Loop(), workers=N)` on a local Ray with N worker
  actors (warm: a small batch first starts them, so Ray's start-up is not timed).

On the embedded store (a DuckDB file) the workers send each run's boundaries back and this
process writes them; with `--postgres URL` the same three rows are also timed on PostgreSQL,
where the workers write directly. Runs per second are a whole batch's runs over its wall time.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from .. import Lab
from ..batch import start_ray
from .common import BenchState, Loop, declare

__all__ = ("BatchBench", "run_batch_benchmark", "batch_markdown")


@dataclass
class BatchBench:
    store: str
    variant: str
    runs: int
    stations: int
    seconds: float | None = None
    error: str | None = None

    @property
    def runs_per_second(self) -> float | None:
        return None if not self.seconds else self.runs / self.seconds


def _loop(g: Any, runs: int, stations: int) -> float:
    t0 = time.perf_counter()
    for _ in range(runs):
        run = g.start(Loop(), state=BenchState(limit=stations), step_limit=stations + 1)
        run.run()
        assert run.status == "done" and run.output == stations, (run.status, run.error)
    return time.perf_counter() - t0


def _ray(lab: Any, g: Any, runs: int, stations: int, workers: int) -> float:
    lab.map(g, [BenchState(limit=stations) for _ in range(workers)], entry=Loop(), workers=workers, progress=False)
    t0 = time.perf_counter()
    batch = lab.map(g, [BenchState(limit=stations) for _ in range(runs)], entry=Loop(), workers=workers, progress=False)
    dt = time.perf_counter() - t0
    assert batch.counts() == {"done": runs}, batch.counts()
    return dt


def run_batch_benchmark(runs: int = 200, stations: int = 20, *, postgres: str | None = None) -> list[BatchBench]:
    """Time the loop and Ray with 1 and 2 workers, on a DuckDB file (and PostgreSQL when given)."""
    import ray

    if not ray.is_initialized():
        start_ray(num_cpus=2)
    out: list[BatchBench] = []
    with tempfile.TemporaryDirectory(prefix="graphlab-bench-batch-") as tmp:
        stores = [("DuckDB file", os.path.join(tmp, "batch.duckdb"))] + ([("PostgreSQL", postgres)] if postgres else [])
        for name, location in stores:
            lab = Lab(location)
            g = declare(lab)
            g.step_limit = stations + 1
            for variant, fn in (
                ("loop", lambda lab=lab, g=g: _loop(g, runs, stations)),
                ("ray_1", lambda lab=lab, g=g: _ray(lab, g, runs, stations, 1)),
                ("ray_2", lambda lab=lab, g=g: _ray(lab, g, runs, stations, 2)),
            ):
                row = BatchBench(name, variant, runs, stations)
                try:
                    row.seconds = fn()
                except Exception as exc:  # a benchmark reports; it does not fail
                    row.error = f"{type(exc).__name__}: {exc}"
                out.append(row)
            lab.close()
    return out


def batch_markdown(rows: list[BatchBench]) -> str:
    lines = [
        f"Batch: {rows[0].runs} runs of a {rows[0].stations}-station graph, each durable in the lab's store "
        "(Ray workers warm; one timed batch each).",
        "",
        "| store | variant | seconds | runs/s | × loop |",
        "|---|---|---:|---:|---:|",
    ]
    loop = {r.store: r.runs_per_second for r in rows if r.variant == "loop"}
    for r in rows:
        rps = r.runs_per_second
        ratio = f"{rps / loop[r.store]:.2f}x" if rps and loop.get(r.store) else "—"
        secs = f"{r.seconds:.2f}" if r.seconds else (f"failed: {r.error}" if r.error else "—")
        lines.append(f"| {r.store} | {r.variant} | {secs} | {f'{rps:.1f}' if rps else '—'} | {ratio} |")
    return "\n".join(lines)
