"""The process test_matrix_kill.py kills: it starts a kind's `slow` run and runs it until killed.

    python kill_worker.py DBPATH KIND ENTERED [TIMEOUT_FIRST]

Opens ``Lab(DBPATH)`` (a real DuckDB file), builds the case's ``slow`` variant with
``Slow(entered=ENTERED)`` (no release: the slow station waits until the process dies), starts
the run, prints its id on a line of its own and runs it. The slow station creates ENTERED when
it starts; the test SIGKILLs this process then. With TIMEOUT_FIRST (seconds) the worker first
runs the run with that timeout (it fails with `RunTimeout`, the slow station cancelled), removes
ENTERED, writes ``ENTERED.timed-out`` (the run's status) and runs it again.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab import Lab  # noqa: E402
from tests.matrix.cases import Slow, case_named  # noqa: E402


def main(argv: list[str]) -> int:
    path, kind, entered, *first = argv
    case = case_named(kind)
    lab = Lab(path)
    graph = case.build(lab, "slow", slow=Slow(entered=entered))
    run = case.start(graph)
    print(run.id, flush=True)
    if first:
        run.run(timeout=float(first[0]))
        os.remove(entered)
        with open(entered + ".timed-out", "w") as f:
            f.write(run.status)
    run.run()  # never returns: the slow station waits for a release that never comes
    print(f"the slow run of {kind} ended without being killed: {run.status}", file=sys.stderr, flush=True)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
