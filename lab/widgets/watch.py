"""A run view's watch: a thread that follows what another process writes to the shown run.

It looks at the store every `WATCH_EVERY` seconds while the run waits (an answer may come from
another kernel) or another process advances it, and redraws the view when something changed.
When the lab closes it redraws the view once, which then says so and offers nothing (issue 25
item 2), and ends. It holds the view weakly: a view that is gone stops it too.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .run_widget import RunWidget

__all__ = ("WATCH_EVERY", "watch")

log = logging.getLogger(__name__)

WATCH_EVERY = 0.5
"""Seconds between looks at the store for what another process wrote to a shown run."""


def watch(view: RunWidget) -> None:
    """Follow a run another process advances (or an answer given elsewhere) while the view lives.

    A daemon thread that holds the view weakly: it ends when the view is collected or the store
    closes. A run this process advances changes here only through its own events.
    """
    ref = weakref.ref(view)
    run = view.run

    def loop() -> None:
        while True:
            time.sleep(WATCH_EVERY)
            w = ref()
            if w is None:
                return
            if run.lab.store.closed:  # say so once: the view offers nothing it cannot do
                with contextlib.suppress(Exception):
                    w.refresh()
                return
            if run.writer is None and run.status != "waiting":
                del w
                continue
            try:
                w.poll()
            except Exception:  # a view never breaks the run it shows; the next look tries again
                log.debug("run view of %s could not poll the store", run.id, exc_info=True)
            del w

    threading.Thread(target=loop, name=f"graphlab-watch-{run.id}", daemon=True).start()
