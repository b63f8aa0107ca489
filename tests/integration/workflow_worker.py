"""A process that runs the test workflow into a session folder, then waits to be killed.

    python workflow_worker.py DBPATH FOLDER

Starts `tests.integration.test_workflow_run.FLOW` with the folder, runs to the triage checkpoint,
answers it ("deep"), runs review's first visit (it parks nowhere: the worker blocks in `fix`), and
prints READY once the folder shows `fix` in progress; then it sleeps until SIGKILLed.
"""

from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab import Lab  # noqa: E402
from tests.integration.workflow_flows import FLOW, killable_workers  # noqa: E402


def main(db: str, folder: str) -> None:
    lab = Lab(db)
    in_fix = threading.Event()
    wf = lab.workflow(FLOW, workers=killable_workers(in_fix))
    run = wf.start(user_request="first request", folder=folder)
    run.run()
    wf.choose(run, "deep")
    threading.Thread(target=run.run, daemon=True).start()
    in_fix.wait(60)
    wf.sessions[run.id].sync()
    print(f"READY {run.id}", flush=True)
    threading.Event().wait(120)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
