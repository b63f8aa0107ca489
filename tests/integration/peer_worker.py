"""A second (third ...) Graph Lab process that the many-process tests drive line by line.

    python -m tests.integration.peer_worker DBPATH [fsync]

Opens `Lab(DBPATH)`, declares the counter graph (`graphs_for_tests`) and the mail graph with an
`interrupt()` and a gate (`gate_graphs`), prints `{"ready": pid}`, then reads one JSON string of
Python per line, runs it with `lab` (and whatever earlier lines defined) in scope, and answers
one JSON line: `{"out": <the value bound to out>}` or `{"error": type name, "message": text}`.
The same source in every process gives the same graph revisions, so runs move between them.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from lab import Lab
from tests.integration import gate_graphs, graphs_for_tests


def main(argv: list[str]) -> int:
    lab = Lab(argv[0], fsync=argv[1:] == ["fsync"])
    scope: dict[str, object] = {
        "lab": lab,
        "counter": graphs_for_tests.declare(lab),
        "mail": gate_graphs.declare_mail(lab),
        "State": graphs_for_tests.State,
        "Inc": graphs_for_tests.Inc,
        "Mail": gate_graphs.Mail,
        "Draft": gate_graphs.Draft,
        "os": os,
    }
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        scope.pop("out", None)
        try:
            exec(json.loads(line), scope)  # noqa: S102 - the test drives this process
            reply = {"out": scope.get("out")}
        except Exception as exc:  # the test asserts on the error
            reply = {"error": type(exc).__name__, "message": str(exc), "trace": traceback.format_exc()}
        print(json.dumps(reply, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
