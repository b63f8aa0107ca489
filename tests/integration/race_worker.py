"""A spawner of writer processes for the kill-during-open tests (issue 24 item 2).

    python -m tests.integration.race_worker DBPATH

Imports Graph Lab once, prints `READY`, then reads commands, one a line, and forks a fresh
process for each (a new pid, its own `Lab(DBPATH)`), so a trial costs no interpreter start:

    stale N   a child starts N ticker runs, steps each once, prints `STALE`, and dies without
              closing its lab: N runs stay `running` between stations, their writer gone
    victim    a child starts a ticker run, prints `RUN <pid> <run_id>`, and steps it on and on
              (a station sleeps 2-8 ms) until it is killed

Children are reaped at once (SIGCHLD ignored): a killed one is gone, not a zombie.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pydantic_graph import BaseNode, End, GraphRunContext  # noqa: E402

from lab import Lab, LabGraph  # noqa: E402

GRAPH = "ticker"
LIMIT = 10_000_000


@dataclass
class Ticks:
    count: int = 0


@dataclass
class Tick(BaseNode[Ticks, None, int]):
    async def run(self, ctx: GraphRunContext[Ticks, None]) -> Tick | End[int]:
        await asyncio.sleep(random.uniform(0.002, 0.008))
        ctx.state.count += 1
        return End(ctx.state.count) if ctx.state.count >= LIMIT else Tick()


def declare(lab: Lab) -> LabGraph:
    g = lab.graph(GRAPH, state_type=Ticks, output_type=int)
    g.node(Tick)
    return g


def _stale(path: str, n: int) -> None:
    lab = Lab(path)
    g = declare(lab)
    for _ in range(n):
        g.start(Tick(), state=Ticks()).step()
    print("STALE", flush=True)
    os._exit(0)  # no close: the runs keep this (now gone) process as their writer


def _victim(path: str) -> None:
    lab = Lab(path)
    run = declare(lab).start(Tick(), state=Ticks(), step_limit=None)
    run.step()
    print(f"RUN {os.getpid()} {run.id}", flush=True)
    run.run()
    os._exit(0)


def main(argv: list[str]) -> int:
    path = argv[0]
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("READY", flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        sys.stdout.flush()
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                if cmd[0] == "stale":
                    _stale(path, int(cmd[1]))
                elif cmd[0] == "victim":
                    _victim(path)
            except BaseException as exc:  # the test reads why a child failed
                print(f"ERROR {type(exc).__name__}: {exc}", flush=True)
            os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
