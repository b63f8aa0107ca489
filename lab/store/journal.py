"""An append-only journal of JSON lines: what makes a boundary durable cheaply.

One DuckDB transaction costs about a millisecond from Python, so committing one per station
would cost more than the station. Instead each boundary is one `os.write` of complete JSON
lines to a journal beside the database (the OS keeps it when the process is killed; `fsync`
keeps it across a power loss too). The store folds the journal into DuckDB in bulk with
`read_json` and truncates it; on open it replays whatever a dead process left behind.

A write is a transaction of one or more lines: every line carries `tx` (the `j` of the
transaction's first line) and the last one `"end": true`. On replay only a genuine tail (lines
after the last complete transaction) is dropped: the settled event and its checkpoint are one
transaction, so both survive or neither does. Damage *before* a complete transaction is never
dropped silently: it is a `JournalDamagedError` naming the line, and `salvage` keeps the
complete transactions on both sides.

Faults (each leaves the journal well-formed, never a torn line in the middle):
- a write that fails part-way (disk full, file too large) is cut back to the last complete
  transaction before the error is raised, so the failed bytes are never followed by more;
- a journal deleted (or replaced, or changed by another program) while open is detected by the
  next checked write, which fails, and so does every write after it. Every write is checked
  except two kinds that ride on a check made moments before: an `entered` event alone (the
  boundary write that follows it is checked), and a boundary inside a running drive (a held
  settlement with the next station's `entered`, `hot=True`) less than `CHECK_EVERY` (1 ms)
  after the last check. So the damage is refused at the latest by the last write of the call
  that meets it (`run.step()` and `run.run()` end with a checked write: the settlement they
  report), and inside a long drive by the first boundary 1 ms after the last check; a boundary
  written in that window went to the same open file, which the store still folds on close. The
  check is an `fstat`, a system call: in a 60 µs station it cost more wall time than its
  instructions show (docs/benchmarks.md, "step27");
- a string the database cannot hold (a lone surrogate, as `os.fsdecode` makes of undecodable
  file names) is escaped in event payloads and errors, which are observations, and refused
  anywhere else (state, output, next stations), naming the field: it is never written.

With `fsync=True` the journal is written in place (`Journal.write_in_place`): the file keeps a
zero-filled, synced region beyond its data, and a boundary is one `pwrite` at the data end and one
`fdatasync` that carries no metadata (no size change, no block allocated; its file check leaves the
times unread, so the write changes the inode only when the coarse clock ticked: file_check.py). So
every reader takes a journal's data to end at its first NUL byte: JSON text never holds a raw NUL
(the encoders write `\u0000`), so the zeros are padding, never damage. Non-zero bytes after that NUL
can only be the remains of a write that never completed before a power loss (in place, the disk may
keep any of its blocks); they are dropped like a torn tail, with a warning, and zeroed by the next
owner.

How a row becomes a line (orjson or pydantic-core, `Encoded` JSON text written as it is, what is
refused) is journal_lines.py's; `Encoded`, `UnstorableValueError`, `dumps` and `string_at` are
imported from here too.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import StoreError
from .file_check import FileCheck
from .journal_lines import Encoded, UnstorableValueError, dumps, encode_rows, string_at

__all__ = (
    "Encoded", "Journal", "JournalDamagedError", "ReplayReport", "UnstorableValueError", "dumps", "read_data", "scan",
    "salvage_lines", "string_at",
)  # fmt: skip

log = logging.getLogger(__name__)

_monotonic = time.monotonic
PAD_STEP = 1 << 20
"""The least the zero-filled region of an in-place journal grows by (bytes): each growth is one
`fdatasync` with metadata, so about one per 1,000 boundaries of 1 KB at first."""
PAD_STEP_MAX = 1 << 26
"""The most it grows by at once: it doubles the file up to this (a fold rewinds the data to the
start, so the file settles at the largest journal between two folds)."""
_ZEROS = bytes(1 << 20)
_SECTOR = 512
_HEADROOM = 1 << 16
"""A checked (boundary) write grows the zeros when fewer than this would be left, so the small
unchecked `entered` write before a station practically never grows them (and never fails for it)."""
_READ_CHUNK = 1 << 18


class JournalDamagedError(StoreError):
    """A journal line before a complete transaction is damaged: not a torn tail, so not dropped."""


class ReplayReport:
    """What `Journal.recover` found: complete lines kept and bytes of a torn tail dropped."""

    def __init__(self, lines: int, dropped_bytes: int, last_j: int):
        self.lines = lines
        self.dropped_bytes = dropped_bytes
        self.last_j = last_j


@dataclass
class Scan:
    """The journal's bytes cut into transactions."""

    complete: list[tuple[int, int]] = field(default_factory=list)
    """(start, end) byte ranges of complete transactions, in order."""
    damaged: list[tuple[int, int, int]] = field(default_factory=list)
    """(line number, start, end) of every line or incomplete transaction that is not a tail."""
    good_end: int = 0
    """The end of the last complete transaction: everything after it is the tail."""
    lines: int = 0
    """Lines in complete transactions."""
    last_j: int = -1
    end: int = 0
    """Where the data ends: the first NUL byte (an in-place journal's zero padding), else the length."""
    torn: int = 0
    """Bytes after `good_end` that are not zero padding: a torn tail, dropped (0 when there is none)."""


