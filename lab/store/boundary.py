"""The boundary row: one journal row for a station's settlement and the next station's `entered`.

Inside a running drive (step or batch, nobody listening) a station's settlement rides with the next
station's `entered` in one journal transaction (lab/run_hooks.py). Written as three rows (the
checkpoint, its `settled` event, the next `entered`) that transaction cost three encoder calls and
three row numberings a station; as one `b` row it costs one (issue 27 item 1, docs/benchmarks.md
"step27e"). The row holds the checkpoint's keys as a `cp` row does, plus:

- `node_id`, `attempt`, `payload`: the settled station, its try (the `seq` of its `entered`) and its
  `settled` event's payload; `ev`: that event's `seq`;
- `entered`, `entered_at` (only when the next station was entered in the same write): its node id
  and Unix time; its event's `seq` and `attempt` are `ev + 1`, its `checkpoint_seq` the row's `seq`,
  its payload `{}`.

Stores keep what the three rows keep: the DuckDB fold expands a `b` row in SQL (schema.py's
`EXPAND_BOUNDARIES`) before its statements run; PostgreSQL sends a write of one `b` row as
`graphlab_station`'s parameters taken from it (postgres_station.py `boundary_params`), and expands
any other write holding one here (`expand`) before it sends a transaction. Journals of older labs
hold only the three rows, which fold as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ("CP_KEYS", "expand", "has_boundary")

CP_KEYS = ("run_id", "seq", "parent_seq", "status", "state", "next", "output", "created_at", "counters")
"""The keys of a boundary row that are its checkpoint's (a missing one is NULL, as in a `cp` row)."""


def has_boundary(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether any of `rows` is a boundary row (`t = 'b'`)."""
    return any(r.get("t") == "b" for r in rows)


def expand(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with every boundary row replaced by the rows it stands for: its checkpoint, its `settled`
    event and, if it carries one, the next station's `entered` event (in that order, as written before).

    Rows read from a journal keep the boundary row's `j` and `tx`, and the last of them its `end`."""
    out: list[dict[str, Any]] = []
    for row in rows:
        if row.get("t") != "b":
            out.append(row)
            continue
        cp = {"t": "cp"}
        cp.update((k, row[k]) for k in CP_KEYS if k in row)
        run_id, seq, ev = row["run_id"], row["seq"], row["ev"]
        out.append(cp)
        out.append(
            {"t": "ev", "run_id": run_id, "seq": ev, "kind": "settled", "node_id": row["node_id"], "attempt": row["attempt"],
             "checkpoint_seq": seq, "payload": row["payload"], "created_at": row["created_at"]}
        )  # fmt: skip
        if row.get("entered") is not None:
            out.append(
                {"t": "ev", "run_id": run_id, "seq": ev + 1, "kind": "entered", "node_id": row["entered"], "attempt": ev + 1,
                 "checkpoint_seq": seq, "payload": {}, "created_at": row["entered_at"]}
            )  # fmt: skip
        if (
            "j" in row
        ):  # a row read from a journal: each keeps its line number and transaction, the last its end
            for r in out[-3 if row.get("entered") is not None else -2 :]:
                r["j"], r["tx"] = row["j"], row["tx"]
            if row.get("end"):
                out[-1]["end"] = True
    return out
