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
- a journal deleted (or replaced) while open is detected before the next write, which fails;
- a string the database cannot hold (a lone surrogate, as `os.fsdecode` makes of undecodable
  file names) is escaped in event payloads and errors, which are observations, and refused
  anywhere else (state, output, next stations), naming the field: it is never written.

A top-level value of a row may be `Encoded`: JSON text pydantic-core already wrote (a recorded
call's request and response, lab/recording.py), spliced into the line as it is instead of being
decoded and encoded again. The line is the same JSON either way.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic_core import PydanticSerializationError, to_json

from ..errors import StoreError
from .schema import MAX_LINE

__all__ = ("Encoded", "Journal", "JournalDamagedError", "ReplayReport", "UnstorableValueError", "dumps", "scan", "salvage_lines", "string_at")

log = logging.getLogger(__name__)

_ESCAPED_FIELDS = frozenset({"payload", "error"})
"""Fields that only observe (event payloads, a failure's message): a lone surrogate becomes `\\udce9` text."""

_SURROGATE = re.compile("[\ud800-\udfff]")

_compiled_dumps = orjson.dumps
_COMPILED_ONLY_PLAIN = orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
"""`Journal.encode` writes a row with orjson (compiled: a third of pydantic-core's `to_json` per row) when it
holds only JSON's own values (str, int in 64 bits, float, bool, None, dict with str keys, list, tuple) and
an enum or UUID, which both encoders write alike; a subclass, a datetime, a dataclass or any other type
raises, and the row takes pydantic-core's `to_json` as before. orjson writes NaN and infinities as `null`
where pydantic-core writes `NaN`: a line holding `null` is written again by pydantic-core, so no value is
stored differently. For the values orjson takes, the two write the same bytes (floats by the same shortest
round-trip form, strings with the same escapes): tests/store/test_journal_encoder.py."""


class JournalDamagedError(StoreError):
    """A journal line before a complete transaction is damaged: not a torn tail, so not dropped."""


class UnstorableValueError(StoreError, ValueError):
    """A value the store cannot hold losslessly (a lone surrogate in state, say): refused, never written."""


class Encoded:
    """A value already encoded as JSON text, written into a journal line verbatim (`dumps` splices it).

    `data` is what pydantic-core's encoders write (`to_json`, a serializer's `to_json`): compact,
    valid UTF-8 (they refuse a lone surrogate), one JSON value. Only a row's top-level value may be
    `Encoded`. `str()` of it raises, so an encoder that falls back to `str` for a type it does not
    know (`Journal.encode`) fails over to `dumps`, and never writes its repr.
    """

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data

    def value(self) -> Any:
        """The JSON data (decoded: what a store read gives back)."""
        return json.loads(self.data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Encoded) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        return f"Encoded({self.data[:60]!r}{'...' if len(self.data) > 60 else ''})"

    def __str__(self) -> str:
        raise TypeError("an Encoded JSON value is written by the journal's dumps (spliced), never as str()")


def _spliced(row: dict[str, Any]) -> bytes:
    """`row` as one JSON line with its `Encoded` values written as they are (after the others; `end` last)."""
    head = dumps({k: v for k, v in row.items() if k != "end" and type(v) is not Encoded})
    parts = [head[:-1]]
    sep = b"," if len(head) > 2 else b""
    for k, v in row.items():
        if type(v) is Encoded:
            parts += (sep, to_json(k), b":", v.data)
            sep = b","
    if "end" in row:
        parts += (sep, b'"end":', to_json(row["end"]))
    parts.append(b"}")
    return b"".join(parts)


def _fragment(value: Any) -> Any:
    """orjson's `default`: an `Encoded` value as the JSON text it is (an `orjson.Fragment`, written verbatim)."""
    if type(value) is Encoded:
        return orjson.Fragment(value.data)
    raise TypeError(f"{type(value).__name__} is written by pydantic-core")


_CALL_NUMBERS = ("input_tokens", "output_tokens", "ms", "created_at")
"""A call row's numbers (store/calls.py `call_row`); its other values are strings, ints and its request and response."""


def _call_line(row: dict[str, Any]) -> bytes:
    """A recorded call's row (`t = 'call'`) as one JSON line, by orjson in one pass: its `Encoded` request and
    response written verbatim where they stand. Its numbers are counts and times (`_CALL_NUMBERS`); one that
    is NaN or infinite, a request or response given as data (which may hold one), or a value orjson refuses
    (a lone surrogate, an int beyond 64 bits) takes `_spliced` (pydantic-core), as any row orjson would write
    otherwise does."""
    for key in _CALL_NUMBERS:
        v = row.get(key)
        if type(v) is float and v - v != 0.0:  # NaN or an infinity: orjson would write null
            return _spliced(row)
    request, response = row.get("request"), row.get("response")
    if (request is not None and type(request) is not Encoded) or (response is not None and type(response) is not Encoded):
        return _spliced(row)
    try:
        return _compiled_dumps(row, _fragment, _COMPILED_ONLY_PLAIN)
    except TypeError:
        return _spliced(row)


def _escape(value: Any) -> Any:
    """`value` with every lone surrogate written as its `\\udcXX` escape text (for observations)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8") if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {_escape(k): _escape(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escape(v) for v in value]
    return value


def string_at(value: Any, path: str, bad: Callable[[str], object]) -> str | None:
    """The path (from `path`) of the first string or key in `value` that is `bad`, or None."""
    if type(value) is Encoded:
        value = value.value()
    if isinstance(value, str):
        return path if bad(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str) and bad(k):
                return f"{path} (a key)"
            found = string_at(v, f"{path}.{k}", bad)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found = string_at(v, f"{path}[{i}]", bad)
            if found:
                return found
    return None


def dumps(row: dict[str, Any]) -> bytes:
    """Compact JSON bytes; pydantic-core's encoder is several times faster than the stdlib's."""
    try:
        return to_json(row, fallback=str)
    except PydanticSerializationError:
        return _dumps_unusual(row)


def _dumps_unusual(row: dict[str, Any]) -> bytes:
    """`dumps` of a row pydantic-core refused as it is: one holding `Encoded` values, or a lone surrogate."""
    if any(type(v) is Encoded for v in row.values()):
        return _spliced(row)
    # a lone surrogate (UTF-8 cannot hold it, nor DuckDB): escape observations, refuse data
    clean = {k: (_escape(v) if k in _ESCAPED_FIELDS else v) for k, v in row.items()}
    for key, value in clean.items():
        where = string_at(value, key, _SURROGATE.search)
        if where:
            what = {"cp": "checkpoint", "run": "run", "upd": "run", "wait": "wait", "vd": "answer"}.get(row.get("t", ""), "row")
            raise UnstorableValueError(
                f"cannot store {what} field {where} of run {row.get('run_id')}: it holds a lone surrogate "
                "(a string that is not valid Unicode, as os.fsdecode makes of an undecodable file name), which "
                "the store cannot keep losslessly; nothing was written. Store the name as bytes, or as "
                "os.fsencode(name).decode('utf-8', 'backslashreplace')"
            )
    return to_json(clean, fallback=str)


def _too_large(row: dict[str, Any], size: int) -> UnstorableValueError:
    """A row longer than the database reads back as one journal line: refused, naming its largest field."""
    what = {"cp": "checkpoint", "run": "run", "upd": "run", "wait": "wait", "vd": "answer", "ev": "event"}.get(row.get("t", ""), "row")
    sizes = {k: len(dumps({k: v})) for k, v in row.items() if k not in ("t", "j", "tx", "end")}
    field_name = max(sizes, key=sizes.__getitem__) if sizes else "?"
    return UnstorableValueError(
        f"cannot store {what} of run {row.get('run_id')}: it is {size:,} bytes as JSON (its field {field_name!r} "
        f"{sizes.get(field_name, 0):,}), more than the {MAX_LINE:,} bytes the store reads back as one value; "
        "nothing was written. Keep data this large outside the state (a file path or an object-store key) "
        "and store the reference"
    )


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


def scan(data: bytes) -> Scan:
    """Cut journal bytes into complete transactions, damaged parts and a tail."""
    out = Scan()
    pos = 0
    line_no = 0
    tx_start = 0  # byte offset of the current transaction's first line
    tx_line = 1
    tx_first: int | None = None  # its `tx`
    tx_ok = True
    tx_lines = 0
    expect_j: int | None = None
    pending_damage: list[tuple[int, int, int]] = []
    while pos < len(data):
        nl = data.find(b"\n", pos)
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
    return out


def salvage_lines(data: bytes) -> tuple[bytes, int, int]:
    """The complete transactions of damaged journal bytes, and (transactions kept, damaged parts left out)."""
    s = scan(data)
    kept = b"".join(data[a:b] for a, b in s.complete)
    return kept, len(s.complete), len(s.damaged) + (1 if s.good_end < len(data) else 0)


class Journal:
    """The journal file of one store. Not thread-safe: the store serialises access."""

    def __init__(self, path: str, *, fsync: bool = False, read_only: bool = False, fd: int | None = None):
        self.path = path
        self.fsync = fsync
        self.read_only = read_only
        if fd is not None:  # a slot this process holds (holders.claim_slot)
            self._fd = fd
        elif read_only:
            self._fd = os.open(path, os.O_RDONLY) if os.path.exists(path) else -1
        else:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._next_j = 0
        self._size = 0
        """Bytes of complete transactions in the file: where a failed write is cut back to."""
        self._broken: str | None = None
        self.pending_lines = 0
        """Lines written since the last fold."""
        self.good_end = 0

    def read(self) -> bytes:
        if self._fd < 0:
            return b""
        size = os.fstat(self._fd).st_size
        return os.pread(self._fd, size, 0) if size else b""

    def recover(self) -> ReplayReport:
        """Drop a torn tail left by a killed process; report how many complete lines remain.

        Damage before a complete transaction is not a tail: `JournalDamagedError`, file kept.
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
        dropped = len(data) - s.good_end
        if dropped:
            if self.read_only:
                log.info("journal %s: ignoring a torn tail of %d bytes (read-only)", self.path, dropped)
            else:
                log.warning("journal %s: dropped a torn tail of %d bytes left by a killed process", self.path, dropped)
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
        first = j = self._next_j
        parts: list[bytes] = []
        last = rows[-1] if rows else None
        for row in rows:
            row["j"] = j
            row["tx"] = first
            j += 1
            if row is last:
                row["end"] = True  # the last key of the line: a reader cuts a live journal after `,"end":true}`
            written = True  # a line no second encoder needs to write
            if row.get("t") == "call":  # a recorded call: its request and response are `Encoded` JSON text
                line = _call_line(row)
            else:
                try:
                    line = _compiled_dumps(row, None, _COMPILED_ONLY_PLAIN)
                    nulls = line.count(b"null")  # None values, or a NaN or an infinity orjson wrote as null
                    if nulls:  # no more `null`s than the row's own None values: no NaN (a recorded call's event
                        # holds a None); more (a NaN, a None further down, `null` in a string): pydantic-core's line
                        written = nulls == list(row.values()).count(None)
                except TypeError:  # a value orjson does not write as pydantic-core would (orjson.JSONEncodeError)
                    written = False
            if not written:  # a NaN, a value too deep to check here, or one orjson refused: pydantic-core's line
                try:
                    line = to_json(row)  # no `fallback=str` here (it costs on every row): `_dumps_unusual` retries with it
                except PydanticSerializationError:
                    line = _dumps_unusual(row)  # splices Encoded values, escapes observations, or names the field it refuses
            if len(line) > MAX_LINE:
                raise _too_large(row, len(line))
            parts.append(line)
        self._next_j = j
        parts.append(b"")
        return b"\n".join(parts)

    def _check_file(self) -> int:
        """The file's size, after checking it is still the journal at `path`."""
        st = os.fstat(self._fd)
        if st.st_nlink == 0:
            self._broken = (
                f"the journal {self.path} was deleted while the store was open; what was written to it since "
                "the last fold is still folded from the open file on close, but nothing more can be made "
                "durable. Close the lab (lab.close()) and open it again"
            )
        elif st.st_size != self._size:
            self._broken = (
                f"the journal {self.path} was changed by another program while the store was open (it holds "
                f"{st.st_size} bytes, the store wrote {self._size}); close the lab (lab.close()) and open it again"
            )
        if self._broken:
            raise StoreError(f"cannot write: {self._broken}")
        return st.st_size

    def write(self, blob: bytes, lines: int, *, sync: bool | None = None, check: bool = True) -> None:
        """Append complete transactions; returns once the OS has them (and the disk, with fsync).

        A write that fails part-way is cut back to where it started, so the journal still
        ends with a complete transaction, and raised as a `StoreError`. `check` first makes
        sure the file is still the journal (an `fstat`, which costs more than the write itself
        right after one): the store skips it for an `entered` event alone, whose boundary write
        follows at once and is checked.
        """
        if self._broken:
            raise StoreError(f"cannot write: {self._broken}")
        if check:  # inlined `_check_file` (the hot path): the file is still the journal at `path`
            st = os.fstat(self._fd)
            if st.st_nlink == 0 or st.st_size != self._size:
                self._check_file()
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
            try:
                os.ftruncate(self._fd, start)
            except OSError as again:
                self._broken = (
                    f"a write to the journal {self.path} failed ({exc.strerror}) and could not be cut back "
                    f"({again.strerror}); close the lab and open it again (the torn tail is dropped on open)"
                )
            raise StoreError(
                f"cannot write to the journal {self.path}: {exc.strerror or exc} ({len(blob)} bytes); nothing of "
                "this write was kept and what was written before is intact. Free disk space (or raise the "
                "file size limit), then step again"
            ) from None
        self._size = start + len(blob)
        self.pending_lines += lines

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
        """
        self.pending_lines = 0
        if self._broken:
            return  # keep what the open (deleted or changed) file holds; nothing new is written
        os.ftruncate(self._fd, 0)
        self._size = 0
        self.pending_lines = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def stamp() -> str:
    """A file-name-safe UTC time for a set-aside copy."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
