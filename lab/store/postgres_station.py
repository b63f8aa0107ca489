"""A station's boundary on PostgreSQL in typed parameters: `graphlab_station(...)`.

The usual write of a run (a checkpoint, its `settled` event, the next station's `entered`; or a
checkpoint and one event when a drive stops) is the one `graphlab_write` (postgres_schema.py) applies
row by row. Sent as one jsonb array, the server parses every number of it as `numeric` and builds an
expression per field to take it out again (~100k instructions a write of ~636k). Here the scalar fields
travel as typed parameters of a prepared statement (run, seqs, attempts, times) and only the JSON
fields (state, next, output, counters, payloads) as jsonb: the same statements on the same values, the
same checks (the run's lock, gap-free numbering from the stored events, `GLCPX`), one transaction.
By callgrind (docs/benchmarks.md, pg27d): 639k → 491k server instructions a station, −23%; the lab's
side +31k a write, +44k a station in a whole drive (22 parameters built in Python cost more than one
orjson call of the rows).

`station_params(rows)` recognises that shape and returns the parameters, or None: anything else (a new
run, a run update, a key beyond the station's, a value JSON's own types cannot say without `null`, a
NUL or a lone surrogate) takes `graphlab_write`, which also raises the errors such values deserve.
`boundary_params(row)` gives the same parameters straight from the boundary row a drive writes
(lab/store/boundary.py), the usual write: expanding it into three rows only to take them apart again
cost the lab's thread ~43k instructions a station (docs/benchmarks.md, pg27e).
tests/store/test_postgres_station.py proves both paths store the same rows.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import orjson

from .journal_lines import PLAIN_OPTIONS
from .postgres_schema import REFUSE_TAKEN_CHECKPOINT, RUN_LOCK, ts

__all__ = (
    "FORMATS", "STATION", "STATION_NAME", "STATION_FUNCTION", "STATION_FUNCTION_SOURCE", "INSTALLED_STATION_FUNCTION",
    "boundary_params", "station_params",
)  # fmt: skip

_SIGNATURE = (
    "f_run text, c_seq bigint, c_parent bigint, c_status text, c_state jsonb, c_next jsonb, c_output jsonb, "
    "c_counters jsonb, c_at double precision, "
    "a_seq bigint, a_kind text, a_node text, a_attempt bigint, a_cps bigint, a_payload jsonb, a_at double precision, "
    "b_kind text, b_node text, b_attempt bigint, b_cps bigint, b_payload jsonb, b_at double precision"
)
_TYPES = ", ".join(p.split(" ", 1)[1] for p in _SIGNATURE.split(", "))

STATION_FUNCTION = f"""
CREATE OR REPLACE FUNCTION graphlab_station({_SIGNATURE}) RETURNS void LANGUAGE plpgsql AS $fn$
-- Graph Lab's station write (postgres_station.py): graphlab_write's row-by-row path on typed values
DECLARE
    c record;
    f_seq bigint;
BEGIN
    PERFORM pg_advisory_xact_lock({RUN_LOCK}, hashtext(f_run));
    INSERT INTO checkpoints (run_id, seq, parent_seq, status, state, next, output, created_at, counters)
    VALUES (f_run, c_seq, c_parent, c_status, c_state, c_next, c_output, {ts("c_at")}, c_counters)
    ON CONFLICT (run_id, seq) DO NOTHING;
    IF NOT FOUND THEN  -- the id was taken: the same checkpoint again changes nothing, a different one is refused
        SELECT k.run_id, k.seq, to_jsonb(k) - 'created_at' AS stored,
               jsonb_build_object('parent_seq', c_parent, 'status', c_status, 'state', c_state, 'next', c_next,
                                  'output', c_output, 'counters', c_counters) AS given
        INTO c FROM checkpoints k
        WHERE k.run_id = f_run AND k.seq = c_seq
          AND (k.parent_seq IS DISTINCT FROM c_parent OR k.status IS DISTINCT FROM c_status
            OR k.state IS DISTINCT FROM c_state OR k.next IS DISTINCT FROM c_next
            OR k.output IS DISTINCT FROM c_output OR k.counters IS DISTINCT FROM c_counters);
        {REFUSE_TAKEN_CHECKPOINT}
    END IF;
    -- numbered from the run's stored events, read after the lock: first from the writer's guess on,
    -- then, if nothing is stored from there, the run's last of all (as graphlab_write)
    SELECT v.seq INTO f_seq FROM events v WHERE v.run_id = f_run AND v.seq >= a_seq - 1 ORDER BY v.seq DESC LIMIT 1;
    IF NOT FOUND THEN
        SELECT v.seq INTO f_seq FROM events v WHERE v.run_id = f_run ORDER BY v.seq DESC LIMIT 1;
        f_seq := coalesce(f_seq, -1);
    END IF;
    INSERT INTO events (run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at)
    VALUES (f_run, f_seq + 1, a_kind, a_node, a_attempt, a_cps, a_payload, {ts("a_at")});
    IF b_kind IS NOT NULL THEN
        INSERT INTO events (run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at)
        VALUES (f_run, f_seq + 2, b_kind, b_node, b_attempt, b_cps, b_payload, {ts("b_at")});
    END IF;
    UPDATE runs SET status = c_status, head_seq = c_seq, output = c_output, error = NULL, updated_at = {ts("c_at")}
    WHERE run_id = f_run;
