"""What an in-process agent job observes while it runs (messages, usage), recorded in few commits.

Each job-table commit costs about a millisecond or more on a DuckDB file (PostgreSQL: a round
trip), while a fast agent emits after every step. So observations are held for at most `EVERY`
seconds: a later emission past that, or a timer, records them; whatever is held when the job
ends rides with its terminal, in that one transaction (issue 27 item 4). A person watching a
long job sees its messages at most `EVERY` seconds late. A job a delegated station started here
holds its admission (ADMITTED, PREPARING, RUNNING) the same way, recorded before its observations.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

__all__ = ("EVERY", "Observations")

EVERY = 0.05
"""The longest an observation is held before it is recorded (seconds)."""

Item = tuple[str, dict[str, Any]]
Move = tuple[str, Any, bool, Any, dict[str, Any]]


class Observations:
    """A job's observations not yet recorded, and its admission's moves when those are held too
    (`board.admit(deferred=True)`); `record(moves, items)` writes a batch (one transaction)."""

    def __init__(self, record: Callable[[list[Move], list[Item]], None], moves: list[Move] | None = None):
        self._record = record
        self._held: list[Item] = []
        self._moves: list[Move] = list(moves or [])
        self._since = time.monotonic()
        self._timer: asyncio.TimerHandle | None = None
        if self._moves:  # the admission is recorded within EVERY even if the agent emits nothing
            self._timer = asyncio.get_running_loop().call_later(EVERY, self.flush)

    def emit(self, items: list[Item]) -> None:
        """The agent's `emit` callback (on the loop the job runs on)."""
        self._held.extend(items)
        if time.monotonic() - self._since >= EVERY:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(EVERY, self.flush)

    def flush(self) -> None:
        """Record what is held now (a timer's call, a late emission, or a cancel about to be recorded)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._since = time.monotonic()
        held, self._held = self._held, []
        moves, self._moves = self._moves, []
        if held or moves:
            self._record(moves, held)

    def take(self) -> tuple[list[Move], list[Item]]:
        """What is held (moves, observations), to ride with the job's terminal; nothing is recorded later."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        held, self._held = self._held, []
        moves, self._moves = self._moves, []
        return moves, held
