"""Starting the local Ray a batch runs on: the lab's options, the retry a busy machine needs, and
clearing away what a failed start left running.

On a busy machine Ray's start can miss its own fixed waits (Ray 2.60's raylet gives its agents 15 s
to write their port files, and the node 30 s to register) and fail. `ray.shutdown()` after such a
failure does not stop the head processes already started (the GCS server, the dashboard head, the
monitors): Ray never handed the half-made node to anyone. Each failed attempt then leaves four
Python processes running, which make the next attempt slower still. `start_ray` stops them.
"""

from __future__ import annotations

import logging
import os
import re
import signal
from typing import Any

from ..errors import LabError

TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster"
"""The start of the notice Ray logs at every `ray.init` (2.60) once it made an auth token: with
`configure_logging=False` it reached the cell as a red stderr block that reads like an error."""
TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"

SESSION = re.compile(rb"/session_\d{4}-\d\d-\d\d_[\d_-]+")
"""A Ray session's folder name as it appears in each of its processes' command lines."""


class _TokenNotice(logging.Filter):
    """Drops Ray's "token authentication is enabled" notice, and only that (issue 25 item 7)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(TOKEN_NOTICE)


def quiet_token_notice() -> None:
    """Keep Ray's token-authentication notice out of the notebook (the token stays in force; every
    other Ray log line, warnings included, still shows)."""
    logger = logging.getLogger(TOKEN_LOGGER)
    if not any(isinstance(f, _TokenNotice) for f in logger.filters):
        logger.addFilter(_TokenNotice())


def load_ray() -> Any:
    """The `ray` module, or a `LabError` that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise LabError(f"batch runs need Ray: pip install 'graph-lab[ray]' ({exc})") from None
    return ray


def ray_options(**extra: Any) -> dict[str, Any]:
    """How the lab starts Ray: quiet, no dashboard, and workers import what this process imports
    (a graph's classes from a module beside the notebook; notebook classes travel by value)."""
    import sys

    path = [os.getcwd(), *(p for p in sys.path if p and os.path.isdir(p))]
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(dict.fromkeys(path))}}
    return {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
        "runtime_env": env,
        **extra,
    }


def start_ray(*, attempts: int = 3, **extra: Any) -> None:
    """`ray.init` with the lab's options, tried again when a busy machine misses one of Ray's
    startup waits ("The current node timed out during startup", or a raylet that gave up on its
    agents); the processes a failed attempt started are stopped before the next."""
    import gc
    import warnings

    ray = load_ray()
    quiet_token_notice()
    # the raylet waits for its agents (slow to import on a busy machine) before it registers
    os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
    os.environ.setdefault("RAY_enable_metrics_collection", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # Popen handles Ray drops while they run
        for attempt in range(attempts):
            before = children()
            try:
                ray.init(**ray_options(**extra))
                break
            except Exception as exc:
                ray.shutdown()
                stop_sessions(children() - before)
                gc.collect()
                if attempt == attempts - 1 or not startup_missed(exc):
                    raise
        gc.collect()


def startup_missed(exc: BaseException) -> bool:
    """Whether a failed `ray.init` is worth another try: Ray missed one of its startup waits (its
    message then says the node "timed out during startup", also when the raylet died waiting for
    its agents' port files)."""
    return "timed out during startup" in str(exc)


def _processes() -> dict[int, tuple[int, bytes]]:
    """Every process this user can see: pid -> (parent pid, command line); empty without /proc."""
    seen: dict[int, tuple[int, bytes]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return seen
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        seen[int(name)] = (int(fields[1]), cmdline)
    return seen


def children() -> set[int]:
    """The pids of this process's children now."""
    me = os.getpid()
    return {pid for pid, (parent, _) in _processes().items() if parent == me}


def stop_sessions(started: set[int]) -> list[int]:
    """SIGKILL every process of the Ray sessions that the `started` children belong to (their
    command lines name the session folder): the head processes and any agent a dead raylet
    orphaned, and a started child run from Ray's package (its reaper). Other sessions on the
    machine, and children another thread started meanwhile, are left alone. Returns the pids
    signalled."""
    table = _processes()
    sessions = {m.group(0) for pid in started if pid in table for m in [SESSION.search(table[pid][1])] if m}
    ours = {pid for pid in started if pid in table and b"/ray/" in table[pid][1]}  # not a sibling thread's child
    doomed = ours | {pid for pid, (_, cmd) in table.items() if any(s in cmd for s in sessions)}
    doomed.discard(os.getpid())
    killed = []
    for pid in sorted(doomed):
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except OSError:
            continue
    for pid in killed:  # reap our own children so none stays a zombie
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return killed
