"""The parallel part of `python -m lab.bench`: a 16-wide map + join, lab against native.

One graph built with pydantic-graph's `GraphBuilder`: the start maps a list of 16 numbers over
a `double` step and `reduce_list_append` collects them. Two ways to run it, in one process:

* `native` — `await graph.run(inputs=...)` (pydantic-graph's own task group), every run on one
  event loop (`asyncio.Runner`);
* `lab_step` — `lab.adopt(graph)` on a DuckDB file, `durability="step"`, `run.run()`: two
  super-steps (the start; the 16 tasks at once, the join, End), each one checkpoint with its
  frontier and an `entered`/`settled` event pair per task.

Per-task time is the wall time of a whole run divided by the width (the mapped tasks). Both are
timed round-robin, `repeat` times; the report gives medians and the ratio (target: ≤ 0.5x native per task).
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from pydantic_graph import Graph, GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from .. import Lab

__all__ = ("WIDTH", "TARGET", "ParallelReport", "map_join_graph", "run_parallel_benchmark", "parallel_markdown")

WIDTH = 16
TARGET = 0.5
"""The product's target: a mapped task costs at most half a native one (the lab's tasks share one
checkpoint per super-step where the native task group pays per task; issue 27)."""
GRAPH_NAME = "bench_map_join"


@dataclass
class MapState:
    """Counts the mapped tasks that ran."""

    done: int = 0


async def double(ctx: StepContext[MapState, None, int]) -> int:
    ctx.state.done += 1
    return ctx.inputs * 2


def map_join_graph() -> Graph[MapState, None, list[int], list[int]]:
    """Start -> map over the input list -> `double` x N -> `reduce_list_append` -> End."""
    g = GraphBuilder(state_type=MapState, input_type=list[int], output_type=list[int], auto_instrument=False)
    step = g.step(double)
    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(step), g.edge_from(step).to(collect), g.edge_from(collect).to(g.end_node))
    return g.build()


@dataclass
class ParallelReport:
    width: int
    repeat: int
    native: list[float] = field(default_factory=list)
    """Seconds per whole run."""
    lab: list[float] = field(default_factory=list)
    error: str | None = None

    def per_task(self, key: str) -> float | None:
        times = getattr(self, key)
        return statistics.median(times) / self.width if times else None

    @property
    def ratio(self) -> float | None:
        native, lab = self.per_task("native"), self.per_task("lab")
        return lab / native if native and lab else None

    @property
    def met(self) -> bool | None:
        return None if self.ratio is None else self.ratio <= TARGET


def run_parallel_benchmark(width: int = WIDTH, repeat: int = 7, warmup: int = 1, *, workdir: str | None = None) -> ParallelReport:
    """Time the native run and the lab run `repeat` times each, round-robin, after `warmup` untimed runs."""
    report = ParallelReport(width, repeat)
    inputs = list(range(width))
    expected = [i * 2 for i in inputs]
    graph = map_join_graph()
    tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix="graphlab-bench-par-")
    root = workdir if workdir is not None else tmp.name  # type: ignore[union-attr]
    lab = Lab(os.path.join(root, "parallel.duckdb"), durability="step")
    runner = asyncio.Runner()  # one event loop for every native run, as the lab keeps one too
    try:
        lg = lab.adopt(graph, name=GRAPH_NAME)

        def native() -> float:
            state = MapState()
            t0 = time.perf_counter()
            out = runner.run(graph.run(state=state, inputs=inputs))
            dt = time.perf_counter() - t0
            if out != expected or state.done != width:
                raise RuntimeError(f"native run gave {out!r}")
            return dt

        def in_lab() -> float:
            run = lg.start(inputs=inputs, state=MapState())
            t0 = time.perf_counter()
            run.run()
            dt = time.perf_counter() - t0
            if run.output != expected or run.state.done != width:
                raise RuntimeError(f"lab run ended {run.status}: {run.output!r} {run.error}")
            return dt

        for _ in range(warmup):
            native()
            in_lab()
        for _ in range(repeat):
            gc.collect()
            report.native.append(native())
            gc.collect()
            report.lab.append(in_lab())
    except Exception as exc:  # a benchmark reports; it does not fail
        report.error = f"{type(exc).__name__}: {exc}"
    finally:
        runner.close()
        lab.close()
        if tmp is not None:
            tmp.cleanup()
    return report


def parallel_markdown(report: ParallelReport) -> str:
    def us(v: float | None) -> str:
        return "—" if v is None else f"{v * 1e6:.1f}"

    ratio = "—" if report.ratio is None else f"{report.ratio:.2f}x"
    met = "" if report.met is None else ("yes" if report.met else "**no**")
    lines = [
        f"Parallel: a {report.width}-wide map + join, {report.repeat} timed runs each (round-robin); µs per mapped task.",
        "",
        "| variant | median µs/task | × native | target | met |",
        "|---|---:|---:|---:|:---:|",
        f"| native `await graph.run(...)` | {us(report.per_task('native'))} | 1.00x | — | |",
        f'| lab, `durability="step"`, DuckDB file, `run.run()` | {us(report.per_task("lab"))} | {ratio} | ≤ {TARGET:g}x | {met} |',
    ]
    if report.error:
        lines += ["", f"FAILED: {report.error}"]
    return "\n".join(lines)
