"""Which try of a station a failure was: `attempt` in a failure's record and `NodeExecutionError`.

An event's `attempt` column correlates an `entered` event with its settlement: it is the
sequence number of the `entered` event (`entered_seq` in a failure's record), not a count. The
try number counts from 1 at the station's checkpoint: every earlier try from that head that
failed (a retry policy's `retry` event, or a `failed` event before `run.retry()`) adds one
(issue 25 item 6).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .errors import StoreError
from .records import EventRecord

__all__ = ("try_number", "wait_attempt")


def try_number(
    read_events: Callable[[], Iterable[EventRecord]], node_id: str | None, head: int | None, *, seen: int = 0
) -> int:
    """The try of `node_id` from checkpoint `head` that is failing now (1 for the first).

    The events are read from the store; when the store cannot be read (a full disk fails the
    fold too), the count falls back to `seen`, the failed tries this call made itself, so
    recording the failure never fails on reading it.
    """
    try:
        events = read_events()
    except StoreError:
        return seen + 1
    earlier = 0
    for ev in events:
        if ev.node_id != node_id or ev.checkpoint_seq != head:
            continue
        if (ev.kind == "failed" and ev.attempt is not None) or (ev.kind == "retry" and (ev.payload or {}).get("by") == "policy"):
            earlier += 1
    return earlier + 1


def wait_attempt(read_events: Callable[[], Iterable[EventRecord]], owner: str) -> int | None:
    """The attempt of the station try that parked on wait `owner` (its `waiting` event's): the answer's
    `verdict` event carries it, so a grant names the attempt it admits (seed 001 "Dispatch adds its grant
    event ... events retain the station-attempt correlation"). None when the store cannot be read."""
    try:
        events = read_events()
    except StoreError:
        return None
    return next((ev.attempt for ev in events if ev.kind == "waiting" and (ev.payload or {}).get("owner") == owner), None)
