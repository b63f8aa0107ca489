"""Starting a subprocess job's worker: forked from a warm fork server, one per store (docs/agents.md).

A fresh `python -m lab.agents.worker` pays a Python start and the import of the lab and
pydantic-ai (~1-3 s) per job. Instead the lab keeps one fork server per store and environment
(`forkserver.py`): started on the first subprocess job, reused for the next, replaced when it
died, let go of once its store is closed. Each job still gets its own process (forked, in its own
session), so what the lab promises a worker holds as before: its pid is what `worker.json`
records, a SIGKILL of it makes the job LOST, a cancel kills and reaps it, and it outlives a
kernel restart. A platform without `os.fork` starts a fresh worker per job.

`start_worker` returns a handle the board watches like a `subprocess.Popen`: `poll()`,
`kill()`, `returncode`.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from .files import JobFiles, alive

__all__ = ("ForkServer", "ForkedJob", "start_worker", "exit_description", "worker_env", "stop_servers")

REAP_GRACE = 2.0
"""Seconds a forked job's process may be seen dead before its live server writes its exit code."""

_servers: dict[tuple[str, ...], ForkServer] = {}
_retired: list[subprocess.Popen[bytes]] = []
_lock = threading.Lock()


def worker_env() -> dict[str, str]:
    """The environment of a worker: this process's, with the working directory and sys.path on PYTHONPATH."""
    env = dict(os.environ)
    paths = [os.getcwd(), *[p for p in sys.path if p and os.path.isdir(p)]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


class ForkServer:
    """One `python -m lab.agents.forkserver` of this lab process, for one store's job folder."""

    def __init__(self, folder: str, env: dict[str, str], closed: Callable[[], bool]):
        os.makedirs(folder, exist_ok=True)
        self.closed = closed
        with open(os.path.join(folder, "forkserver.log"), "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "lab.agents.forkserver"],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,  # a kernel restart does not stop it (nor the jobs it forked)
            )  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    def submit(self, folder: str, env: dict[str, str]) -> bool:
        """Ask the server to fork the job in `folder` with `env` and this working directory; False when it is gone."""
        if self.proc.poll() is not None or self.proc.stdin is None:
            return False
        try:
            line = json.dumps({"folder": folder, "env": env, "cwd": os.getcwd()})
            self.proc.stdin.write(line.encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except OSError:
            return False
        return True

    def stop(self) -> None:
        """Let go: the server exits once its stdin closes; the jobs it forked run on."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        _retired.append(self.proc)


class ForkedJob:
    """A job's process forked by a `ForkServer`, watched like a `Popen`."""

    def __init__(self, files: JobFiles, server: ForkServer):
        self.files = files
        self.server = server
        self.returncode: int | None = None
        self._identity: dict[str, Any] | None = None
        self._dead_since: float | None = None

    def identity(self) -> dict[str, Any] | None:
        if self._identity is None:
            self._identity = self.files.read_json(self.files.worker)
        return self._identity

    def poll(self) -> int | None:
        """None while the job's process may run; else its exit code (-1 when only its death is known)."""
        if self.returncode is not None:
            return self.returncode
        exited = self.files.read_json(self.files.exit)
        if isinstance(exited, dict):
            self.returncode = int(exited["code"])
            return self.returncode
        server_alive = self.server.proc.poll() is None
        identity = self.identity()
        if identity is None:  # not forked yet: it is pending while its server lives
            if server_alive:
                return None
        elif alive(identity) is not False:
            return None
        elif server_alive:  # dead, not reaped yet: its server writes its exit code in a moment
            self._dead_since = self._dead_since or time.monotonic()
            if time.monotonic() - self._dead_since < REAP_GRACE:
                return None
        self.returncode = -1
        return self.returncode

    def kill(self) -> None:
        deadline = time.monotonic() + REAP_GRACE
        while self.identity() is None and self.server.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # the server writes the pid right after it forks
        if self.identity() is None and self.server.proc.poll() is None:
            self.server.proc.kill()  # it took the job but did not fork it: it never will now (the next job replaces it)
            self.server.proc.wait(timeout=REAP_GRACE)
            self._identity = None  # it may have forked the job as it died: the child's own worker.json says so
        identity = self.identity()
        if identity is not None and alive(identity):
            try:
                os.kill(int(identity["pid"]), signal.SIGKILL)
            except ProcessLookupError:
                pass


def exit_description(proc: Any) -> str:
    """How a worker ended, as a LOST job's message says it."""
    code = getattr(proc, "returncode", None)
    if code is None or (isinstance(proc, ForkedJob) and code == -1):
        return "exit code unknown"
    return f"killed by signal {-code}" if code < 0 else f"exited with {code}"


def _server_for(folder: str, env: dict[str, str], closed: Callable[[], bool]) -> ForkServer:
    key = (folder, sys.executable, env.get("PYTHONPATH", ""), os.getcwd())
    with _lock:
        for k, srv in list(_servers.items()):  # a closed store's server, or a dead one, is let go
            if srv.closed() or srv.proc.poll() is not None:
                srv.stop()
                del _servers[k]
        _retired[:] = [p for p in _retired if p.poll() is None]
        srv = _servers.get(key)
        if srv is None:
            srv = _servers[key] = ForkServer(folder, env, closed)
        return srv


def start_worker(files: JobFiles, store_folder: str, closed: Callable[[], bool]) -> Any:
    """Start the worker of the job in `files` (its request.json written): a `ForkedJob`, or a `Popen`
    where there is no fork. Raises OSError when no process can be started."""
    env = worker_env()
    if hasattr(os, "fork"):
        for _ in range(2):  # a server found dead as the job is handed over is replaced once
            srv = _server_for(store_folder, env, closed)
            if srv.submit(str(files.folder), env):
                return ForkedJob(files, srv)
    with open(files.folder / "worker.log", "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "lab.agents.worker", str(files.folder)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,  # a kernel restart does not stop the worker
        )  # fmt: skip


def stop_servers() -> None:
    """Let go of every fork server of this process (at exit their stdin closes anyway)."""
    with _lock:
        for srv in _servers.values():
            srv.stop()
        _servers.clear()


def _at_exit() -> None:
    """Let go of the servers and give each a moment to exit (its stdin closed), so none outlives
    this interpreter unreaped; a job a server forked runs on either way."""
    stop_servers()
    deadline = time.monotonic() + 2.0
    for proc in _retired:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass


atexit.register(_at_exit)
