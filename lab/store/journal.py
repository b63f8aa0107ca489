"""An append-only journal of JSON lines: what makes a boundary durable cheaply.

One DuckDB transaction costs about a millisecond from Python, so committing one per station
would cost more than the station. Instead each boundary is one `os.write` of complete JSON
lines to a journal beside the database (the OS keeps it when the process is killed; `fsync`
keeps it across a power loss too). The store folds the journal into DuckDB in bulk with
`read_json` and truncates it; on open it replays whatever a dead process left behind.

A write is a transaction of one or more lines; its last line carries `"end": true`. On replay,
lines after the last complete transaction (a torn tail) are dropped: the settled event and its
checkpoint are written in one transaction, so both survive or neither does.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

__all__ = ("Journal", "ReplayReport")

log = logging.getLogger(__name__)

def _dumps(row: dict[str, Any]) -> bytes:
    """Compact JSON bytes; pydantic-core's encoder is several times faster than the stdlib's."""
    try:
        return to_json(row, fallback=str)
    except PydanticSerializationError:  # lone surrogates: the stdlib escapes them
        return json.dumps(row, separators=(",", ":"), default=str).encode()


class ReplayReport:
    """What `Journal.recover` found: complete lines kept and bytes of a torn tail dropped."""

    def __init__(self, lines: int, dropped_bytes: int, last_j: int):
        self.lines = lines
        self.dropped_bytes = dropped_bytes
        self.last_j = last_j


class Journal:
    """The journal file of one store. Not thread-safe: the store serialises access."""

    def __init__(self, path: str, *, fsync: bool = False):
        self.path = path
        self.fsync = fsync
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._next_j = 0
        self.pending_lines = 0
        """Lines written since the last fold."""

    def recover(self) -> ReplayReport:
        """Drop a torn tail left by a killed process; report how many complete lines remain."""
        with open(self.path, "rb") as f:
            data = f.read()
        good_end = 0
        pos = 0
        lines = kept = 0
        last_j = -1
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            raw = data[pos:nl]
            pos = nl + 1
            try:
                row = json.loads(raw)
            except ValueError:
                break
            lines += 1
            last_j = max(last_j, int(row.get("j", -1)))
            if row.get("end"):
                good_end = pos
                kept = lines
        dropped = len(data) - good_end
        if dropped:
            log.warning("journal %s: dropped a torn tail of %d bytes left by a killed process", self.path, dropped)
            os.ftruncate(self._fd, good_end)
        self._next_j = last_j + 1
        self.pending_lines = kept
        return ReplayReport(kept, dropped, last_j)

    def encode(self, rows: Iterable[dict[str, Any]]) -> bytes:
        """Number the rows and mark the last one as the end of its transaction."""
        if not isinstance(rows, list):
            rows = list(rows)
        parts: list[bytes] = []
        for i, row in enumerate(rows):
            row["j"] = self._next_j
            self._next_j += 1
            if i == len(rows) - 1:
                row["end"] = True
            parts.append(_dumps(row))
        parts.append(b"")
        return b"\n".join(parts)

    def write(self, blob: bytes, lines: int) -> None:
        """Append complete transactions; returns once the OS has them (and the disk, with fsync)."""
        view = memoryview(blob)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if self.fsync:
            os.fsync(self._fd)
        self.pending_lines += lines

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def truncate(self) -> None:
        """Forget what has been folded into the database."""
        os.ftruncate(self._fd, 0)
        if self.fsync:
            os.fsync(self._fd)
        self.pending_lines = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
