"""`python -m lab salvage`: keep every complete journal transaction the database can fold.

For a journal that `Lab(path)` refuses; the original is set aside beside the store.
"""

from __future__ import annotations

import os
import tempfile

import duckdb

from ..errors import StoreError
from .duckdb_files import OPEN, OPEN_LOCK, connect_file
from .holders import StoreLock, journal_slots, slot_is_free
from .journal import scan, stamp
from .schema import EXPAND_BOUNDARIES, FOLD_STATEMENTS, JOURNAL_SELECT, line_limit

__all__ = ("salvage_journal",)


def salvage_journal(path: str | os.PathLike[str]) -> str:
    """Keep every complete journal transaction the database can fold; set the rest aside.

    For a journal that `Lab(path)` refuses (damage before complete transactions, or a line
    that cannot be folded). The original journal is kept beside the store as
    `lab.duckdb.journal.damaged-<time>`; the new journal holds the complete, foldable
    transactions from both sides of the damage and is replayed by the next `Lab(path)`.
    Every journal of a process that is gone is salvaged (`lab.duckdb.journal`, and any
    `.journal.N` with damage); a journal a live process holds is refused.
    Returns a one-paragraph summary.
    """
    real = os.path.realpath(os.fspath(path))
    with OPEN_LOCK:
        held = OPEN.get(real)
    if held is not None and not held.closed:
        raise StoreError(f"the store {real} is open in this process; call lab.close() before salvaging its journal")
    journals = [
        j for j in journal_slots(real) if j == real + ".journal" or _needs_salvage(j)
    ]
    if not journals:
        return f"no journal beside {real}: nothing to salvage"
    lock = StoreLock(real + ".lock")
    try:
        with lock.held():
            out = []
            for journal in journals:
                fd = slot_is_free(journal)
                if fd < 0:
                    raise StoreError(
                        f"the journal {journal} is held by a live process (a Graph Lab open on {real}); call "
                        "lab.close() there (or end it), then salvage"
                    )
                try:
                    out.append(_salvage_one(real, journal))
                finally:
                    os.close(fd)
    finally:
        lock.close()
    return "\n".join(out)


def _needs_salvage(journal: str) -> bool:
    with open(journal, "rb") as f:
        data = f.read()
    s = scan(data)
    return bool(s.damaged) or s.torn > 0  # zero padding (an in-place journal's) is no damage


def _salvage_one(real: str, journal: str) -> str:
    with open(journal, "rb") as f:
        data = f.read()
    s = scan(data)
    txns = [data[a:b] for a, b in s.complete]
    con = connect_file(real)
    try:
        with tempfile.TemporaryDirectory(prefix="graphlab-salvage-") as tmp:
            probe = os.path.join(tmp, "probe.ndjson")

            def foldable(part: list[bytes]) -> bool:
                blob = b"".join(part)
                with open(probe, "wb") as f:
                    f.write(blob)
                try:
                    con.execute("BEGIN")
                    try:
                        con.execute(
                            "CREATE OR REPLACE TEMP TABLE journal_rows AS " + JOURNAL_SELECT, [probe, line_limit(len(blob))]
                        )
                        for stmt in (EXPAND_BOUNDARIES, *FOLD_STATEMENTS):
                            con.execute(stmt)
                    finally:
                        con.execute("ROLLBACK")
                except duckdb.Error:
                    return False
                return True

            def keep(part: list[bytes]) -> list[bytes]:
                if not part or foldable(part):
                    return part
                if len(part) == 1:
                    return []
                half = len(part) // 2
                return keep(part[:half]) + keep(part[half:])

            kept = keep(txns)
            while kept and not foldable(kept):  # halves that fold alone but not together: drop the last
                kept = kept[:-1]
    finally:
        con.close()
    backup = f"{journal}.damaged-{stamp()}"
    fresh = journal + ".salvaged"
    with open(fresh, "wb") as f:
        f.write(b"".join(kept))
        f.flush()
        os.fsync(f.fileno())
    os.replace(journal, backup)
    os.replace(fresh, journal)
    unfoldable = len(txns) - len(kept)
    damaged = len(s.damaged) + (1 if s.torn else 0)
    return (
        f"kept {len(kept)} complete transaction(s) of {journal} (replayed by the next Lab({real!r})); left out "
        f"{damaged} damaged part(s) and {unfoldable} transaction(s) the database cannot fold. The original journal "
        f"is kept as {backup}"
    )