END
$fn$
"""
"""`graphlab_station(...)`: a checkpoint, then one or two events (`b_kind` NULL: one), then the run's head
from the checkpoint, as `graphlab_write` applies those rows."""

STATION_FUNCTION_SOURCE = STATION_FUNCTION.split("$fn$")[1]
"""The body as the server keeps it: a store without it, or with another body, gets this one on open."""

INSTALLED_STATION_FUNCTION = f"SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure('graphlab_station({_TYPES})')"

STATION_NAME = b"graphlab_station"
"""The name `STATION` is prepared under on the write connection."""
STATION = ("SELECT graphlab_station(" + ", ".join(f"${i + 1}::{t}" for i, t in enumerate(_TYPES.split(", "))) + ")").encode()

_CP_KEYS = frozenset({"t", "run_id", "seq", "parent_seq", "status", "state", "next", "output", "counters", "created_at"})
_EV_KEYS = frozenset({"t", "run_id", "seq", "kind", "node_id", "attempt", "checkpoint_seq", "payload", "created_at"})
_NUL = b"\\u0000"
_TEXT, _BINARY = 0, 1
FORMATS = [_BINARY if t in ("bigint", "double precision") else _TEXT for t in _TYPES.split(", ")]
"""Each parameter's libpq format: numbers in binary (8 bytes each: no float to text and back, and a float
is the very double the lab holds), text and JSON as text."""
_int8 = struct.Struct(">q").pack
_float8 = struct.Struct(">d").pack
_dumps = orjson.dumps


class _Other(Exception):
    """Not a station's boundary as `graphlab_station` takes it: `graphlab_write` applies it."""


_NOT_STATION = (_Other, TypeError, struct.error, UnicodeEncodeError, OverflowError)
"""What a value `graphlab_station` cannot take raises here: orjson's error is a TypeError, struct's a
number beyond bigint, `encode` a lone surrogate, `float` an int beyond a double."""


def station_params(rows: Sequence[dict[str, Any]]) -> list[bytes | None] | None:
    """`graphlab_station`'s parameters (formats: `FORMATS`) for a checkpoint and one or two events of
    its run, each holding no key beyond its kind's; else None. On the hot path of a PostgreSQL station
    (~2.5x the one orjson call of `graphlab_write`'s array, a few µs: small beside the server's work it saves)."""
    n = len(rows)
    if n != 2 and n != 3:
        return None
    cp, a, b = rows[0], rows[1], rows[n - 1]
    run = cp.get("run_id")
    if cp.get("t") != "cp" or type(run) is not str or not cp.keys() <= _CP_KEYS:
        return None
    for ev in (a, b):  # (a str `kind` also tells the second event is there: `b_kind` NULL, it is not)
        if ev.get("t") != "ev" or ev.get("run_id") != run or not ev.keys() <= _EV_KEYS or type(ev.get("kind")) is not str:
            return None
    try:
        g = cp.get
        state, nxt, output, counters, pa = _json(g("state")), _json(g("next")), _json(g("output")), _json(g("counters")), _json(a.get("payload"))
        params = [_text(run), _int(g("seq")), _int(g("parent_seq")), _text(g("status")), state, nxt, output, counters,
                  _time(g("created_at")), _int(a.get("seq")),  # the writer's guess of the first event's number
                  _text(a["kind"]), _text(a.get("node_id")), _int(a.get("attempt")), _int(a.get("checkpoint_seq")), pa,
                  _time(a.get("created_at"))]  # fmt: skip
        if n == 3:
            pb = _json(b.get("payload"))
            params += [_text(b["kind"]), _text(b.get("node_id")), _int(b.get("attempt")), _int(b.get("checkpoint_seq")), pb,
                       _time(b.get("created_at"))]  # fmt: skip
        else:
            pb = None
            params += _NO_EVENT
    except _NOT_STATION:
        return None
    # one look for a `null` (perhaps a NaN orjson wrote so) or a NUL in all the JSON: graphlab_write takes those
    probe = b"".join([state or b"", nxt or b"", output or b"", counters or b"", pa or b"", pb or b""])
    if b"null" in probe or _NUL in probe:
        return None
    return params


