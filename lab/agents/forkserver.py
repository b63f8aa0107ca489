"""`python -m lab.agents.forkserver`: import the lab and pydantic-ai once, then fork one process per job.

A lab keeps one such server per store (lab/agents/workers.py starts it on the first subprocess
job and replaces it when it died). The lab writes one JSON line per job on the server's stdin (the
job's folder, and the lab's environment and working directory as of that job: a pipe, never a
file, since the environment may hold API keys); the server forks a child, writes the child's identity to the folder's
`worker.json`, and the child runs the job exactly as `python -m lab.agents.worker FOLDER` would
(`worker.run_job`), in its own session, so a kernel restart does not stop it. When the server
reaps a child it writes `exit.json` (its exit code, or minus the signal that killed it).

What a forked job shares with the next: only what the server imported before it forked (the lab,
pydantic-ai, their import-time state). Every job has its own process, pid, memory, event loop and
session; the agent's module (`target`) is imported in the child, per job, so an edit to it takes
effect for the next job as with a fresh interpreter. When its stdin closes (the lab process is
gone) the server exits; the jobs it forked run on.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import traceback
from typing import Any

__all__ = ("WARM_IMPORTS", "main")

WARM_IMPORTS = ("lab", "lab.agents.worker", "lab.agents.runtime", "lab.agents.approvals", "pydantic_ai", "pydantic_ai.models.function")
"""What the server imports once, before it forks any job (the ~1-3 s a fresh worker pays per job)."""


def _child(job: dict[str, Any], server: dict[str, Any]) -> None:
    """In the forked child: its own session, the lab's environment and working directory as of this job,
    stdin from /dev/null, output to the job's log; run the job; exit."""
    code = 1
    folder = job["folder"]
    try:
        os.setsid()
        os.environ.clear()
        os.environ.update(job.get("env") or {})
        os.chdir(job.get("cwd") or folder)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        log = os.open(os.path.join(folder, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        from .worker import run_job

        code = run_job(folder, server=server)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _fork(job: dict[str, Any], server: dict[str, Any], children: dict[int, str]) -> None:
    from .files import JobFiles, identity_of

    folder = job["folder"]
    files = JobFiles(folder)
    try:
        pid = os.fork()
    except OSError as exc:
        files.write_json(files.result, {"status": "FAILED", "error": {"type": "OSError", "message": f"fork failed: {exc}"}})
        return
    if pid == 0:
        _child(job, server)
    children[pid] = folder
    files.write_json(files.worker, {**identity_of(pid), "server": server})  # the child writes the same (a race either wins)


def _reap(children: dict[int, str]) -> None:
    from .files import JobFiles

    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        folder = children.pop(pid, None)
        if folder is not None and os.path.isdir(folder):  # not when a cancel's cleanup removed it
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            try:
                files = JobFiles(folder)
                files.write_json(files.exit, {"pid": pid, "code": code})
            except OSError:
                pass  # the folder was removed (a cancel's cleanup)


def main() -> int:
    import importlib

    for name in WARM_IMPORTS:
        importlib.import_module(name)
    from .files import process_identity

    server = process_identity()
    children: dict[int, str] = {}
    buffer = b""
    stdin = sys.stdin.fileno()
    print(json.dumps({"ready": server}), flush=True)
    while True:
        ready, _, _ = select.select([stdin], [], [], 0.05 if children else None)
        _reap(children)
        if not ready:
            continue
        chunk = os.read(stdin, 65536)
        if not chunk:  # the lab process is gone (or let go of this server): the forked jobs run on
            return 0
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                _fork(json.loads(line), server, children)


if __name__ == "__main__":
    sys.exit(main())
