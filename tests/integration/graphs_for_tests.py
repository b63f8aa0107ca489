"""The counter graph shared by the crash and fault tests and by `worker.py` subprocesses.

Node classes live at module level so the test process and every worker subprocess build the
graph from identical source (a manifest's digest covers each node's source): a run started in
one process resumes in another. Each station sleeps a small pseudo-random time so a SIGKILL
usually lands while a station is in flight; the time is seeded by the station and the count,
so every process sleeps the same amount at the same boundary and the output never depends on
it.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, LabGraph

GRAPH = "counter"
LIMIT = 60
"""The run ends once the count reaches this: 30 Inc and 30 Check stations from Inc(by=2)."""
MAX_SLEEP = 0.024
"""Upper bound of a station's sleep in seconds (a whole run takes about 0.8 s)."""


def station_sleep(station: str, count: int) -> float:
    """The seeded sleep of `station` at `count` (a str seed is stable across processes)."""
    return random.Random(f"{station}:{count}").uniform(0.0, MAX_SLEEP)


@dataclass
class State:
    count: int = 0


@dataclass
class Inc(BaseNode[State, None, int]):
    by: int = 1

    async def run(self, ctx: GraphRunContext[State, None]) -> Check:
        await asyncio.sleep(station_sleep("Inc", ctx.state.count))
        ctx.state.count += self.by
        return Check()


@dataclass
class Check(BaseNode[State, None, int]):
    async def run(self, ctx: GraphRunContext[State, None]) -> Inc | End[int]:
        await asyncio.sleep(station_sleep("Check", ctx.state.count))
        return End(ctx.state.count) if ctx.state.count >= LIMIT else Inc(by=2)


def declare(lab: Lab) -> LabGraph:
    """Declare the counter graph on `lab` (same source in every process, so the same revision)."""
    g = lab.graph(GRAPH, state_type=State, output_type=int)
    g.node(Inc)
    g.node(Check)
    return g


def entry() -> Inc:
    return Inc(by=2)


def declare_changed(lab: Lab) -> LabGraph:
    """The counter graph with `Inc` re-declared with a different body (same name and fields).

    This is what editing the `Inc` cell in a notebook does: a new revision whose only change is
    the source of station Inc.
    """

    @dataclass
    class Inc(BaseNode[State, None, int]):  # noqa: F811 - the point is the same node id
        by: int = 1

        async def run(self, ctx: GraphRunContext[State, None]) -> Check:
            ctx.state.count += self.by * 10  # the edit
            return Check()

    g = lab.graph(GRAPH, state_type=State, output_type=int)
    g.node(Inc)
    g.node(Check)
    return g


# -- for the tests that drive worker subprocesses ---------------------------------------------

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
"""The worker script: `python worker.py DBPATH start|resume RUN_ID|hold`."""


def worker_command(db: str | os.PathLike[str], *args: str) -> list[str]:
    return [sys.executable, WORKER, os.fspath(db), *args]
