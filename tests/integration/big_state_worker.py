"""A worker for the large-state tests (issue 24 item 1): a run whose state holds a big string.

    python -m tests.integration.big_state_worker DBPATH MB run    # runs to End, closes the lab
    python -m tests.integration.big_state_worker DBPATH MB die    # runs to End, then SIGKILLs itself
    python -m tests.integration.big_state_worker DBPATH 0 read RUN_ID   # prints what it reads back

`run` and `die` print the run id once the run is done. `die` leaves every boundary in the journal
only (nothing folded at close), as a killed kernel does. `read` opens `Lab(DBPATH)` in this
process and prints one JSON line: the run's status and, for every checkpoint, the length and the
last characters of `state.blob`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pydantic_graph import BaseNode, End, GraphRunContext  # noqa: E402

from lab import Lab, LabGraph  # noqa: E402

GRAPH = "big"
PATTERN = "0123456789abcdef"


def blob(mb: int, tag: str) -> str:
    """`mb` MiB of text ending in `tag` (so a wrong or truncated value shows)."""
    return PATTERN * (mb * 1024 * 1024 // len(PATTERN)) + tag


@dataclass
class Big:
    blob: str = ""
    mb: int = 0
    steps: int = 0


@dataclass
class Fill(BaseNode[Big, None, int]):
    async def run(self, ctx: GraphRunContext[Big, None]) -> Grow:
        ctx.state.blob = blob(ctx.state.mb, "END1")
        ctx.state.steps += 1
        return Grow()


@dataclass
class Grow(BaseNode[Big, None, int]):
    async def run(self, ctx: GraphRunContext[Big, None]) -> End[int]:
        ctx.state.blob = ctx.state.blob[:-4] + "END2"
        ctx.state.steps += 1
        return End(len(ctx.state.blob))


def declare(lab: Lab) -> LabGraph:
    g = lab.graph(GRAPH, state_type=Big, output_type=int)
    g.node(Fill)
    g.node(Grow)
    return g


def read(path: str, run_id: str) -> dict[str, object]:
    lab = Lab(path)
    try:
        rec = lab.run(run_id)
        cps = lab.store.checkpoints(run_id)
        return {
            "status": rec.status,
            "head": rec.head_seq,
            "blobs": [[c.seq, len(c.state["blob"]), c.state["blob"][-4:]] for c in cps],
        }
    finally:
        lab.close()


def main(argv: list[str]) -> int:
    path, mb, mode = argv[0], int(argv[1]), argv[2]
    if mode == "read":
        print(json.dumps(read(path, argv[3])), flush=True)
        return 0
    lab = Lab(path)
    run = declare(lab).start(Fill(), state=Big(mb=mb))
    run.run()
    print(run.id, flush=True)
    if mode == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
