"""The parent process of the subroutine kill test.

    python subroutine_worker.py DBPATH PARENT start LOG GATE   # writes the run id to LOG.run, runs to End
    python subroutine_worker.py DBPATH PARENT resume RUN_ID    # resumes the run, runs to End

PARENT is `workflow_parent` (a Workflow call) or `inprocess_parent` (a Subroutine call).

Both print one JSON line: status, output, the call node's state and the run's `call` events.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab import Lab  # noqa: E402
from tests.integration import subroutine_flows  # noqa: E402
from tests.integration.subroutine_flows import Files  # noqa: E402


def main() -> None:
    db, parent, mode, *rest = sys.argv[1:]
    lab = Lab(db)
    lab.subroutine(subroutine_flows.slow_child)
    sub = lab.subroutine(getattr(subroutine_flows, parent))
    if mode == "start":
        log, gate = rest
        run = sub.start(3, params=Files(log=log, gate=gate))
        with open(log + ".run", "w") as f:
            f.write(run.id)
    else:
        run = lab.resume(rest[0])
    run.run()
    calls = [e.payload for e in run.events("call")]
    print(
        json.dumps(
            {
                "status": run.status,
                "output": run.output,
                "calls": calls,
                "error": run.error,
                "state": [run.state.nodes["call"].calls, list(run.state.nodes["call"].outputs)],
            }
        )
    )
    lab.close()


if __name__ == "__main__":
    main()
