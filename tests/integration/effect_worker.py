"""A worker process for the `IdempotentOp` crash tests (tests/integration/test_idempotent_op.py).

    python -m tests.integration.effect_worker DBPATH LOG start
    python -m tests.integration.effect_worker DBPATH LOG resume RUN_ID
    python -m tests.integration.effect_worker DBPATH LOG settle RUN_ID KEY (JSON | rerun)

The graph: `Pay` charges once through the op `charge`, whose effect appends a line to LOG (the
outside world: a line is one charge, fsynced before the effect returns), then `Ship` ends with the
receipt. Printed lines, each flushed: `RUN <id>` once the run is durably created or resumed, then
`EFFECT` after the effect wrote its line, `RECORDED` after the op returned, and at the end
`RESULT <json>` (status, output, error type and message). `GRAPHLAB_TEST_BLOCK=effect` blocks on
stdin right after `EFFECT` (inside the effect: its key is stored, its result is not), `=recorded`
right after `RECORDED` (the result is stored, the station has not settled), so the parent can
SIGKILL the process there. `GRAPHLAB_TEST_SAFE=1` declares the op `safe_to_repeat`.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import IdempotentOp, Lab

GRAPH = "effects"
LOG = sys.argv[2] if len(sys.argv) > 2 else os.devnull
BLOCK = os.environ.get("GRAPHLAB_TEST_BLOCK", "")


@dataclass
class Order:
    amount: int = 5
    receipt: str | None = None


def _charge(amount: int) -> dict[str, object]:
    with open(LOG, "a") as f:
        f.write(f"charged {amount}\n")
        f.flush()
        os.fsync(f.fileno())
    with open(LOG) as f:
        n = sum(1 for _ in f)
    print("EFFECT", flush=True)
    if BLOCK == "effect":
        sys.stdin.read()
    return {"receipt": f"r{n}", "amount": amount}


charge = IdempotentOp("charge", _charge, safe_to_repeat=os.environ.get("GRAPHLAB_TEST_SAFE") == "1")


@dataclass
class Pay(BaseNode[Order, None, str]):
    async def run(self, ctx: GraphRunContext[Order, None]) -> Ship:
        ctx.state.receipt = charge(ctx.state.amount)["receipt"]
        print("RECORDED", flush=True)
        if BLOCK == "recorded":
            sys.stdin.read()
        return Ship()


@dataclass
class Ship(BaseNode[Order, None, str]):
    async def run(self, ctx: GraphRunContext[Order, None]) -> End[str]:
        return End(f"shipped with {ctx.state.receipt}")


def declare(lab: Lab):
    g = lab.graph(GRAPH, state_type=Order, output_type=str)
    g.node(Pay)
    g.node(Ship)
    return g


def main(argv: list[str]) -> int:
    path, _log, mode = argv[0], argv[1], argv[2]
    lab = Lab(path, durability="step")
    g = declare(lab)
    if mode == "start":
        run = g.start(Pay(), state=Order())
    else:
        run = lab.resume(argv[3])
    print("RUN", run.id, flush=True)
    if mode == "settle":
        answer = argv[5]
        if answer == "rerun":
            lab.settle_effect(argv[4], rerun=True)
        else:
            lab.settle_effect(argv[4], json.loads(answer))
        if run.status in ("failed", "interrupted"):
            run.retry()  # the failed station again (one step)
    if run.status not in ("done", "failed"):
        run.run()
    err = run.error or {}
    print("RESULT", json.dumps({"status": run.status, "output": run.output, "type": err.get("type"), "message": err.get("message")}), flush=True)
    lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
