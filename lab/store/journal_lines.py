"""How a row becomes a journal line: JSON that the database reads back as the value it was.

A row is written by orjson (compiled: a third of pydantic-core's `to_json` a row) when orjson writes it
as pydantic-core would, else by pydantic-core; a recorded call's request and response are `Encoded`
JSON text written into the line as they are. A value the database could not read back (a lone
surrogate in data, a line longer than the store reads as one value) is refused, naming the field,
before anything is written. The file side (appending, syncing, recovering) is journal.py's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson
from pydantic_core import PydanticSerializationError, to_json

from ..errors import StoreError
from .schema import MAX_LINE

__all__ = ("Encoded", "PLAIN_OPTIONS", "UnstorableValueError", "dumps", "encode_rows", "plain_json", "string_at")

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
PLAIN_OPTIONS = _COMPILED_ONLY_PLAIN
"""`orjson.dumps(value, None, PLAIN_OPTIONS)` is `plain_json` without its `null` check (postgres_station.py
checks each field's bytes itself)."""


_LAB_MADE = frozenset({"entered", "settled"})
"""Event kinds whose rows hold only what the lab makes: ints, strs, None, node names and finite floats read
from its clocks (`created_at`, a settlement's `ms`), never a value of the notebook's. orjson writes them as
pydantic-core does (a None is `null` in both), so their lines skip the `null` count, the NaN test
that costs ~6 instructions a byte (two of a step station's three lines)."""


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


def plain_json(value: Any) -> bytes | None:
    """`value` (a list of rows, say) as compact JSON by orjson, in one call, when it holds only JSON's own
    values and no `null`: the very bytes `dumps` of each row, joined, would be (see `_COMPILED_ONLY_PLAIN`);
    else None, and the caller encodes row by row. A `null` may be a NaN or an infinity orjson wrote as one,
    so any is refused here (a station's boundary holds none: its None keys are left out)."""
    try:
        blob = _compiled_dumps(value, None, _COMPILED_ONLY_PLAIN)
    except TypeError:  # orjson.JSONEncodeError: a type, an int or a string it does not write as pydantic-core
        return None
    return None if b"null" in blob else blob


def _dumps_unusual(row: dict[str, Any]) -> bytes:
    """`dumps` of a row pydantic-core refused as it is: one holding `Encoded` values, or a lone surrogate."""
    if any(type(v) is Encoded for v in row.values()):
        return _spliced(row)
    # a lone surrogate (UTF-8 cannot hold it, nor DuckDB): escape observations, refuse data
    clean = {k: (_escape(v) if k in _ESCAPED_FIELDS else v) for k, v in row.items()}
    for key, value in clean.items():
        where = string_at(value, key, _SURROGATE.search)
        if where:
            what = {"cp": "checkpoint", "b": "checkpoint", "run": "run", "upd": "run", "wait": "wait", "vd": "answer"}.get(row.get("t", ""), "row")
            raise UnstorableValueError(
                f"cannot store {what} field {where} of run {row.get('run_id')}: it holds a lone surrogate "
                "(a string that is not valid Unicode, as os.fsdecode makes of an undecodable file name), which "
                "the store cannot keep losslessly; nothing was written. Store the name as bytes, or as "
                "os.fsencode(name).decode('utf-8', 'backslashreplace')"
            )
    return to_json(clean, fallback=str)


def _core_line(row: dict[str, Any]) -> bytes:
    """pydantic-core's line of a row (a None, a NaN or a type orjson refused)."""
    try:
        return to_json(row)  # no `fallback=str` here (it costs on every row): `_dumps_unusual` retries with it
    except PydanticSerializationError:
        return _dumps_unusual(row)  # splices Encoded values, escapes observations, or names the field it refuses


def _too_large(row: dict[str, Any], size: int) -> UnstorableValueError:
    """A row longer than the database reads back as one journal line: refused, naming its largest field."""
    what = {"cp": "checkpoint", "b": "checkpoint", "run": "run", "upd": "run", "wait": "wait", "vd": "answer", "ev": "event"}.get(row.get("t", ""), "row")
    sizes = {k: len(dumps({k: v})) for k, v in row.items() if k not in ("t", "j", "tx", "end")}
    field_name = max(sizes, key=sizes.__getitem__) if sizes else "?"
    return UnstorableValueError(
        f"cannot store {what} of run {row.get('run_id')}: it is {size:,} bytes as JSON (its field {field_name!r} "
        f"{sizes.get(field_name, 0):,}), more than the {MAX_LINE:,} bytes the store reads back as one value; "
        "nothing was written. Keep data this large outside the state (a file path or an object-store key) "
        "and store the reference"
    )


def encode_rows(rows: list[dict[str, Any]], first_j: int) -> bytes:
    """`rows` as one journal transaction: numbered from `first_j` (`j`, and `tx` the first's), the last
    marked as its end, one line each.

    Raises `UnstorableValueError` (nothing numbered for the journal, nothing written) for a value the
    database could not read back.
    """
    first = j = first_j
    parts: list[bytes] = []
    append = parts.append
    if rows:  # the last row numbered and marked first: the loop's own stores keep its keys' order
        last = rows[-1]
        last["j"] = first + len(rows) - 1
        last["tx"] = first
        last["end"] = True  # the last key of the line: a reader cuts a live journal after `,"end":true}`
    for row in rows:
        row["j"] = j
        row["tx"] = first
        j += 1
        if row.get("t") == "call":  # its Encoded request and response would make the plain try below raise
            append(_call_line(row))
            continue
        try:
            line = _compiled_dumps(row, None, _COMPILED_ONLY_PLAIN)
        except TypeError:  # a value orjson does not write as pydantic-core would (orjson.JSONEncodeError)
            line = _core_line(row)
        else:
            if row.get("t") == "ev" and row.get("kind") in _LAB_MADE:
                append(line)  # every float in it is the lab's own clock: no NaN to look for
                continue
            nulls = line.count(b"null")  # None values, or a NaN or an infinity orjson wrote as null
            # no more `null`s than the row's own None values: no NaN (a recorded call's event holds a
            # None); more (a NaN, a None further down, `null` in a string): pydantic-core's line
            if nulls and nulls != list(row.values()).count(None):
                line = _core_line(row)
        append(line)
    append(b"")
    blob = b"\n".join(parts)
    if len(blob) > MAX_LINE:  # only then can a line be too long
        for row, line in zip(rows, parts[:-1], strict=True):
            if len(line) > MAX_LINE:
                raise _too_large(row, len(line))
    return blob
