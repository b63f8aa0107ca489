"""A worker process for the two-process gate test.

    python gate_worker.py DBPATH park             # start a mail run, answer the interrupt, park at the gate
    python gate_worker.py DBPATH approve RUN_ID NOTE   # resume it, approve with NOTE, run to the end

Each prints one JSON line describing what it saw, then closes the lab and exits.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab import Lab  # noqa: E402
from tests.integration import gate_graphs  # noqa: E402


def main(argv: list[str]) -> int:
    path, mode = argv[0], argv[1]
    lab = Lab(path)
    g = gate_graphs.declare_mail(lab)
    if mode == "park":
        run = g.start(gate_graphs.Draft(), state=gate_graphs.Mail())
        run.run()
        run.resume_with("eu")
        run.run()
        out = {"run_id": run.id, "status": run.status, "wait": run.wait.owner, "prompt": run.wait.prompt}
    elif mode == "approve":
        run = lab.resume(argv[2])
        before = {"status": run.status, "wait": run.wait.owner if run.wait else None, "details": run.wait.details}
        run.approve(note=argv[3])
        run.run()
        out = {**before, "final": run.status, "output": run.output}
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(out), flush=True)
    lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