_NO_EVENT: list[bytes | None] = [None] * 6

_B_KEYS = frozenset({*_CP_KEYS, "node_id", "attempt", "ev", "payload", "entered", "entered_at"})
_SETTLED, _ENTERED, _EMPTY = b"settled", b"entered", b"{}"


def boundary_params(row: dict[str, Any]) -> list[bytes | None] | None:
    """`graphlab_station`'s parameters straight from a boundary row (lab/store/boundary.py: a checkpoint, its
    `settled` event, perhaps the next `entered`), as `station_params(expand([row]))` gives them; else None
    (then `expand` and the general path run, with their errors). The usual write of a PostgreSQL station:
    no three rows built only to be taken apart again."""
    run = row.get("run_id")
    if type(run) is not str or not row.keys() <= _B_KEYS:
        return None
    try:
        g = row.get
        seq, ev, at = row["seq"], row["ev"], row["created_at"]  # `expand` reads these (and the two below) by key
        state, nxt, output, counters, pa = _json(g("state")), _json(g("next")), _json(g("output")), _json(g("counters")), _json(row["payload"])
        cps = _int(seq)
        params = [_text(run), cps, _int(g("parent_seq")), _text(g("status")), state, nxt, output, counters, _time(at),
                  _int(ev), _SETTLED, _text(row["node_id"]), _int(row["attempt"]), cps, pa, _time(at)]  # fmt: skip
        entered = g("entered")
        if entered is not None:  # its try is its event's number, `ev + 1`, its payload `{}` (as `expand` writes it)
            params += [_ENTERED, _text(entered), _int(ev + 1), cps, _EMPTY, _time(row["entered_at"])]
        else:
            params += _NO_EVENT
    except (KeyError, *_NOT_STATION):
        return None
    probe = b"".join([state or b"", nxt or b"", output or b"", counters or b"", pa or b""])
    if b"null" in probe or _NUL in probe:
        return None
    return params


def _text(value: Any) -> bytes | None:
    if value is None:
        return None
    if type(value) is not str or "\x00" in value:
        raise _Other
    return value.encode()  # a lone surrogate raises: graphlab_write's encoder refuses it with its message


def _int(value: Any) -> bytes | None:
    if value is None:
        return None
    if type(value) is not int:  # (not a bool either: JSON's true is no bigint)
        raise _Other
    return _int8(value)  # beyond bigint raises: graphlab_write says so


def _time(value: Any) -> bytes | None:
    """Seconds as float8, as the server reads graphlab_write's JSON number (the nearest double)."""
    if type(value) is float:
        if value - value != 0.0:  # NaN or an infinity (`math.isfinite`, without the call)
            raise _Other
        return _float8(value)
    if value is None:
        return None
    if type(value) is not int:
        raise _Other
    return _float8(float(value))


def _json(value: Any) -> bytes | None:
    """JSON null (a None value) is SQL NULL here, as `nullif(…, 'null')` makes it in graphlab_write; a type
    beyond JSON's own raises (`station_params` looks for a `null` inside or a NUL once, for all fields)."""
    return None if value is None else _dumps(value, None, PLAIN_OPTIONS)
