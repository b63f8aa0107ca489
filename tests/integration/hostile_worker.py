"""A one-node graph that misbehaves on request, and the worker processes of the store-fault tests.

The node lives at module level so the test process and every worker build the same digest:
a run a worker leaves behind resumes here. What it does at which count is in the state, so one
graph serves every scenario:

    python -m tests.integration.hostile_worker leave DB      # a done run and a running one, journal unfolded, exit
    python -m tests.integration.hostile_worker die DB        # the process dies inside a station
    python -m tests.integration.hostile_worker diskfull DB   # RLIMIT_FSIZE hits while a run steps
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, LabGraph, StoreError

GRAPH = "hostile"


@dataclass
class Bag:
    count: int = 0
    limit: int = 6
    name: str = ""
    die_at: int = -1
    """The process exits (as if killed) inside the station that reaches this count."""
    raise_at: int = -1
    """The station that reaches this count raises FileNotFoundError for an undecodable file name."""
    bad_name_at: int = -1
    """The station that reaches this count puts a lone surrogate into the state."""
    pad: str = ""
    """Makes each checkpoint line long (the disk-full test wants a write to tear)."""


@dataclass
class Step(BaseNode[Bag, None, int]):
    async def run(self, ctx: GraphRunContext[Bag, None]) -> Step | End[int]:
        s = ctx.state
        s.count += 1
        if s.count == s.die_at:
            os._exit(0)
        if s.count == s.raise_at:
            raise FileNotFoundError(os.fsdecode(b"caf\xe9.txt"))
        if s.count == s.bad_name_at:
            s.name = os.fsdecode(b"caf\xe9.txt")
        if s.count >= s.limit:
            return End(s.count)
        return Step()


def declare(lab: Lab) -> LabGraph:
    g = lab.graph(GRAPH, state_type=Bag, output_type=int)
    g.node(Step)
    return g


def command(db: object, scenario: str) -> list[str]:
    return [sys.executable, "-m", "tests.integration.hostile_worker", scenario, os.fspath(db)]  # type: ignore[arg-type]


def _leave(db: str) -> None:
    """A finished run and a run at checkpoint 3, only in the journal: exit without closing."""
    lab = Lab(db)
    g = declare(lab)
    done = g.start(Step(), state=Bag()).run()
    running = g.start(Step(), state=Bag()).run(max_steps=3)
    print(json.dumps({"done": done.id, "running": running.id}), flush=True)
    os._exit(0)


def _die(db: str) -> None:
    lab = Lab(db)
    run = declare(lab).start(Step(), state=Bag(die_at=4))
    print(json.dumps({"run": run.id}), flush=True)
    run.run()


def _diskfull(db: str) -> None:
    """Step a run until the file size limit makes a journal write fail, then lift it and finish."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit returns EFBIG instead
    lab = Lab(db)
    g = declare(lab)
    done = g.start(Step(), state=Bag()).run()
    lab.store.fold()
    run = g.start(Step(), state=Bag(limit=40, pad="x" * 3000))
    journal = db + ".journal"
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(journal) + 20_000, hard))
    settled: list[int] = []
    error = ""
    for _ in range(60):
        try:
            result = run.step()
        except StoreError as exc:
            error = str(exc)
            break
        settled.append(result.seq)
    failed_head = run.head
    try:  # still full: refused again, and nothing is written twice
        run.retry() if run.status == "failed" else run.step()
        again = ""
    except StoreError as exc:
        again = str(exc)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    if run.status == "failed":
        run.retry()
    run.run()
    out = {
        "done": done.id,
        "run": run.id,
        "settled": settled,
        "error": error,
        "again": again,
        "failed_head": failed_head,
        "status": run.status,
        "output": run.output,
        "head": run.head,
    }
    print(json.dumps(out), flush=True)
    os._exit(0)  # like a killed kernel: nothing folded, the journal is what a restart replays


def main(scenario: str, db: str) -> None:
    {"leave": _leave, "die": _die, "diskfull": _diskfull}[scenario](db)


if __name__ == "__main__":
    # run the importable module's code, so its classes (and the graph's digest) match the tests'
    from tests.integration import hostile_worker

    hostile_worker.main(sys.argv[1], sys.argv[2])
