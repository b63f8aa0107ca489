"""A worker process for the parallel kill-and-resume test (a map with 8 branches in flight).

    python parallel_worker.py DBPATH start WIDTH   # prints the run id, runs to End
    python parallel_worker.py DBPATH resume RUN_ID # prints the run id, runs to End

Prints `{"output": ..., "state": ...}` as its last line once the run is done.
GRAPHLAB_STEP_SLEEP sets how long each lap of a branch sleeps.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab import Lab  # noqa: E402
from tests.integration import parallel_graphs as pg  # noqa: E402


def main(argv: list[str]) -> int:
    path, mode, arg = argv[0], argv[1], argv[2]
    pg.STEP_SLEEP = float(os.environ.get("GRAPHLAB_STEP_SLEEP", "0"))
    lab = Lab(path, durability="step")
    lg = lab.adopt(pg.laps(), name="laps")
    run = lg.start(state=pg.Log(), inputs=int(arg)) if mode == "start" else lab.resume(arg)
    print(run.id, flush=True)
    if run.status != "done":  # a kill may land after the last boundary, before the output line
        run.run()
    print(json.dumps({"output": run.output, "state": dataclasses.asdict(run.state)}), flush=True)
    lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