def scan(data: bytes) -> Scan:
    """Cut journal bytes into complete transactions, damaged parts and a tail (zero padding is neither)."""
    out = Scan()
    end = data.find(b"\0")
    if end < 0:
        end = len(data)
    out.end = end
    pos = 0
    line_no = 0
    tx_start = 0  # byte offset of the current transaction's first line
    tx_line = 1
    tx_first: int | None = None  # its `tx`
    tx_ok = True
    tx_lines = 0
    expect_j: int | None = None
    pending_damage: list[tuple[int, int, int]] = []
    while pos < end:
        nl = data.find(b"\n", pos, end)
        if nl < 0:
            break  # an unterminated last line: the tail
        line_no += 1
        start, raw, pos = pos, data[pos:nl], nl + 1
        try:
            row = json.loads(raw)
            if not isinstance(row, dict) or not isinstance(row.get("j", -1), int):
                raise ValueError("not a journal row")
        except ValueError:
            if tx_ok and tx_lines == 0:
                tx_start, tx_line = start, line_no
            tx_ok = False
            tx_lines += 1
            continue
        j = row.get("j", -1)
        out.last_j = max(out.last_j, j)
        tx = row.get("tx")
        starts_new = tx is not None and tx == j
        if starts_new and tx_lines:  # the previous transaction never ended: damaged
            pending_damage.append((tx_line, tx_start, start))
            tx_lines, tx_ok = 0, True
        if tx_lines == 0:
            tx_start, tx_line, tx_first, expect_j = start, line_no, tx, j
        elif tx is not None and (tx != tx_first or j != expect_j):
            tx_ok = False
        tx_lines += 1
        expect_j = j + 1
        if row.get("end"):
            if tx_ok:
                out.damaged.extend(pending_damage)
                pending_damage = []
                out.complete.append((tx_start, pos))
                out.lines += tx_lines
                out.good_end = pos
            else:
                pending_damage.append((tx_line, tx_start, pos))
            tx_lines, tx_ok, tx_first = 0, True, None
    # bytes after the padding can only be pieces of an in-place write a power loss tore: a tail too
    last = len(data) if end == len(data) else len(data.rstrip(b"\0"))
    out.torn = max(last - out.good_end, 0)
    return out


def read_data(fd: int, offset: int, limit: int) -> bytes:
    """The bytes of an open journal from `offset` up to its first NUL (the padding) or `limit`.

    Read in chunks, so the zeros of an in-place journal's region are not all read each time.
    """
    parts: list[bytes] = []
    chunk = _READ_CHUNK
    while offset < limit:
        got = os.pread(fd, min(chunk, limit - offset), offset)
        if not got:
            break
        nul = got.find(b"\0")
        if nul >= 0:
            parts.append(got[:nul])
            break
        parts.append(got)
        offset += len(got)
        chunk = min(chunk * 2, 1 << 24)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def salvage_lines(data: bytes) -> tuple[bytes, int, int]:
    """The complete transactions of damaged journal bytes, and (transactions kept, damaged parts left out)."""
    s = scan(data)
    kept = b"".join(data[a:b] for a, b in s.complete)
    return kept, len(s.complete), len(s.damaged) + (1 if s.torn else 0)


CHECK_EVERY = 0.001
"""Seconds a drive's boundary writes (`hot=True`) go unchecked after the journal file was checked."""


