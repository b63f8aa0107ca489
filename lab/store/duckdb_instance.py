"""The private DuckDB instance a DuckDB store works in, kept for the next store once one closes.

Why: creating an instance costs ~15 ms (DuckDB builds the catalog of its built-in functions and of
its statically linked extensions), as much as the rest of opening a store. A process that opens
stores one after another (the tests, a notebook that calls `Lab()` again after `lab.close()`)
reuses one. A store still has an instance to itself for its whole life: an instance is lent to one
store at a time, so a global setting (`fsync_mode`, duckdb_jobs.py) never reaches another store.
The store gets a new connection on it (temp tables, `USE` and transactions are per connection),
and an instance is kept only as it was lent: its store's databases detached (DETACH checkpoints,
synced), its default database empty, `fsync_mode` 'standard'. Anything else closes it.
"""

from __future__ import annotations

import os
import threading

import duckdb

__all__ = ("Instance", "lend", "give_back", "KEEP", "TEMPLATE")

MEMORY = ":memory:"
CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
"""Every connection: no extension is installed or loaded behind the user's back (json is built in)."""
KEEP = 1
TEMPLATE = "graphlab_schema"
"""An empty database with the store's tables, kept with the instance: a new store copies it (duckdb_schema.py)."""
"""Idle instances kept per process (a store open at a time is the usual case)."""

_LOOK = (
    f"SELECT list(database_name) FILTER (WHERE database_name NOT IN ('memory', '{TEMPLATE}')), "
    "(SELECT count(*) FROM duckdb_tables() WHERE database_name = 'memory') FROM duckdb_databases() WHERE NOT internal"
)
"""What a store left in its instance: the databases to detach (all but the template), and the tables in the default one (none)."""

Instance = duckdb.DuckDBPyConnection
"""An instance's own connection: it keeps the instance alive while idle and closes it."""

_idle: list[Instance] = []
_pid = os.getpid()
_lock = threading.RLock()
"""Re-entrant: a store collected while this thread holds it (a finalizer run by the GC) gives its instance back."""
_inherited: list[Instance] = []
"""Instances a forked child inherited: never used (their threads are the parent's) nor closed."""


def _forget_after_fork() -> None:
    global _pid
    _inherited.extend(_idle)
    _idle.clear()
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forget_after_fork)


def lend() -> tuple[Instance, duckdb.DuckDBPyConnection]:
    """An idle instance (or a new one) for one store, and a new connection on it for the store to use."""
    with _lock:
        root = _idle.pop() if _idle else None
    if root is None:
        root = duckdb.connect(MEMORY, config=CONFIG)
    try:
        return root, root.cursor()
    except BaseException:
        root.close()
        raise


def give_back(root: Instance, con: duckdb.DuckDBPyConnection) -> None:
    """Detach what the store attached (synced), close its connection, and keep the instance if it is clean.

    A DETACH that fails (a full disk at its checkpoint) closes the instance instead, which
    checkpoints the file once more, as closing a store always did.
    """
    clean = False
    try:
        try:
            con.execute("ROLLBACK")  # an error left a transaction open
        except duckdb.Error:
            pass
        con.execute("SET fsync_mode = 'standard'")  # a DETACH may checkpoint: never unsynced
        con.execute("USE memory")
        attached, tables = con.execute(_LOOK).fetchone()
        for name in attached or ():
            con.execute(f'DETACH "{name}"')
        clean = tables == 0
    except duckdb.Error:
        clean = False
    try:
        con.close()
    except duckdb.Error:
        clean = False
    with _lock:
        if clean and os.getpid() == _pid and len(_idle) < KEEP:
            _idle.append(root)
            return
    root.close()
