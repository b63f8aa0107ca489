"""A worker process for the crash and fault tests: start, resume, or hold a store open.

    python worker.py DBPATH start            # prints the run id on a line, runs to End
    python worker.py DBPATH resume RUN_ID    # prints the run id on a line, runs to End
    python worker.py DBPATH hold             # opens the Lab, prints READY, waits for stdin EOF
    python worker.py DBPATH hold-raw         # holds the file with a plain duckdb connection (not a Lab)

`start` and `resume` print `OUTPUT <json>` once the run is done, then close the lab. The first
line is printed (and flushed) only once the run is durably created or resumed, so a parent that
reads it knows every later SIGKILL lands inside the run.

`GRAPHLAB_TEST_FSYNC=1` opens the store with `fsync=True` (the in-place journal).

Fault hooks (environment variables, for the kill-during-fold tests; they patch nothing on disk):

    GRAPHLAB_TEST_FOLD_EVERY=N        fold the journal into DuckDB every N journal lines
    GRAPHLAB_TEST_DIE_IN_FOLD=K:WHERE SIGKILL this process inside the K-th fold that has work:
                                      WHERE=mid    after the first INSERT, before COMMIT
                                      WHERE=after  after COMMIT, before the journal is truncated
"""

from __future__ import annotations

import json
import os
import signal
import sys

# Import the graph module under the same name the tests use (`tests.integration.graphs_for_tests`):
# the manifest names the state type by module and qualname, so the name is part of the digest.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab import Lab  # noqa: E402
from tests.integration import graphs_for_tests  # noqa: E402


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _install_fault_hooks(lab: Lab) -> None:
    every = os.environ.get("GRAPHLAB_TEST_FOLD_EVERY")
    if every:
        lab.store.fold_every = int(every)
    spec = os.environ.get("GRAPHLAB_TEST_DIE_IN_FOLD")
    if not spec:
        return
    k_text, where = spec.split(":")
    k = int(k_text)
    from lab.store import duckdb_store, journal

    if where == "mid":
        statements = list(duckdb_store.FOLD_STATEMENTS)
        assert statements, "FOLD_STATEMENTS is empty; the fold hook needs updating"
        folds = [0]

        class DieMidFold(list):
            def __iter__(self):
                folds[0] += 1
                yield statements[0]
                if folds[0] == k:
                    _die()
                yield from statements[1:]

        duckdb_store.FOLD_STATEMENTS = DieMidFold(statements)
    elif where == "after":
        truncate = journal.Journal.truncate
        calls = [0]

        def die_before_truncate(self):
            calls[0] += 1
            if calls[0] == k:
                _die()
            truncate(self)

        journal.Journal.truncate = die_before_truncate
    else:
        raise SystemExit(f"unknown GRAPHLAB_TEST_DIE_IN_FOLD place {where!r}")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in ("start", "resume", "hold", "hold-raw"):
        print(__doc__, file=sys.stderr)
        return 2
    path, mode = argv[0], argv[1]
    if mode == "hold-raw":  # what an older Graph Lab, or a duckdb session, does: keep the file open
        import duckdb

        con = duckdb.connect(path)
        print("READY", flush=True)
        sys.stdin.read()
        con.close()
        return 0
    lab = Lab(path, durability="step", fsync=os.environ.get("GRAPHLAB_TEST_FSYNC") == "1")
    if mode == "hold":
        print("READY", flush=True)
        sys.stdin.read()
        lab.close()
        return 0
    _install_fault_hooks(lab)
    graphs_for_tests.declare(lab)
    if mode == "start":
        g = lab.graphs[graphs_for_tests.GRAPH]
        run = g.start(graphs_for_tests.entry(), state=graphs_for_tests.State(), durability="step")
    else:
        if len(argv) < 3:
            print("resume needs a RUN_ID", file=sys.stderr)
            return 2
        run = lab.resume(argv[2])
    print(run.id, flush=True)
    if run.status != "done":
        run.run()
    print("OUTPUT", json.dumps(run.output), flush=True)
    lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
