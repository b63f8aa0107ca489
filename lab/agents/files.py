"""A subprocess job's folder: how a worker hands its progress and result to any lab process.

    <store>.jobs/<request_id>/request.json     what to run and what its station may replay (written before the spawn)
                              worker.json      the worker's pid, host and process start time
                              progress.ndjson  PREPARING, RUNNING, agent messages, usage: one JSON line each
                              calls.ndjson     the agent's recorded model calls, one complete JSON line each
                                               (worker_calls.py: adopted as rows of `calls` with the result)
                              result.json      the worker's terminal (SUCCEEDED or FAILED), written atomically
                              exit.json        a forked worker's exit code, written by the fork server that reaped it

The worker never touches the store: it needs no DuckDB lock, so it finishes while the kernel
that started it restarts, and whichever lab process opens the store next adopts `result.json`
(the store's conditional update lets exactly one adoption win, however many processes look).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

__all__ = ("JobFiles", "process_identity", "identity_of", "alive")


class JobFiles:
    """The files of one subprocess job."""

    def __init__(self, folder: str | os.PathLike[str]):
        self.folder = Path(folder)

    @property
    def request(self) -> Path:
        """What to run, and the recordings its station may replay with the run's replay mode (`recording`)."""
        return self.folder / "request.json"

    @property
    def worker(self) -> Path:
        return self.folder / "worker.json"

    @property
    def progress(self) -> Path:
        return self.folder / "progress.ndjson"

    @property
    def calls(self) -> Path:
        return self.folder / "calls.ndjson"

    @property
    def result(self) -> Path:
        return self.folder / "result.json"

    @property
    def exit(self) -> Path:
        return self.folder / "exit.json"

    def write_json(self, path: Path, data: Any) -> None:
        """Atomically: a reader sees the whole file or none of it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def read_json(self, path: Path) -> Any:
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def append(self, line: dict[str, Any]) -> None:
        with open(self.progress, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()

    def progress_lines(self, start: int) -> list[dict[str, Any]]:
        """Complete progress lines from line `start` on (a line still being written is left for later)."""
        try:
            with open(self.progress, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return []
        lines = text.split("\n")[:-1]  # the last piece has no newline yet (or is empty)
        return [json.loads(x) for x in lines[start:] if x.strip()]


def _start_time(pid: int) -> str | None:
    """The kernel's start time of process `pid` (so a reused pid is not taken for the worker), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":  # a zombie has finished
        return None
    return fields[19]


_mine: tuple[int, dict[str, Any]] | None = None
"""This process's identity, read once per pid (a fork reads its own): a delegated station names it three times."""


def process_identity() -> dict[str, Any]:
    """This process: pid, host and start time (a copy: callers put it into rows)."""
    global _mine
    pid = os.getpid()
    if _mine is None or _mine[0] != pid:
        _mine = (pid, identity_of(pid))
    return dict(_mine[1])


def identity_of(pid: int) -> dict[str, Any]:
    """Process `pid` of this host: pid, host and start time."""
    return {"pid": pid, "host": socket.gethostname(), "start": _start_time(pid)}


def alive(identity: dict[str, Any] | None) -> bool | None:
    """Whether the process `identity` names still runs: None when it is on another host (unknown here)."""
    if not identity or "pid" not in identity:
        return False
    if identity.get("host") != socket.gethostname():
        return None
    start = _start_time(int(identity["pid"]))
    if start is None:
        return False
    return identity.get("start") in (None, start)
