"""`python -m lab.agents.worker JOB_FOLDER`: run one agent job in its own process.

The worker reads `request.json`, reports its progress line by line and writes its terminal to
`result.json` (see `files.py`); it never opens the store. Its agent's model requests are recorded
to `calls.ndjson` and replayed from the recordings `request.json` carries (`worker_calls.py`). It runs in its own session, so a
kernel restart does not stop it. A lab's fork server (`forkserver.py`) runs `run_job` in a
process it forked, with the lab and pydantic-ai imported already.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from .files import JobFiles, process_identity
from .outcomes import error_json

__all__ = ("main", "run_job")


def run_job(folder: str, server: dict[str, Any] | None = None) -> int:
    """Run the job in `folder` in this process; `server` is the fork server that forked it, if any."""
    files = JobFiles(folder)
    spec = files.read_json(files.request)
    identity = {**process_identity(), **({"server": server} if server else {})}
    files.write_json(files.worker, identity)
    files.append({"status": "PREPARING", "worker": identity})
    try:
        from .runtime import load_target, run_request

        agent = load_target(spec["target"])
        files.append({"status": "RUNNING"})

        def emit(items: list[tuple[str, dict[str, Any]]]) -> None:
            for kind, payload in items:
                files.append({"kind": kind, "payload": payload})

        async def run() -> tuple[Any, dict[str, Any]]:
            from .worker_calls import recording_worker

            async with recording_worker(agent, spec.get("recording"), folder):  # replays, records (docs/replay.md)
                return await run_request(agent, spec["request"], emit)

        output, usage = asyncio.run(run())
    except Exception as exc:
        files.write_json(files.result, {"status": "FAILED", "error": error_json(exc, qualified=False)})
        return 1
    files.write_json(files.result, {"status": "SUCCEEDED", "output": output, "usage": usage})
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m lab.agents.worker JOB_FOLDER", file=sys.stderr)
        return 2
    return run_job(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
