"""A process Ctrl-C'd while a station is in flight, which then continues the run itself.

    python sigint_worker.py DBPATH

For each of two runs it prints `IN FLIGHT` once the station sleeps, expects a SIGINT (so
`run.step()` raises KeyboardInterrupt in this main thread), then continues the run in this same
process, by `lab.resume(id)` for the first and by `run.retry()` for the second, and prints one
JSON report line per run.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab

_visits: list[int] = []


@dataclass
class Tally:
    count: int = 0


@dataclass
class Slow(BaseNode[Tally, None, int]):
    async def run(self, ctx: GraphRunContext[Tally, None]) -> End[int]:
        ctx.state.count += 1
        _visits.append(1)
        if len(_visits) % 2 == 1:  # the first visit of each run waits for the Ctrl-C
            print("IN FLIGHT", flush=True)
            await asyncio.sleep(60)
        return End(ctx.state.count)


_AT_START = signal.getsignal(signal.SIGINT)
"""What handles SIGINT when this process starts: Python's own unless the parent left it ignored (said
in the failure message, since a SIGINT that never arrives has no other trace)."""


def main(path: str) -> None:
    lab = Lab(path)
    g = lab.graph("slow", state_type=Tally, output_type=int)
    g.node(Slow)
    for how in ("resume", "retry"):
        run = g.start(Slow(), state=Tally())
        try:
            run.step()
            raise SystemExit(
                "run.step() returned; the SIGINT never arrived (SIGINT's handler now "
                f"{signal.getsignal(signal.SIGINT)!r}, at the start {_AT_START!r}; threads: "
                f"{[t.name for t in threading.enumerate()]}; run {run.status}, events "
                f"{[e.kind for e in run.events()]})"
            )
        except KeyboardInterrupt:
            pass
        report = {"how": how, "after_ctrl_c": run.status, "state_after_ctrl_c": run.state.count}
        try:
            if how == "resume":
                handle = lab.resume(run.id)
                report["same_handle"] = handle is run
                report["after_resume"] = handle.status
                report["continued"] = handle.step().outcome
            else:
                report["continued"] = run.retry().outcome
        except Exception as exc:
            report["continued"] = f"{type(exc).__name__}: {exc}"
        report["output"] = run.output
        report["stored"] = lab.run(run.id).status
        report["kinds"] = [e.kind for e in run.events()]
        print(json.dumps(report), flush=True)
    lab.close()


if __name__ == "__main__":
    main(sys.argv[1])
