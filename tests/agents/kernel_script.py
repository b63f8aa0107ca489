"""A stand-in kernel: start a run whose delegated station runs in a worker subprocess, print the run id
once the worker runs, then wait to be killed (tests/agents/test_worker.py kills it)."""

from __future__ import annotations

import sys
import threading
import time

from lab import Lab

from .graphs import declare

lab = Lab(sys.argv[1])
lab.agents.register("slow-worker", target="tests.agents.agent_defs:slow_planner", runner="subprocess")
g = declare(lab, runtime="slow-worker")
run = g.start(g.nodes["Outline"]())
threading.Thread(target=run.run, daemon=True).start()
while run.job is None or run.job.status != "RUNNING":
    time.sleep(0.02)
print(run.id, run.job.request_id, flush=True)
time.sleep(120)
