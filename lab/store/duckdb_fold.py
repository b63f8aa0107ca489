"""The DuckDB store's fold: every process's journal moved into the tables in one transaction.

Mixed into `DuckDBStore`. Each process appends to a journal of its own (journal.py, holders.py);
a fold reads what each journal holds beyond its fold mark, loads it as one `journal_rows` table
with `read_json`, applies the fold statements (schema.py) and records the new marks, all in one
transaction; then it empties the journals that may be emptied (its own, and those of processes
that are gone).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Any

import duckdb

from ..errors import CheckpointError, StoreError
from .dialect import DUCKDB
from .duckdb_files import MEMORY
from .holders import CountingLock, StoreLock, journal_slots, slot_is_free
from .journal import Journal, JournalDamagedError, read_data, scan
from .schema import (
    BOUNDARY_KINDS,
    CHECKPOINT_CONFLICTS,
    EXPAND_BOUNDARIES,
    FOLD_NEEDS,
    JOURNAL_SELECT,
    line_limit,
)

__all__ = ("JournalFold", "Source")

log = logging.getLogger(__name__)

SOURCE = 1 << 40
"""Journal line numbers of the n-th folded journal are offset by n * SOURCE, so lines of several journals never tie."""
END = b',"end":true}\n'
"""How a transaction's last line ends (the journal writes `end` last): where another process's journal may be cut."""
Source = tuple[str, int, int, bytes, int, bool]
"""One journal's unfolded part: (path, inode, mark, bytes, fd to truncate or -1 (-2: this process's), own)."""
_MARK = DUCKDB.upsert("journal_marks", ("file", "ino", "folded"), "file")


class JournalFold:
    """Fold the journals into the tables (with the store's lock held and the file attached)."""

    path: str
    read_only: bool
    _con: duckdb.DuckDBPyConnection
    _lock: CountingLock
    _lockfile: StoreLock | None
    _journal: Journal | None
    _others_at: float
    _live_journals: int
    _flush_buffer: Any
    _session: Any

    folds = 0
    """How many folds this process made (a job's journal window, duckdb_jobs.py, holds while this stays)."""

    def _fold_statements(self) -> Any:
        """The statements that fold `journal_rows` into the tables (schema.py's; a test may wrap them)."""
        raise NotImplementedError

    def fold(self, *, others: bool = True) -> None:
        """Move everything journalled, by every process on the store, into the DuckDB tables.

        `others=False` folds only this process's journal (a read between two looks at the others).
        """
        with self._lock:
            if self.read_only:
                return
            self._flush_buffer()
            if (self._lockfile is None or not others) and not self._journal.needs_fold():
                return
            with self._session():
                self._fold_locked(others=others)

    def _unfolded(self, *, read_only: bool = False, others: bool = True) -> list[Source]:  # noqa: C901
        """What each journal holds beyond its fold mark: (path, inode, mark, bytes, fd to truncate or -1, own).

        This process's journal is all complete transactions. A slot no process holds belongs to
        a process that is gone: it is read whole (a torn tail is left out; damage before a complete
        transaction is an error) and, once folded, emptied. A live process's journal is cut after
        its last complete transaction (a write may be under way). Every journal's data ends at its
        first NUL byte (an in-place journal, `fsync=True`, is zero-filled beyond its data; journal.py),
        so the size from `stat` may be more than the data: reading stops at the zeros. Called with the
        file attached.
        """
        con = self._con
        marks = {f: (ino, folded) for f, ino, folded in con.execute("SELECT file, ino, folded FROM journal_marks").fetchall()}
        out: list[Source] = []
        own = self._journal
        paths = journal_slots(self.path) if self._lockfile is not None and others else []
        if others:
            self._others_at = time.monotonic()
            self._live_journals = 0
        if own is not None and own.path not in paths:
            paths.append(own.path)
        for path in paths:
            name = os.path.basename(path)
            if own is not None and path == own.path:
                ino, size, fd = own.identity(), own.written(), -2
            else:
                fd = -1 if read_only else slot_is_free(path)
                self._live_journals += fd == -1
                try:
                    st = os.stat(path)
                except OSError:
                    if fd >= 0:
                        os.close(fd)
                    continue
                ino, size = st.st_ino, st.st_size
            mark_ino, mark = marks.get(name, (ino, 0))
            if mark_ino != ino or mark > size:
                mark = 0
            if size <= mark:
                if fd >= 0:
                    os.close(fd)
                continue
            if fd == -2:
                data = own.read_at(mark, size - mark)
            else:  # up to the first NUL: an in-place journal (fsync=True) is zero-filled beyond its data
                with open(path, "rb") as f:
                    data = read_data(f.fileno(), mark, size)
            if fd >= 0 or read_only:
                try:
                    data = self._complete(path, data, mark, warn=fd >= 0)
                except JournalDamagedError:
                    if fd >= 0:
                        os.close(fd)
                    raise
            elif fd == -1:
                cut = data.rfind(END)
                data = data[: cut + len(END)] if cut >= 0 else b""
            out.append((path, ino, mark, data, fd, fd == -2))
        return out

    def _complete(self, path: str, data: bytes, mark: int, *, warn: bool) -> bytes:
        """The complete transactions of a journal whose writer is gone (or read by a reader): a torn tail left out."""
        s = scan(data)
        if s.damaged:
            line, start, _ = s.damaged[0]
            after = f" after the {mark} bytes already folded" if mark else ""
            raise JournalDamagedError(
                f"the journal {path} is damaged at line {line} (byte {mark + start}{after}), before "
                f"{len(s.complete)} complete transaction(s) that follow or precede it; it was not replayed and "
                f"is left as it is. Run `python -m lab salvage --store {self.path}` to keep every complete "
                "transaction on both sides, or restore it from a backup"
            )
        if s.torn and warn:
            log.warning("journal %s: dropped a torn tail of %d bytes left by a killed process", path, s.torn)
        return data[: s.good_end]

    def _load_journal_rows(self, con: duckdb.DuckDBPyConnection, sources: list[Source], tmp: str) -> None:
        """`journal_rows` from each journal's unfolded bytes; this process's lines keep their numbers."""
        parts, params = [], []
        order = sorted(range(len(sources)), key=lambda i: not sources[i][5])  # own journal first: offset 0
        for n, i in enumerate(order):
            data = sources[i][3]
            if not data:
                continue
            chunk = os.path.join(tmp, f"{n}.ndjson")
            with open(chunk, "wb") as f:
                f.write(data)
            parts.append(f"SELECT * REPLACE (j + {n * SOURCE} AS j) FROM ({JOURNAL_SELECT})")
            params += [chunk, line_limit(len(data))]
        self._sources = [sources[i][0] for i in order]
        if not parts:
            parts, params = [f"SELECT * FROM ({JOURNAL_SELECT}) LIMIT 0"], [os.path.join(tmp, "none.ndjson"), line_limit(0)]
            with open(params[0], "wb"):
                pass
        con.execute("CREATE OR REPLACE TEMP TABLE journal_rows AS " + " UNION ALL ".join(parts), params)

    def _fold_locked(self, *, others: bool = True) -> None:  # noqa: C901
        """Fold every journal (with the file attached and the store's lock held), then empty what may be."""
        con = self._con
        own = self._journal
        sources = self._unfolded(others=others)
        if not any(data for _, _, _, data, _, _ in sources) and not any(fd >= 0 for *_, fd, _ in sources):
            return
        self.folds += 1
        truncate: list[tuple[str, int]] = []
        try:
            with tempfile.TemporaryDirectory(prefix="graphlab-fold-") as tmp:
                try:
                    con.execute("BEGIN")
                    self._load_journal_rows(con, sources, tmp)
                    kinds = {r[0] for r in con.execute("SELECT DISTINCT t FROM journal_rows").fetchall()}
                    if "b" in kinds:  # boundary rows (lab/store/boundary.py) as the rows they stand for
                        con.execute(EXPAND_BOUNDARIES)
                        kinds |= BOUNDARY_KINDS
                    if "cp" in kinds:
                        self._refuse_checkpoint_conflict(con)
                    for stmt, needs in zip(self._fold_statements(), FOLD_NEEDS, strict=True):
                        if needs & kinds:
                            con.execute(stmt)
                    con.execute("DROP TABLE journal_rows")
                    for path, ino, mark, data, fd, mine in sources:
                        emptied = fd >= 0 or (mine and not own.broken)
                        folded = 0 if emptied else mark + len(data)
                        con.execute(
                            _MARK, [os.path.basename(path), ino, folded]
                        )
                        if emptied:
                            truncate.append((path, fd))
                    con.execute("COMMIT")
                except CheckpointError:
                    con.execute("ROLLBACK")
                    raise
                except duckdb.Error as exc:
                    try:
                        con.execute("ROLLBACK")
                    except duckdb.Error:
                        pass
                    db = self.path if self.path != MEMORY else "the in-memory store"
                    journal = own.path if own is not None else f"{self.path}.journal"
                    raise StoreError(
                        f"cannot fold the journal {journal} into {self.path}: {str(exc).splitlines()[0]}; "
                        "nothing is lost: the journal is kept and replayed on the next open. If this repeats, a line of "
                        f"the journal was damaged or edited by hand: run `python -m lab salvage --store {db}` to fold "
                        "every transaction that can be folded (the journal is first copied aside), or move "
                        f"{journal} aside (it holds the boundaries written since the last fold) to open the "
                        "store without it"
                    ) from None
            for _path, fd in truncate:
                if fd == -2:
                    own.truncate()
                else:
                    os.ftruncate(fd, 0)
        finally:
            for *_, fd, _ in sources:
                if fd >= 0:
                    os.close(fd)

    def _refuse_checkpoint_conflict(self, con: duckdb.DuckDBPyConnection) -> None:
        """A different checkpoint under an id already taken fails the fold, naming both (nothing is folded)."""
        taken = con.execute(
            "SELECT EXISTS (SELECT 1 FROM journal_rows j JOIN checkpoints c ON c.run_id = j.run_id AND c.seq = j.seq "
            "WHERE j.t = 'cp') OR (SELECT count(*) <> count(DISTINCT (run_id, seq)) FROM journal_rows WHERE t = 'cp')"
        ).fetchone()[0]
        if not taken:  # the usual case: every checkpoint line is new (the full comparison below costs more)
            return
        row = con.execute(CHECKPOINT_CONFLICTS).fetchone()
        if row is None:
            return
        run_id, seq, first_line, second_line, first, second = row
        sources = getattr(self, "_sources", [])

        def line(j: int) -> str:
            n, at = divmod(int(j), SOURCE)
            return f"journal line {at} of {sources[n] if n < len(sources) else self._journal.path}"

        where = "stored" if first_line is None else line(first_line)

        def short(text: str) -> str:
            return text if len(text) <= 300 else text[:300] + "..."

        raise CheckpointError(
            f"two different checkpoints claim this id: the {where} one is {short(first)}; "
            f"{line(second_line)} is {short(second)}. A checkpoint id is written once, so "
            "one of them was edited by hand or comes from another store; nothing was folded and the journal is "
            f"kept: remove the line that is wrong from the journal (or move the journal aside) and open the store again",
            run_id=run_id,
            seq=seq,
        )
