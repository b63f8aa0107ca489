"""A kernel-like process with a node that blocks its thread, stopped by a timeout and by Cancel.

    python blocking_worker.py DBPATH

Two stuck runs (a node declared `blocking=True` that loops on `time.sleep` forever) are each
driven by `run.run()` on a thread of this process, as a notebook's Run button does; the first
is stopped by its `timeout=`, the second by `run.cancel()` from the main thread. Meanwhile the
main thread keeps stepping a second graph. Prints one JSON report; the process must then exit
although the stuck nodes still sleep on their own threads.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab


@dataclass
class Count:
    n: int = 0


@dataclass
class Stuck(BaseNode[Count, None, int]):
    """Blocks its thread for good: asyncio cannot cancel this."""

    async def run(self, ctx: GraphRunContext[Count, None]) -> End[int]:
        ctx.state.n += 1
        while True:
            time.sleep(0.05)


@dataclass
class Tick(BaseNode[Count, None, int]):
    async def run(self, ctx: GraphRunContext[Count, None]) -> Tick | End[int]:
        await asyncio.sleep(0.01)
        ctx.state.n += 1
        return Tick()


def drive_in_thread(call: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def target() -> None:
        started = time.perf_counter()
        try:
            call()
        except BaseException as exc:  # reported, never swallowed silently
            out["raised"] = f"{type(exc).__name__}: {exc}"
        out["seconds"] = time.perf_counter() - started

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, out


def tick_while(thread: threading.Thread, ticker: Any) -> int:
    """Step the other run while `thread` is still driving its stuck run; how many steps settled."""
    steps = 0
    deadline = time.monotonic() + 30
    while thread.is_alive() and time.monotonic() < deadline:
        if ticker.step().outcome == "settled":
            steps += 1
    return steps


def main(path: str) -> None:
    lab = Lab(path)
    stuck = lab.graph("stuck", state_type=Count, output_type=int)
    stuck.node(blocking=True)(Stuck)
    ticking = lab.graph("ticking", state_type=Count, output_type=int, step_limit=None)
    ticking.node(Tick)
    ticker = ticking.start(Tick(), state=Count())
    report: dict[str, Any] = {}

    timed = stuck.start(Stuck(), state=Count())
    t, out = drive_in_thread(lambda: timed.run(timeout=0.5))
    ticks = tick_while(t, ticker)
    t.join(10)
    report["timeout"] = {"returned": not t.is_alive(), "status": timed.status, "error": (timed.error or {}).get("type"),
                         "ticks_meanwhile": ticks, "head": timed.head, "state_n": timed.state.n, **out}

    cancelled = stuck.start(Stuck(), state=Count())
    t, out = drive_in_thread(cancelled.run)
    while not cancelled.events("entered"):
        time.sleep(0.01)
    ticks = sum(ticker.step().outcome == "settled" for _ in range(5))  # the other run steps meanwhile
    asked = time.perf_counter()
    cancelled.cancel()
    t.join(10)
    report["cancel"] = {"returned": not t.is_alive(), "status": cancelled.status, "ticks_meanwhile": ticks,
                        "seconds_after_cancel": time.perf_counter() - asked, **out}
    report["ticker_settled"] = len(ticker.events("settled"))
    report["stuck_threads"] = sum(th.name.startswith("graphlab-blocking-") for th in threading.enumerate())
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
