"""One thread per process that lets go of each store's file once another process waits or it lingered.

Why one thread for every store, started once: a thread started per lease cost each `Lab(path)` a
thread start, waited for: ~0.2 ms, and tens of ms under load, when the new thread waits for a CPU.
The thread sleeps on an event while no store of the process keeps its file attached.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Protocol

__all__ = ("WATCH_EVERY", "Watched", "watch")

WATCH_EVERY = 0.01
"""Seconds between looks for another process waiting for a file, while a store of this process keeps it."""


class Watched(Protocol):
    """A store whose file the thread lets go of (duckdb_files.py's `FileLease`)."""

    def watch_tick(self) -> bool:
        """Let go of the file if it is time; False once the file is let go (or the store closed)."""
        ...

    def watch_done(self) -> bool:
        """The file is let go (or the store closed): nothing more to watch until the next lease."""
        ...


_stores: weakref.WeakSet[Watched] = weakref.WeakSet()
_lock = threading.Lock()
_wake = threading.Event()
_pid = 0
"""The process whose thread runs (0: none yet; a forked child starts its own)."""


def _after_fork() -> None:
    """A forked child watches none of its parent's stores (their instances are the parent's) and has no thread."""
    global _lock, _wake, _pid
    _stores.clear()
    _lock, _wake, _pid = threading.Lock(), threading.Event(), 0


os.register_at_fork(after_in_child=_after_fork)


def watch(store: Watched) -> None:
    """Look at `store` every WATCH_EVERY s until its file is let go (call once it is attached)."""
    global _pid
    with _lock:
        _stores.add(store)
        if _pid != os.getpid():
            _pid = os.getpid()
            threading.Thread(target=_run, name="graphlab-store-watcher", daemon=True).start()
    _wake.set()


def _run() -> None:
    while True:
        _wake.clear()
        with _lock:
            idle = not _stores
        if idle:
            _wake.wait()
            continue
        time.sleep(WATCH_EVERY)
        with _lock:
            stores = list(_stores)  # strong references only between two sleeps: a dropped store is collected
        store = None
        for store in stores:
            if not store.watch_tick():
                with _lock:  # a lease taken again since then is watched on (`watch` waits for this lock)
                    if store.watch_done():
                        _stores.discard(store)
        del stores, store
