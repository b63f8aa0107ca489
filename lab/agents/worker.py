"""`python -m lab.agents.worker JOB_FOLDER`: run one agent job in its own process.

The worker reads `request.json`, reports its progress line by line and writes its terminal to
`result.json` (see `files.py`); it never opens the store. It runs in its own session, so a
kernel restart does not stop it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from .files import JobFiles, process_identity
from .outcomes import error_json


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m lab.agents.worker JOB_FOLDER", file=sys.stderr)
        return 2
    files = JobFiles(argv[0])
    spec = files.read_json(files.request)
    files.write_json(files.worker, process_identity())
    files.append({"status": "PREPARING", "worker": process_identity()})
    try:
        from .runtime import load_target, run_request

        agent = load_target(spec["target"])
        files.append({"status": "RUNNING"})

        def emit(items: list[tuple[str, dict[str, Any]]]) -> None:
            for kind, payload in items:
                files.append({"kind": kind, "payload": payload})

        output, usage = asyncio.run(run_request(agent, spec["request"], emit))
    except Exception as exc:
        files.write_json(files.result, {"status": "FAILED", "error": error_json(exc, qualified=False)})
        return 1
    files.write_json(files.result, {"status": "SUCCEEDED", "output": output, "usage": usage})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
