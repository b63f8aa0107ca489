"""Worker processes of the store suite: `python -m tests.store.worker COMMAND LOCATION ...`.

- `park LOC`: start an order, run it to its gate, print the run id, exit.
- `approve LOC RUN_ID BARRIER NOTE`: resume the run, wait until BARRIER exists, approve; print
  `won` or `lost: <error type>`.
- `tally LOC N MARKER [nosync]`: start a tally that blocks in its third station (MARKER appears), to be
  killed; `nosync` opens the store with `fsync=False` (PostgreSQL: `synchronous_commit=off`).
- `steps LOC K`: start K tallies of 20 stations, step them all to the end; print their ids.
"""

from __future__ import annotations

import os
import sys
import time

from lab import Lab, LabError
from tests.store.graphs import Count, Order, Prepare, Tally, declare_orders, declare_tally


def main(argv: list[str]) -> None:
    cmd, loc = argv[0], argv[1]
    lab = Lab(loc, fsync=False) if argv[-1] == "nosync" else Lab(loc)
    if cmd == "park":
        g = declare_orders(lab)
        run = g.start(Prepare(), state=Order(item="lamp"))
        run.run()
        assert run.status == "waiting", run.status
        print(run.id, flush=True)
    elif cmd == "approve":
        declare_orders(lab)
        run = lab.resume(argv[2])
        while not os.path.exists(argv[3]):
            time.sleep(0.005)
        try:
            run.approve(argv[4])
            print("won", flush=True)
        except LabError as exc:
            print(f"lost: {type(exc).__name__}: {exc}", flush=True)
    elif cmd == "tally":
        g = declare_tally(lab)
        run = g.start(Count(), state=Tally(limit=int(argv[2]), marker=argv[3]))
        print(run.id, flush=True)
        run.run()
    elif cmd == "steps":
        g = declare_tally(lab)
        runs = [g.start(Count(), state=Tally(limit=20)) for _ in range(int(argv[2]))]
        while any(r.status != "done" for r in runs):
            for r in runs:
                if r.status != "done":
                    r.step()
        print(" ".join(r.id for r in runs), flush=True)
    lab.close()


if __name__ == "__main__":
    main(sys.argv[1:])