class Journal:
    """The journal file of one store. Not thread-safe: the store serialises access."""

    def __init__(self, path: str, *, fsync: bool = False, read_only: bool = False, fd: int | None = None):
        self.path = path
        self.fsync = fsync
        self.read_only = read_only
        self.in_place = fsync and not read_only
        """Written in place into a zero-filled region (`fsync=True`): a sync with no metadata."""
        if fd is not None:  # a slot this process holds (holders.claim_slot), opened O_APPEND
            self._fd = fd
            if self.in_place:  # Linux's pwrite appends on an O_APPEND fd whatever its offset
                fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_APPEND)
        elif read_only:
            self._fd = os.open(path, os.O_RDONLY) if os.path.exists(path) else -1
        else:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | (0 if self.in_place else os.O_APPEND), 0o644)
        self._next_j = 0
        self._size = 0
        """Bytes of complete transactions in the file (the data end): where a failed write is cut back to."""
        self._alloc = 0
        """In place: the file's size, data and the zeros after it, all synced (what `fstat` must say)."""
        self._broken: str | None = None
        self.pending_lines = 0
        """Lines written since the last fold."""
        self.good_end = 0
        self.check_every = CHECK_EVERY
        """Seconds after a check that a hot write skips the next one (0: every write is checked)."""
        self._check_due = 0.0
        """`time.monotonic()` from which a hot write checks the file again."""
        self._stat = FileCheck()
        """The in-place boundary's file check, which leaves the file's times unread (file_check.py)."""
        if self.in_place:
            self.write = self.write_in_place  # type: ignore[method-assign]

    def read(self) -> bytes:
        if self._fd < 0:
            return b""
        size = os.fstat(self._fd).st_size
        return os.pread(self._fd, size, 0) if size else b""

    def recover(self) -> ReplayReport:
        """Drop a torn tail left by a killed process; report how many complete lines remain.

        Damage before a complete transaction is not a tail: `JournalDamagedError`, file kept.
        Zero padding (an in-place journal's) is no tail: kept in place, cut off otherwise.
        """
        data = self.read()
        s = scan(data)
        if s.damaged:
            line, start, _ = s.damaged[0]
            raise JournalDamagedError(
                f"the journal {self.path} is damaged at line {line} (byte {start}), before "
                f"{len(s.complete)} complete transaction(s) that follow or precede it; it was not replayed and "
                "is left as it is. Run `python -m lab salvage --store "
                f"{self.path.removesuffix('.journal')}` to keep every complete transaction on both sides "
                "(the damaged journal is kept beside it as .damaged-<time>), or restore it from a backup"
            )
        dropped = s.torn
        if dropped:
            if self.read_only:
                log.info("journal %s: ignoring a torn tail of %d bytes (read-only)", self.path, dropped)
            else:
                log.warning("journal %s: dropped a torn tail of %d bytes left by a killed process", self.path, dropped)
        if not self.read_only:
            if self.in_place:
                self._alloc = len(data)
                if dropped:  # the torn bytes become padding again, durably, before anything is written after them
                    self._zero(s.good_end, s.good_end + dropped)
                    os.fdatasync(self._fd)
            elif len(data) > s.good_end:
                os.ftruncate(self._fd, s.good_end)
        self.good_end = s.good_end
        self._size = s.good_end
        self._next_j = s.last_j + 1
        self.pending_lines = s.lines
        return ReplayReport(s.lines, dropped, s.last_j)

    def encode(self, rows: Iterable[dict[str, Any]]) -> bytes:
        """Number the rows and mark the last one as the end of its transaction.

        Raises `UnstorableValueError` (nothing numbered, nothing written) for a value the
        database could not read back.
        """
        if not isinstance(rows, list):
            rows = list(rows)
        blob = encode_rows(rows, self._next_j)
        self._next_j += len(rows)
        return blob

    def _check_file(self) -> int:
        """The file's size, after checking it is still the journal at `path`."""
        st = os.fstat(self._fd)
        if st.st_nlink == 0:
            self._broken = (
                f"the journal {self.path} was deleted while the store was open; what was written to it since "
                "the last fold is still folded from the open file on close, but nothing more can be made "
                "durable. Close the lab (lab.close()) and open it again"
            )
        elif st.st_size != (self._alloc if self.in_place else self._size):
            self._broken = (
                f"the journal {self.path} was changed by another program while the store was open (it holds "
                f"{st.st_size} bytes, the store wrote {self._alloc if self.in_place else self._size}); close the lab "
                "(lab.close()) and open it again"
            )
        if self._broken:
            raise StoreError(f"cannot write: {self._broken}")
        return st.st_size

    def write(self, blob: bytes, lines: int, *, sync: bool | None = None, check: bool = True, hot: bool = False) -> None:
        """Append complete transactions; returns once the OS has them (and the disk, with fsync).

        A write that fails part-way is cut back to where it started, so the journal still
        ends with a complete transaction, and raised as a `StoreError`. `check` first makes
        sure the file is still the journal (an `fstat`, which costs more than the write itself
        right after one): the store skips it for an `entered` event alone, whose boundary write
        follows at once and is checked. A `hot` write (a boundary inside a running drive) is
        checked only once `check_every` seconds passed since the last check (module docstring).
        """
        if self._broken:
            raise StoreError(f"cannot write: {self._broken}")
        if check and (not hot or _monotonic() >= self._check_due):  # inlined `_check_file` (the hot path)
            st = os.fstat(self._fd)
            if st.st_nlink == 0 or st.st_size != self._size:
                self._check_file()
            self._check_due = _monotonic() + self.check_every
        start = self._size
        try:
            n = os.write(self._fd, blob)
            if n != len(blob):  # a short write: the rest, or the error that stopped it
                view = memoryview(blob)[n:]
                while view:
                    view = view[os.write(self._fd, view) :]
            if self.fsync if sync is None else sync:
                os.fdatasync(self._fd)
        except OSError as exc:
            raise self._failed_write(exc, lambda: os.ftruncate(self._fd, start), len(blob)) from None
        self._size = start + len(blob)
        self.pending_lines += lines

    def _failed_write(self, exc: OSError, cut_back: Callable[[], object], size: int) -> StoreError:
        """A write of `size` bytes failed with `exc`: cut what it wrote back (`cut_back`), or mark the journal
        broken when that fails too; the error to raise."""
        try:
            cut_back()
        except OSError as again:
            self._broken = (
                f"a write to the journal {self.path} failed ({exc.strerror}) and could not be cut back "
                f"({again.strerror}); close the lab and open it again (the torn tail is dropped on open)"
            )
        return StoreError(
            f"cannot write to the journal {self.path}: {exc.strerror or exc} ({size} bytes); nothing of "
            "this write was kept and what was written before is intact. Free disk space (or raise the "
            "file size limit), then step again"
        )

    def write_in_place(self, blob: bytes, lines: int, *, sync: bool | None = None, check: bool = True, hot: bool = False) -> None:  # noqa: ARG002
        """`write` for `fsync=True`: one `pwrite` at the data end into the zeros, then one `fdatasync`.

        Every boundary is checked, `hot` or not, by `statx` asking for the link count and size only:
        an `fstat` (which reports the times) would make the write change the inode on a kernel with
        multigrain timestamps, and on ext4 without a journal the sync then writes the inode too
        (file_check.py).

        The blocks are already allocated, written and synced, and the size does not change, so the
        sync carries the data alone. The zeros grow first when the blob does not fit, or (a boundary)
        would leave less than `_HEADROOM` (`_grow`). A
        write that fails part-way gets its zeros back, so the data still ends with a complete
        transaction (a reader stops at the first NUL), and is raised as a `StoreError`.
        """
        if self._broken:
            raise StoreError(f"cannot write: {self._broken}")
        fd = self._fd
        if check:  # the file is still the journal at `path`, as large as this process made it
            nlink, size = self._stat(fd)
            if nlink == 0 or size != self._alloc:
                self._check_file()
        start = self._size
        end = start + len(blob)
        if end > self._alloc or (check and end + _HEADROOM > self._alloc):
            self._grow(end + _HEADROOM)  # at a checked boundary: an `entered` event alone never has to
        try:
            n = os.pwrite(fd, blob, start)
            while n < len(blob):  # a short write: the rest, or the error that stopped it
                more = os.pwrite(fd, memoryview(blob)[n:], start + n)
                if not more:
                    raise OSError(28, "no progress writing the journal")
                n += more
            if self.fsync if sync is None else sync:
                os.fdatasync(fd)
        except OSError as exc:
            raise self._failed_write(exc, lambda: self._zero(start, end), len(blob)) from None
        self._size = end
        self.pending_lines += lines

    def _grow(self, end: int) -> None:
        """Extend the zero-filled region past `end`: zeros written and synced once (with the new size).

        It doubles the file (at least `PAD_STEP`, at most `PAD_STEP_MAX` at once), in whole 4 KiB
        pages. A growth that fails (disk full) is cut back and raised; nothing of the blob was written.
        """
        old = self._alloc
        new = max(end, old + min(max(PAD_STEP, old), PAD_STEP_MAX))
        new = (new + 4095) & ~4095
        try:
            self._zero(old, new)
            os.fdatasync(self._fd)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, old)
            except OSError as again:
                self._broken = (
                    f"the journal {self.path} could not grow ({exc.strerror}) nor be cut back ({again.strerror}); "
                    "close the lab and open it again"
                )
            raise StoreError(
                f"cannot write to the journal {self.path}: {exc.strerror or exc} (growing it to {new:,} bytes); "
                "nothing of this write was kept and what was written before is intact. Free disk space, then step again"
            ) from None
        self._alloc = new

    def _zero(self, start: int, end: int) -> None:
        """Write zeros over `[start, end)` (not synced)."""
        while start < end:
            start += os.pwrite(self._fd, memoryview(_ZEROS)[: min(len(_ZEROS), end - start)], start)

    def needs_fold(self) -> bool:
        """Lines written since the last fold (or a file the store has not yet folded)."""
        return self.pending_lines > 0 or (not self._broken and self.size() > 0)

    @property
    def broken(self) -> bool:
        """The file was deleted, replaced or cut under this process: nothing more is written to it."""
        return bool(self._broken)

    def read_at(self, offset: int, size: int) -> bytes:
        """`size` bytes of the open file from `offset` (the file even once deleted)."""
        return os.pread(self._fd, size, offset)

    def identity(self) -> int:
        """The file's inode: a fold mark names the file it was taken on."""
        return os.fstat(self._fd).st_ino if self._fd >= 0 else -1

    def written(self) -> int:
        """Bytes of complete transactions this process has written (what another may fold)."""
        return self._size

    def size(self) -> int:
        """Bytes the file holds: its size, or the data end of an in-place journal (its zeros are no data)."""
        if self.in_place:
            return self._size
        return os.fstat(self._fd).st_size if self._fd >= 0 else 0

    @property
    def readable_path(self) -> str:
        """A path DuckDB can read the journal from: `/proc/self/fd/N` once the file was deleted."""
        if self._fd >= 0 and not os.path.exists(self.path) and os.path.exists(f"/proc/self/fd/{self._fd}"):
            return f"/proc/self/fd/{self._fd}"
        return self.path

    def truncate(self) -> None:
        """Forget what has been folded into the database.

        Not fsynced: if the truncation is lost, replaying lines already folded changes nothing.

        In place, the used bytes are zeroed and the data starts again at 0; the file keeps its
        zeros, so later boundaries need no growth. Replaying *all* the folded lines changes
        nothing, but a prefix of them would (a run's row would go back to an older head), and a
        new transaction at 0 must never be followed on disk by old ones. So the first sector
        (512 bytes, which a disk writes whole or not at all) is zeroed and synced first: from then
        on the data ends at 0, whatever else reaches the disk. Then the rest is zeroed and synced,
        before anything new is written: pieces of it a power loss kept are after the first NUL,
        a torn tail the next owner zeroes. Two `fdatasync`s per fold, none per boundary.
        """
        self.pending_lines = 0
        if self._broken:
            return  # keep what the open (deleted or changed) file holds; nothing new is written
        if self.in_place:
            first = min(self._size, _SECTOR)
            try:
                for start, end in ((0, first), (first, self._size)):
                    if end > start:
                        self._zero(start, end)
                        os.fdatasync(self._fd)
            except OSError as exc:  # folded already: the next open drops what is left (after the first NUL)
                self._broken = (
                    f"the journal {self.path} could not be emptied after a fold ({exc.strerror}); what it holds is in "
                    "the database. Close the lab (lab.close()) and open it again"
                )
                raise StoreError(f"cannot write: {self._broken}") from None
        else:
            os.ftruncate(self._fd, 0)
        self._size = 0
        self.pending_lines = 0

    def close(self) -> None:
        if self._fd >= 0:
            if self.in_place and not self._size and not self._broken and self._alloc:
                try:  # nothing unfolded: the zeros need not stay on disk while no store is open
                    os.ftruncate(self._fd, 0)
                except OSError:
                    pass
            os.close(self._fd)
            self._fd = -1


def stamp() -> str:
    """A file-name-safe UTC time for a set-aside copy."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
