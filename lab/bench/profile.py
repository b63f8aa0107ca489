"""`python -m lab.bench --profile`: cProfile of the lab step variant, on the thread that does the work."""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import tempfile
import time
from typing import Any

from .. import Lab
from ..engine.loop import run_sync
from .common import DEFAULT_VISITS, BenchState, Loop, declare

__all__ = ("profile_lab_step",)


async def _profiled(prof: cProfile.Profile, run: Any) -> float:
    """Drive `run` to its end with `prof` on; the wall time. Awaited on the lab's own loop."""
    t0 = time.perf_counter()
    prof.enable()
    try:
        await run.arun()
    finally:
        prof.disable()
    return time.perf_counter() - t0


def profile_lab_step(visits: int = DEFAULT_VISITS, *, runs: int = 3, top: int = 30) -> str:
    """cProfile of a run with step durability on a DuckDB file (after a warm run).

    A run is driven on the lab's loop thread however it is called (`run.run()` waits for it
    there; `await run.arun()` from another loop is handed there), and cProfile sees only the
    thread it is enabled in. So the profiler is switched on and off by a coroutine on the lab's
    own loop (`lab.engine.loop.run_sync`), around `await run.arun()`, which drives the run right
    there: the profile sees the engine and the store.
    """
    with tempfile.TemporaryDirectory(prefix="graphlab-prof-") as root:
        lab = Lab(os.path.join(root, "prof.duckdb"), durability="step")
        try:
            g = declare(lab)
            g.start(Loop(), state=BenchState(limit=visits), step_limit=visits + 1).run()
            prof = cProfile.Profile()
            total = 0.0
            for _ in range(runs):
                run = g.start(Loop(), state=BenchState(limit=visits), step_limit=visits + 1)
                total += run_sync(_profiled(prof, run))
        finally:
            lab.close()
    return _report(prof, total, visits * runs, visits, runs, top)


def _report(prof: cProfile.Profile, total: float, stations: int, visits: int, runs: int, top: int) -> str:
    out = io.StringIO()
    out.write(
        f"cProfile: lab step on a DuckDB file, {runs} runs x {visits} visits; "
        f"{total / stations * 1e6:.1f} µs/station under the profiler\n\n"
    )
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    out.write("== by own time (tottime) ==\n")
    stats.sort_stats("tottime").print_stats(top)
    out.write("== by cumulative time ==\n")
    stats.sort_stats("cumulative").print_stats(top)
    here = os.path.dirname(os.path.abspath(__file__))
    lab_dir = os.path.dirname(here)
    lab_stats = pstats.Stats(prof, stream=out)
    out.write(f"== functions in {lab_dir} by cumulative time (µs per station) ==\n")
    rows = []
    for (filename, lineno, name), (_cc, nc, tt, ct, _callers) in lab_stats.stats.items():  # type: ignore[attr-defined]
        path = os.path.abspath(filename)
        if path.startswith(lab_dir + os.sep) and not path.startswith(here + os.sep):
            rows.append((ct, tt, nc, f"{os.path.relpath(filename, os.path.dirname(lab_dir))}:{lineno}({name})"))
    rows.sort(reverse=True)
    out.write(f"{'cum µs/st':>10} {'own µs/st':>10} {'calls/st':>9}  function\n")
    for ct, tt, nc, where in rows[:top]:
        out.write(f"{ct / stations * 1e6:10.2f} {tt / stations * 1e6:10.2f} {nc / stations:9.2f}  {where}\n")
    return out.getvalue()
