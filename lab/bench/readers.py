"""A reader in a second process while the first one steps: what reading a shared store costs.

One process (the *writer*, a subprocess of this one) steps the benchmark's `Loop` graph without
pause on a DuckDB file, `durability="step"`. This process (the *reader*) has a finished run of
`checkpoints` boundaries on the same file and times, again and again, `lab.runs()` and then
`run.state_at(seq)` at a random checkpoint of that run: every read takes the store's lock,
attaches the file, folds what the writer journalled since the last read, queries, and lets go
(docs/store.md "Who holds what, when"; the other process's journal is folded at most every 0.5 s,
so some reads fold and most do not: the p90 shows the ones that do). Target: median < 50 ms for
the pair.

    python -m lab.bench --only readers
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from .. import Lab
from .common import BenchState, Loop, declare

__all__ = ("ReaderReport", "run_reader_benchmark", "readers_markdown", "TARGET_MS")

TARGET_MS = 50.0


@dataclass
class ReaderReport:
    checkpoints: int
    runs_ms: list[float] = field(default_factory=list)
    state_ms: list[float] = field(default_factory=list)
    pair_ms: list[float] = field(default_factory=list)
    writer_stations: int = 0
    seconds: float = 0.0
    error: str | None = None

    def median(self, which: str) -> float | None:
        values = getattr(self, which)
        return statistics.median(values) if values else None


def _writer(path: str) -> int:
    """Step Loop runs without pause until stdin closes; print how many stations settled."""
    import threading

    lab = Lab(path)
    g = declare(lab)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stations = 0
    print("READY", flush=True)
    while not stop.is_set():
        run = g.start(Loop(), state=BenchState(limit=1000), durability="step", step_limit=None)
        while not stop.is_set() and run.step().outcome != "done":
            stations += 1
    print(f"STATIONS {stations}", flush=True)
    lab.close()
    return 0


def run_reader_benchmark(
    checkpoints: int = 10_000, reads: int = 40, *, workdir: str | None = None, seed: int = 14
) -> ReaderReport:
    """Time `lab.runs()` + `state_at` in this process while a second process steps."""
    report = ReaderReport(checkpoints)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="graphlab-readers-", dir=workdir) as tmp:
        path = os.path.join(tmp, "lab.duckdb")
        lab = Lab(path, durability="batch")
        try:
            g = declare(lab)
            run = g.start(Loop(), state=BenchState(limit=checkpoints), durability="batch", step_limit=None).run()
            lab.store.fold()
            writer = subprocess.Popen(
                [sys.executable, "-m", "lab.bench.readers", "--writer", path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:
                if writer.stdout.readline().strip() != "READY":
                    raise RuntimeError(f"the writer did not start: {writer.stderr.read()}")
                time.sleep(0.3)  # the writer is stepping
                started = time.perf_counter()
                for _ in range(reads):
                    seq = rng.randrange(checkpoints)
                    t0 = time.perf_counter()
                    lab.runs()
                    t1 = time.perf_counter()
                    run.state_at(seq)
                    t2 = time.perf_counter()
                    report.runs_ms.append((t1 - t0) * 1000)
                    report.state_ms.append((t2 - t1) * 1000)
                    report.pair_ms.append((t2 - t0) * 1000)
                    time.sleep(0.01)  # a person's view reads now and then, not in a tight loop
                report.seconds = time.perf_counter() - started
            finally:
                writer.stdin.close()
                out = writer.stdout.read()
                err = writer.stderr.read()
                writer.wait(timeout=120)
                writer.stdout.close()
                writer.stderr.close()
            lines = [ln for ln in out.splitlines() if ln.startswith("STATIONS ")]
            if writer.returncode != 0 or not lines:
                raise RuntimeError(f"the writer failed: {err.strip().splitlines()[-1:] or writer.returncode}")
            report.writer_stations = int(lines[-1].split()[1])
        except Exception as exc:  # a benchmark reports, never raises
            report.error = f"{type(exc).__name__}: {exc}"
        finally:
            lab.close()
    return report


def readers_markdown(report: ReaderReport) -> str:
    if report.error:
        return f"Reader in a second process: failed: {report.error}"
    pair = report.median("pair_ms")
    p90 = sorted(report.pair_ms)[int(len(report.pair_ms) * 0.9) - 1] if report.pair_ms else None
    met = "yes" if pair is not None and pair < TARGET_MS else "no"
    rate = report.writer_stations / report.seconds if report.seconds else 0.0
    return "\n".join(
        [
            "| reader in a second process (the first steps) | median | p90 | target | met |",
            "|---|---:|---:|---:|:---:|",
            f"| `lab.runs()` | {report.median('runs_ms'):.1f} ms | | | |",
            f"| `run.state_at(seq)`, run of {report.checkpoints:,} checkpoints | {report.median('state_ms'):.1f} ms | | | |",
            f"| both | {pair:.1f} ms | {p90:.1f} ms | < {TARGET_MS:.0f} ms | {met} |",
            "",
            f"{len(report.pair_ms)} reads; the writer settled {report.writer_stations:,} stations meanwhile "
            f"({rate:,.0f}/s, `durability=\"step\"`, a new 1,000-visit run each time one ends).",
        ]
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--writer":
        sys.exit(_writer(sys.argv[2]))
    print(readers_markdown(run_reader_benchmark()))
