"""The graph and data set of the kill-and-continue test (test_evaluate_restart.py), importable by its
processes: six cases; case `c3`'s station marks `<dir>/entered` and then waits for `<dir>/release`."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass

from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab

DIR = os.environ.get("GRAPHLAB_EVAL_DIR", ".")


@dataclass
class Item:
    name: str = ""
    n: int = 0


@dataclass
class Square(BaseNode[Item, None, int]):
    async def run(self, ctx: GraphRunContext[Item, None]) -> Report:
        if ctx.state.name == "c3":
            open(os.path.join(DIR, "entered"), "w").close()
            while not os.path.exists(os.path.join(DIR, "release")):
                await asyncio.sleep(0.02)
        ctx.state.n = ctx.state.n * ctx.state.n
        return Report()


@dataclass
class Report(BaseNode[Item, None, int]):
    async def run(self, ctx: GraphRunContext[Item, None]) -> End[int]:
        return End(ctx.state.n)


def declare(lab: Lab):
    g = lab.graph("squares", state_type=Item, output_type=int)
    g.node(Square)
    g.node(Report)
    return g


def dataset() -> Dataset:
    cases = [Case(name=f"c{i}", inputs=Item(f"c{i}", i), expected_output=i * i) for i in range(6)]
    return Dataset(name="squares", cases=cases, evaluators=[EqualsExpected()])


if __name__ == "__main__":  # one process's evaluation: python -m tests.evals.restart_graph STORE
    lab = Lab(sys.argv[1])
    ev = lab.evaluate(declare(lab), dataset(), entry=Square(), progress=False)
    print(sorted(ev.counts().items()), flush=True)
