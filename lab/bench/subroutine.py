"""`python -m lab.bench.subroutine`: what a subroutine costs against raw pydantic-graph (seed 000).

Measures, in one process, per station (median of `--runs` runs of a loop that visits
`--visits` stations):

- raw pydantic-graph: two `BaseNode`s in a loop, `GraphBuilder` (auto_instrument=False) and
  `await graph.run(...)` in memory (the reference);
- a lab graph of the same two nodes (`@g.node`), checkpointed on a DuckDB file;
- a subroutine of the same shape: a node with node-local state and a Feature visit whose
  outgoing effects route it (copies of payload and params per visit, the returned state checked,
  the commit rule, the run state validated as declared types);
- per call: an in-process Subroutine call (a parent station and a one-station child run), and a
  Workflow call (`--workflow` samples: a child interpreter each, so seconds).

Prints a Markdown table with ratios to raw pydantic-graph; always exits 0. Timing is never
asserted in tests (tests/bench/ only checks that every row is reported).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext

from .. import Lab
from ..subroutine import FeatureState, FeatureSuccess, Success, Workflow, define

__all__ = ("main", "measure", "workflow_child")


@dataclass
class Loop:
    visits: int = 0
    limit: int = 20


@dataclass
class Work(BaseNode[Loop, None, int]):
    async def run(self, ctx: GraphRunContext[Loop, None]) -> Check:
        ctx.state.visits += 1
        return Check()


@dataclass
class Check(BaseNode[Loop, None, int]):
    async def run(self, ctx: GraphRunContext[Loop, None]) -> Work | End[int]:
        ctx.state.visits += 1
        return End(ctx.state.visits) if ctx.state.visits >= ctx.state.limit else Work()


@dataclass(frozen=True, slots=True)
class Count:
    n: int = 0


@dataclass
class Limit:
    limit: int = 20


def declare_subroutine(lab: Lab) -> Any:
    """work (node-local Count) -> check (Feature: done yes/no) -> work again or Output."""
    sub = lab.subroutine("bench-sub", input=int, output=int, params=Limit)
    done = sub.feature("done", bool)

    @sub.node(state=Count)
    async def work(n: int, state: Count, context: Any) -> Success:
        return Success(output=n + 2, state=Count(state.n + 1))

    @sub.feature_node
    async def check(n: int, context: Any) -> FeatureSuccess:
        FeatureState.replace(done, n >= context.params.limit)
        return FeatureSuccess()

    sub.edge(sub.input, work)
    sub.edge(work, check)
    sub.edge(check, work, effect=done.assign(False))
    sub.edge(check, sub.output, effect=done.assign(True))
    return sub


workflow_child = define("bench-child", input=int, output=int)


@workflow_child.node
async def echo(n: int, state: Any, context: Any) -> Success:
    return Success(output=n)


workflow_child.edge(workflow_child.input, echo)
workflow_child.edge(echo, workflow_child.output)


def declare_callers(lab: Lab) -> tuple[Any, Any]:
    child = lab.subroutine(workflow_child)
    here = lab.subroutine("bench-call-here", input=int, output=int)
    there = lab.subroutine("bench-call-there", input=int, output=int)

    @here.node
    async def call_here(n: int, state: Any, context: Any) -> Success:
        return Success(output=await context.invoke(child, n))

    @there.node
    async def call_there(n: int, state: Any, context: Any) -> Success:
        return Success(output=await context.invoke(Workflow(workflow_child), n))

    for sub, node in ((here, "call_here"), (there, "call_there")):
        sub.edge(sub.input, node)
        sub.edge(node, sub.output)
    return here, there


def _median_per(samples: list[float], per: int) -> float:
    return statistics.median(samples) / per * 1e3


def measure(visits: int = 20, runs: int = 30, workflow: int = 2) -> dict[str, float]:
    """Median milliseconds per station (per call for the call rows)."""
    out: dict[str, float] = {}
    builder: GraphBuilder[Loop, None, Work, int] = GraphBuilder(
        name="bench_sub_raw", state_type=Loop, input_type=Work, output_type=int, auto_instrument=False
    )
    builder.add(builder.node(Work), builder.node(Check), builder.edge_from(builder.start_node).to(Work))
    native = builder.build()

    async def raw_run() -> float:
        t = time.perf_counter()
        await native.run(state=Loop(limit=visits), inputs=Work())
        return time.perf_counter() - t

    samples = [asyncio.run(raw_run()) for _ in range(runs)]
    out["raw pydantic-graph"] = _median_per(samples, visits)
    with tempfile.TemporaryDirectory(prefix="graphlab-bench-sub-") as tmp:
        lab = Lab(os.path.join(tmp, "lab.duckdb"))
        try:
            g = lab.graph("bench-loop", state_type=Loop, output_type=int)
            g.node(Work)
            g.node(Check)
            sub = declare_subroutine(lab)
            here, there = declare_callers(lab)
            samples = []
            for _ in range(runs):
                run = g.start(Work(), state=Loop(limit=visits), step_limit=visits + 10)
                t = time.perf_counter()
                run.run()
                samples.append(time.perf_counter() - t)
            out["lab graph (@g.node), DuckDB file"] = _median_per(samples, visits)
            samples = []
            for _ in range(runs):
                run = sub.start(0, params=Limit(limit=visits), step_limit=visits + 10)
                t = time.perf_counter()
                run.run()
                samples.append(time.perf_counter() - t)
                assert run.status == "done", run.error
            out["subroutine, DuckDB file"] = _median_per(samples, visits)
            for name, graph, n in (
                ("in-process Subroutine call", here, runs),
                ("Workflow call (child process)", there, workflow),
            ):
                samples = []
                for _ in range(n):
                    run = graph.start(1)
                    t = time.perf_counter()
                    run.run()
                    samples.append(time.perf_counter() - t)
                    assert run.status == "done", run.error
                out[name] = _median_per(samples, 1)
        finally:
            lab.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.bench.subroutine", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--visits", type=int, default=20, help="stations per run of the loop")
    parser.add_argument("--runs", type=int, default=30, help="runs per row (median)")
    parser.add_argument("--workflow", type=int, default=2, help="Workflow calls (each starts an interpreter)")
    args = parser.parse_args(argv)
    # under `python -m` this file is __main__; the Workflow child must be importable by its module name
    bench = importlib.import_module("lab.bench.subroutine")
    rows = bench.measure(args.visits, args.runs, args.workflow)
    raw = rows["raw pydantic-graph"]
    print(
        f"{args.visits} stations per run, {args.runs} runs; Python {platform.python_version()} on {sys.platform}"
    )
    print()
    print("| measure | median ms | × raw pydantic-graph |")
    print("| --- | ---: | ---: |")
    for name, ms in rows.items():
        unit = "per call" if "call" in name else "per station"
        print(f"| {name} ({unit}) | {ms:.3f} | {ms / raw:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
