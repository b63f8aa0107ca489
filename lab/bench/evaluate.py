"""`python -m lab.bench.evaluate`: an evaluation of 200 cases of a 20-station graph, cases per second.

Needs the `evals` extra (run it with `.venv-evals/bin/python`). Every row scores the same 200
cases (`EqualsExpected` on the loop graph's output, common.py) with pydantic-evals:

* `raw` — pydantic-evals' own `Dataset.evaluate` with a task that runs pydantic-graph's idiomatic
  `GraphBuilder` graph (`await graph.run(...)`), nothing stored: the baseline;
* `lab_here` — `lab.evaluate(g, dataset, workers=0)`: one durable lab run per case in this
  process, each case's scores written to the store (a DuckDB file);
* `lab_ray_2` — the same on a local Ray with 2 worker actors (warm: a small evaluation first
  starts them, so Ray's start-up is not timed).

Cases per second are a whole evaluation's cases over its wall time; each row's ratio is to `raw`
measured in the same run. The target: Ray with 2 workers gets more cases per second than the
same evaluation in one process (`yes`/`no`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from .. import Lab
from ..batch import release_workers, start_ray
from .common import BenchState, Loop, declare

__all__ = ("EvalBench", "run_evaluate_benchmark", "evaluate_markdown", "main")


@dataclass
class EvalBench:
    variant: str
    cases: int
    stations: int
    seconds: float | None = None
    error: str | None = None

    @property
    def cases_per_second(self) -> float | None:
        return None if not self.seconds else self.cases / self.seconds


def _dataset(cases: int, stations: int, name: str = "bench") -> Any:
    from pydantic_evals import Case, Dataset
    from pydantic_evals.evaluators import EqualsExpected

    return Dataset(
        name=name,
        cases=[
            Case(name=f"c{i}", inputs=BenchState(limit=stations), expected_output=stations)
            for i in range(cases)
        ],
        evaluators=[EqualsExpected()],
    )


def _idiomatic_graph() -> Any:
    """pydantic-graph's own way: a `GraphBuilder` with the loop node and a start edge, default options."""
    from pydantic_graph import GraphBuilder

    g: GraphBuilder[BenchState, None, Loop, int] = GraphBuilder(
        name="bench_evaluate", state_type=BenchState, input_type=Loop, output_type=int
    )
    g.add(g.node(Loop), g.edge_from(g.start_node).to(Loop))
    return g.build()


def _raw(cases: int, stations: int) -> float:
    graph = _idiomatic_graph()

    async def task(state: BenchState) -> int:
        return await graph.run(state=BenchState(limit=state.limit), inputs=Loop())

    ds = _dataset(cases, stations)
    t0 = time.perf_counter()
    report = asyncio.run(ds.evaluate(task, progress=False))
    dt = time.perf_counter() - t0
    assert report.averages().assertions == 1.0, report.averages()
    return dt


def _lab(lab: Any, g: Any, cases: int, stations: int, workers: int) -> float:
    if workers:  # start the workers first: Ray's start-up is not what is measured
        lab.evaluate(g, _dataset(workers, stations, "warm"), entry=Loop(), workers=workers, progress=False)
    ds = _dataset(cases, stations, f"bench-{workers}")
    t0 = time.perf_counter()
    ev = lab.evaluate(g, ds, entry=Loop(), workers=workers, progress=False)
    dt = time.perf_counter() - t0
    assert ev.counts() == {"scored": cases} and ev.averages().assertions == 1.0, ev.counts()
    return dt


def run_evaluate_benchmark(cases: int = 200, stations: int = 20, *, ray: bool = True) -> list[EvalBench]:
    """Time the raw pydantic-evals baseline, the lab in this process and (with `ray`) on 2 Ray workers."""
    out: list[EvalBench] = []
    with tempfile.TemporaryDirectory(prefix="graphlab-bench-evaluate-") as tmp:
        lab = Lab(os.path.join(tmp, "evaluate.duckdb"))
        g = declare(lab)
        g.step_limit = stations + 1
        variants = [
            ("raw", lambda: _raw(cases, stations)),
            ("lab_here", lambda: _lab(lab, g, cases, stations, 0)),
        ]
        if ray:
            variants.append(("lab_ray_2", lambda: _lab(lab, g, cases, stations, 2)))
        for variant, fn in variants:
            row = EvalBench(variant, cases, stations)
            try:
                if variant == "lab_ray_2":
                    import ray as ray_module

                    if not ray_module.is_initialized():
                        start_ray(num_cpus=2)
                row.seconds = fn()
            except Exception as exc:  # a benchmark reports; it does not fail
                row.error = f"{type(exc).__name__}: {exc}"
            out.append(row)
        release_workers()
        lab.close()
    return out


def evaluate_markdown(rows: list[EvalBench]) -> str:
    lines = [
        f"Evaluate: {rows[0].cases} cases of a {rows[0].stations}-station graph, `EqualsExpected` on each "
        "(lab rows: one durable run per case, scores in the store).",
        "",
        "| variant | seconds | cases/s | × raw |",
        "|---|---:|---:|---:|",
    ]
    by = {r.variant: r.cases_per_second for r in rows}
    for r in rows:
        cps = r.cases_per_second
        ratio = f"{cps / by['raw']:.2f}x" if cps and by.get("raw") else "—"
        secs = f"{r.seconds:.2f}" if r.seconds else (f"failed: {r.error}" if r.error else "—")
        lines.append(f"| {r.variant} | {secs} | {f'{cps:.1f}' if cps else '—'} | {ratio} |")
    here, ray = by.get("lab_here"), by.get("lab_ray_2")
    if "lab_ray_2" in by:
        met = "yes" if here and ray and ray > here else "no"
        lines += [
            "",
            f"Target: Ray with 2 workers beats one process ({f'{ray / here:.2f}x' if here and ray else '—'}): {met}",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.bench.evaluate", description=__doc__)
    parser.add_argument("--cases", type=int, default=200, help="cases in the data set (default %(default)s)")
    parser.add_argument("--stations", type=int, default=20, help="stations per run (default %(default)s)")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray row")
    args = parser.parse_args(argv)
    print(evaluate_markdown(run_evaluate_benchmark(args.cases, args.stations, ray=not args.no_ray)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
