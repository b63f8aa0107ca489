"""The DuckDB store: graphs, runs, checkpoint tree and events, with a journal in front.

Writes go to the journal (`journal.py`) and are folded into DuckDB in bulk; every read folds
first, so a read sees everything written before it. DuckDB errors are translated here, once,
into the lab's own errors. One store object per database file per process: opening the same
path again shares it (a notebook re-runs its cells).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import duckdb

from ..errors import RunNotFoundError, StoreError, StoreLockedError, StoreQueryError, StoreSchemaError
from ..manifest import Manifest
from ..records import CheckpointRecord, EventRecord, PendingStation, RunRecord, WaitRecord, utcnow
from .journal import Journal
from .schema import FOLD_STATEMENTS, JOURNAL_SELECT, MIGRATIONS, SCHEMA_VERSION, TABLES

__all__ = ("DuckDBStore", "open_store", "MEMORY")

log = logging.getLogger(__name__)

MEMORY = ":memory:"
_READ_ONLY_TYPES = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
_OPEN: dict[str, DuckDBStore] = {}
_OPEN_LOCK = threading.Lock()
_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", " ".join(s for m in MIGRATIONS for s in m)))
"""Every table the migrations create: a store lacking one was edited by hand."""


def open_store(path: str | os.PathLike[str] = MEMORY, *, fsync: bool = False, fold_every: int = 20000) -> DuckDBStore:
    """The store for `path`, shared within this process; `":memory:"` gives a private one."""
    spath = os.fspath(path)
    if spath == MEMORY:
        return DuckDBStore(MEMORY, fsync=False, fold_every=fold_every)
    real = os.path.realpath(spath)
    with _OPEN_LOCK:
        store = _OPEN.get(real)
        if store is not None and not store.closed:
            store.acquire()
            return store
        store = DuckDBStore(real, fsync=fsync, fold_every=fold_every)
        _OPEN[real] = store
        return store


@atexit.register
def _close_all_at_exit() -> None:
    """A script that ends without `lab.close()` still gets its buffered boundaries folded."""
    for store in list(_OPEN.values()):
        try:
            with store._lock:
                if not store.closed:
                    store._refs = 1
                    store.close()
        except Exception:  # pragma: no cover - best effort at interpreter exit
            log.exception("could not close the store %s at exit", store.path)


def _ts(value: datetime) -> float:
    """Unix seconds: how the journal carries times (the tables hold UTC TIMESTAMPs)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _loads(value: Any) -> Any:
    return None if value is None else json.loads(value)


class DuckDBStore:
    """Graph Lab's store on one DuckDB database (a file, or `:memory:` for tests)."""

    def __init__(self, path: str, *, fsync: bool = False, fold_every: int = 20000):
        self.path = path
        self.fold_every = fold_every
        self.closed = False
        self.recovered = False
        """True when opening replayed a journal a previous process left behind."""
        self._refs = 1
        self.live_runs: dict[str, Any] = {}
        """Run handles open in this process, shared by every Lab on this store."""
        self.recovery_done = False
        self._lock = threading.RLock()
        self._buffer: list[bytes] = []
        self._buffer_lines = 0
        self._tmpdir: str | None = None
        if path == MEMORY:
            self._tmpdir = tempfile.mkdtemp(prefix="graphlab-")
            journal_path = os.path.join(self._tmpdir, "journal.ndjson")
            self._con = duckdb.connect(MEMORY)
        else:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            journal_path = path + ".journal"
            self._con = self._connect(path)
        try:
            self._migrate()
            self._journal = Journal(journal_path, fsync=fsync)
            report = self._journal.recover()
            if report.lines:
                self.recovered = True
                log.info("store %s: replaying %d journal lines", path, report.lines)
                self.fold()
        except BaseException:
            self._con.close()
            raise

    # -- opening -------------------------------------------------------------------------

    @staticmethod
    def _connect(path: str) -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(path)
        except duckdb.IOException as exc:
            text = str(exc)
            if "lock" in text.lower():
                pid = text.split("PID ")[-1].split(")")[0] if "PID " in text else "another process"
                raise StoreLockedError(
                    f"the store {path} is open in another process (PID {pid}); close that notebook's "
                    "kernel or call lab.close() there, or open a different path with Lab('other.duckdb')"
                ) from None
            raise StoreError(
                f"cannot open the store {path}: it is not a DuckDB database or is damaged ({text.splitlines()[0]}); "
                "move the file aside to start a new store, or open another path"
            ) from None
        except duckdb.Error as exc:
            raise StoreError(
                f"cannot open the store {path}: {str(exc).splitlines()[0]}; "
                "move the file aside to start a new store, or open another path"
            ) from None

    def _migrate(self) -> None:
        con = self._con
        try:
            has_meta = con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'"
            ).fetchone()[0]
            version = 0
            if has_meta:
                row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = int(row[0]) if row else 0
        except duckdb.Error as exc:
            raise StoreError(
                f"cannot open the store {self.path}: it is damaged or not a Graph Lab store "
                f"({str(exc).splitlines()[0]}); move the file aside to start a new store, or restore it from a backup"
            ) from None
        if version > SCHEMA_VERSION:
            raise StoreSchemaError(
                f"the store {self.path} was written by a newer Graph Lab (schema {version}; this version "
                f"knows up to {SCHEMA_VERSION}); upgrade graph-lab to open it"
            )
        for v in range(version, SCHEMA_VERSION):
            con.execute("BEGIN")
            for stmt in MIGRATIONS[v]:
                con.execute(stmt)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(v + 1)])
            con.execute("COMMIT")
        present = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'").fetchall()}
        missing = sorted(_TABLES - present)
        if missing:
            raise StoreError(
                f"the store {self.path} (schema {version}) lacks its table(s) {missing}: it was edited outside "
                "Graph Lab; restore it from a backup, or move the file aside to start a new store"
            )

    def acquire(self) -> None:
        with self._lock:
            self._refs += 1

    def close(self) -> None:
        """Fold the journal and close; shared handles close when the last holder closes."""
        with self._lock:
            if self.closed:
                return
            self._refs -= 1
            if self._refs > 0:
                return
            try:
                self.fold()
            finally:
                self.closed = True
                self._journal.close()
                self._con.close()
                if self._tmpdir:
                    shutil.rmtree(self._tmpdir, ignore_errors=True)
                with _OPEN_LOCK:
                    if _OPEN.get(self.path) is self:
                        del _OPEN[self.path]

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError(f"the store {self.path} is closed; open it again with Lab({self.path!r})")

    # -- writing -------------------------------------------------------------------------

    def write(self, rows: Sequence[dict[str, Any]], *, sync: bool = True) -> None:
        """Append one transaction of journal rows. `sync=False` buffers it (durability="batch")."""
        with self._lock:
            self._check_open()
            blob = self._journal.encode(rows)
            self._buffer.append(blob)
            self._buffer_lines += len(rows)
            if sync:
                self._flush_buffer()
                if self._journal.pending_lines >= self.fold_every:
                    self.fold()

    def flush(self) -> None:
        """Hand buffered transactions to the OS (durability="batch" calls this every N boundaries)."""
        with self._lock:
            self._flush_buffer()

    def _flush_buffer(self) -> None:
        if self._buffer:
            blob = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
            self._journal.write(blob, self._buffer_lines)
            self._buffer.clear()
            self._buffer_lines = 0

    def fold(self) -> None:
        """Move everything journalled into the DuckDB tables in one transaction."""
        with self._lock:
            self._flush_buffer()
            if self._journal.pending_lines == 0 and self._journal.size() == 0:
                return
            con = self._con
            try:
                con.execute("BEGIN")
                con.execute("CREATE OR REPLACE TEMP TABLE journal_rows AS " + JOURNAL_SELECT, [self._journal.path])
                for stmt in FOLD_STATEMENTS:
                    con.execute(stmt)
                con.execute("DROP TABLE journal_rows")
                con.execute("COMMIT")
            except duckdb.Error as exc:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                raise StoreError(
                    f"cannot fold the journal {self._journal.path} into {self.path}: {str(exc).splitlines()[0]}; "
                    "nothing is lost: the journal is kept and replayed on the next open. If this repeats, a line of "
                    f"the journal was damaged or edited by hand: move {self._journal.path} aside (it holds the "
                    "boundaries written since the last fold) to open the store without it"
                ) from None
            self._journal.truncate()

    def register_graph(self, manifest: Manifest) -> int:
        """The revision number of this manifest's digest under its key, stored on first sight."""
        with self._lock:
            self._check_open()
            con = self._con
            row = con.execute(
                "SELECT revision FROM graphs WHERE graph_key = ? AND digest = ?", [manifest.key, manifest.digest]
            ).fetchone()
            if row:
                return int(row[0])
            nxt = con.execute(
                "SELECT coalesce(max(revision), 0) + 1 FROM graphs WHERE graph_key = ?", [manifest.key]
            ).fetchone()[0]
            body = manifest.with_revision(int(nxt)).to_json()
            con.execute(
                "INSERT INTO graphs VALUES (?, ?, ?, ?, ?)",
                [manifest.key, int(nxt), manifest.digest, json.dumps(body), utcnow().replace(tzinfo=None)],
            )
            return int(nxt)

    def manifest(self, key: str, revision: int) -> Manifest | None:
        with self._lock:
            self._check_open()
            row = self._con.execute(
                "SELECT manifest FROM graphs WHERE graph_key = ? AND revision = ?", [key, revision]
            ).fetchone()
        return Manifest.from_json(json.loads(row[0])) if row else None

    # -- row builders (the journal's wire format) ----------------------------------------

    @staticmethod
    def run_row(run: RunRecord) -> dict[str, Any]:
        return {
            "t": "run",
            "run_id": run.run_id,
            "graph_key": run.graph_key,
            "revision": run.revision,
            "digest": run.digest,
            "status": run.status,
            "head_seq": run.head_seq,
            "durability": run.durability,
            "output": run.output,
            "error": run.error,
            "created_at": _ts(run.created_at),
            "updated_at": _ts(run.updated_at),
            "parent_run_id": run.parent_run_id,
            "parent_seq": run.parent_seq,
            "breakpoints": run.breakpoints,
        }

    @staticmethod
    def checkpoint_row(cp: CheckpointRecord) -> dict[str, Any]:
        return {
            "t": "cp",
            "run_id": cp.run_id,
            "seq": cp.seq,
            "parent_seq": cp.parent_seq,
            "status": cp.status,
            "state": cp.state,
            "next": [p.to_json() for p in cp.next],
            "output": cp.output,
            "created_at": _ts(cp.created_at),
            "counters": cp.counters,
        }

    @staticmethod
    def event_row(ev: EventRecord) -> dict[str, Any]:
        return {
            "t": "ev",
            "run_id": ev.run_id,
            "seq": ev.seq,
            "kind": ev.kind,
            "node_id": ev.node_id,
            "attempt": ev.attempt,
            "checkpoint_seq": ev.checkpoint_seq,
            "payload": ev.payload,
            "created_at": _ts(ev.created_at),
        }

    @staticmethod
    def update_row(
        run_id: str, *, status: str, head_seq: int | None, output: Any = None, error: Any = None
    ) -> dict[str, Any]:
        return {
            "t": "upd",
            "run_id": run_id,
            "status": status,
            "head_seq": head_seq,
            "output": output,
            "error": error,
            "updated_at": time.time(),
        }

    @staticmethod
    def wait_row(wait: WaitRecord) -> dict[str, Any]:
        return {
            "t": "wait",
            "owner": wait.owner,
            "run_id": wait.run_id,
            "kind": wait.kind,
            "node_id": wait.node_id,
            "checkpoint_seq": wait.checkpoint_seq,
            "prompt": wait.prompt,
            "details": wait.details,
            "prior": wait.prior,
            "created_at": _ts(wait.created_at),
        }

    @staticmethod
    def resolution_row(owner: str, resolution: dict[str, Any], at: datetime) -> dict[str, Any]:
        """A wait's verdict, answer or grant; the first one for an owner wins on fold."""
        return {"t": "vd", "owner": owner, "resolution": resolution, "resolved_at": _ts(at)}

    @staticmethod
    def breakpoints_row(run_id: str, breakpoints: dict[str, list[str]]) -> dict[str, Any]:
        return {"t": "bp", "run_id": run_id, "breakpoints": breakpoints}

    # -- reading -------------------------------------------------------------------------

    def waits(self, run_id: str) -> list[WaitRecord]:
        """Every wait of a run, oldest first: the open one (if any) and the answered evidence."""
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {_WAIT_COLS} FROM waits WHERE run_id = ? ORDER BY checkpoint_seq, created_at", [run_id]
            ).fetchall()
        return [_wait_record(r) for r in rows]

    def wait_at(self, run_id: str, seq: int) -> WaitRecord | None:
        """The wait bound to checkpoint `seq` of a run (a waiting checkpoint has exactly one)."""
        with self._reading() as con:
            row = con.execute(
                f"SELECT {_WAIT_COLS} FROM waits WHERE run_id = ? AND checkpoint_seq = ? "
                "ORDER BY created_at DESC LIMIT 1",
                [run_id, seq],
            ).fetchone()
        return _wait_record(row) if row else None

    def open_waits(self) -> list[WaitRecord]:
        """Every unanswered wait of a waiting run in the store (what needs a person)."""
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {', '.join('w.' + c.strip() for c in _WAIT_COLS.split(','))} FROM waits w "
                "JOIN runs r ON r.run_id = w.run_id AND r.head_seq = w.checkpoint_seq "
                "WHERE w.resolved_at IS NULL AND r.status = 'waiting' ORDER BY w.created_at"
            ).fetchall()
        return [_wait_record(r) for r in rows]

    @contextmanager
    def _reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            self._check_open()
            self.fold()
            try:
                yield self._con
            except duckdb.Error as exc:
                raise StoreError(
                    f"cannot read the store {self.path}: {str(exc).splitlines()[0]}; if it was edited outside "
                    "Graph Lab, restore it from a backup"
                ) from None

    def get_run(self, run_id: str) -> RunRecord:
        with self._reading() as con:
            row = con.execute(f"SELECT {_RUN_COLS} FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise RunNotFoundError(f"no run {run_id!r} in the store {self.path}; lab.runs() lists the runs it holds")
        return _run_record(row)

    def list_runs(self, *, graph_key: str | None = None, status: str | None = None) -> list[RunRecord]:
        sql = f"SELECT {_RUN_COLS} FROM runs WHERE 1=1"
        params: list[Any] = []
        if graph_key is not None:
            sql += " AND graph_key = ?"
            params.append(graph_key)
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        with self._reading() as con:
            rows = con.execute(sql + " ORDER BY created_at, run_id", params).fetchall()
        return [_run_record(r) for r in rows]

    def checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {_CP_COLS} FROM checkpoints WHERE run_id = ? ORDER BY seq", [run_id]
            ).fetchall()
        return [_checkpoint_record(r) for r in rows]

    def checkpoint(self, run_id: str, seq: int) -> CheckpointRecord | None:
        with self._reading() as con:
            row = con.execute(
                f"SELECT {_CP_COLS} FROM checkpoints WHERE run_id = ? AND seq = ?", [run_id, seq]
            ).fetchone()
        return _checkpoint_record(row) if row else None

    def events(self, run_id: str, *, kind: str | None = None) -> list[EventRecord]:
        sql = f"SELECT {_EV_COLS} FROM events WHERE run_id = ?"
        params: list[Any] = [run_id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        with self._reading() as con:
            rows = con.execute(sql + " ORDER BY seq", params).fetchall()
        return [_event_record(r) for r in rows]

    def event_tail(self, run_id: str, n: int) -> tuple[int, list[EventRecord]]:
        """How many events a run has, and its last `n` in order (a view of a long run reads only these)."""
        with self._reading() as con:
            count = con.execute("SELECT count(*) FROM events WHERE run_id = ?", [run_id]).fetchone()[0]
            rows = con.execute(
                f"SELECT {_EV_COLS} FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT ?", [run_id, max(0, n)]
            ).fetchall()
        return int(count), [_event_record(r) for r in reversed(rows)]

    def settled_stations(self, run_id: str) -> dict[int, str]:
        """Checkpoint seq -> the station whose settlement wrote it, for every settled boundary."""
        with self._reading() as con:
            rows = con.execute(
                "SELECT checkpoint_seq, node_id FROM events WHERE run_id = ? AND kind = 'settled' "
                "AND checkpoint_seq IS NOT NULL AND node_id IS NOT NULL",
                [run_id],
            ).fetchall()
        return {int(seq): node for seq, node in rows}

    def next_seqs(self, run_id: str) -> tuple[int, int]:
        """The next free checkpoint and event sequence numbers of a run."""
        with self._reading() as con:
            cp = con.execute("SELECT coalesce(max(seq), -1) + 1 FROM checkpoints WHERE run_id = ?", [run_id])
            cp_next = cp.fetchone()[0]
            ev_next = con.execute(
                "SELECT coalesce(max(seq), -1) + 1 FROM events WHERE run_id = ?", [run_id]
            ).fetchone()[0]
        return int(cp_next), int(ev_next)

    def sql(self, query: str, params: Sequence[Any] | None = None) -> duckdb.DuckDBPyRelation:
        """Run read-only SQL; returns a DuckDB relation (it prints and displays as a table)."""
        if not isinstance(query, str) or not query.strip():
            raise StoreQueryError("lab.sql needs a SELECT statement as a string")
        with self._reading() as con:
            try:
                statements = con.extract_statements(query)
            except duckdb.Error as exc:
                raise StoreQueryError(f"SQL error: {str(exc).strip()}") from None
            if len(statements) != 1:
                raise StoreQueryError(f"lab.sql runs one statement at a time; got {len(statements)}")
            if statements[0].type not in _READ_ONLY_TYPES:
                raise StoreQueryError(
                    f"lab.sql is read-only; {statements[0].type.name} statements are refused. "
                    "Change runs through the Run API (rewind, fork, edit_state, prune)"
                )
            cursor = con.cursor()
        try:
            return cursor.sql(query, params=params) if params else cursor.sql(query)
        except duckdb.Error as exc:
            raise StoreQueryError(f"SQL error: {str(exc).strip()}") from None

    def seqs(self, run_id: str) -> list[int]:
        """Every checkpoint sequence number of a run, ascending."""
        with self._reading() as con:
            row = con.execute("SELECT list(seq ORDER BY seq) FROM checkpoints WHERE run_id = ?", [run_id]).fetchone()
        return list(row[0] or [])

    def branch(self, run_id: str, head: int) -> list[int]:
        """The sequence numbers from the root to `head`, following parent links."""
        with self._reading() as con:
            linear = con.execute(
                "SELECT count(*) > 0 AND count(*) FILTER (WHERE parent_seq IS DISTINCT FROM "
                "CASE WHEN seq = 0 THEN NULL ELSE seq - 1 END) = 0 AND max(seq) + 1 = count(*) "
                "FROM checkpoints WHERE run_id = ?",
                [run_id],
            ).fetchone()[0]
            if linear:  # never rewound: every checkpoint's parent is the one before it
                return list(range(head + 1))
            row = con.execute(
                "SELECT list(seq), list(parent_seq) FROM checkpoints WHERE run_id = ?", [run_id]
            ).fetchone()
        parent = dict(zip(row[0] or [], row[1] or [], strict=True))
        path: list[int] = []
        seq: int | None = head
        while seq is not None and seq in parent and len(path) <= len(parent):
            path.append(seq)
            seq = parent[seq]
        path.reverse()
        return path

    def checkpoints_in(self, run_id: str, seqs: Sequence[int]) -> list[CheckpointRecord]:
        """The checkpoints with these sequence numbers, in the order given."""
        if not seqs:
            return []
        with self._reading() as con:
            rows = con.execute(
                f"SELECT {_CP_COLS} FROM checkpoints WHERE run_id = ? AND seq IN (SELECT unnest(?::BIGINT[]))",
                [run_id, list(seqs)],
            ).fetchall()
        by_seq = {int(r[1]): r for r in rows}
        return [_checkpoint_record(by_seq[s]) for s in seqs if s in by_seq]

    def delete_checkpoints(self, run_id: str, keep: Sequence[int]) -> int:
        """Delete a run's checkpoints except `keep`; returns how many went. Callers check terminality."""
        with self._reading() as con:
            n = con.execute(
                "SELECT count(*) FROM checkpoints WHERE run_id = ? AND seq NOT IN (SELECT unnest(?::BIGINT[]))",
                [run_id, list(keep)],
            ).fetchone()[0]
            con.execute("BEGIN")
            try:
                con.execute(
                    "DELETE FROM checkpoints WHERE run_id = ? AND seq NOT IN (SELECT unnest(?::BIGINT[]))",
                    [run_id, list(keep)],
                )
                con.execute("COMMIT")
            except duckdb.Error as exc:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot prune run {run_id}: {str(exc).splitlines()[0]}") from None
        return int(n)

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its checkpoints and events. Callers check terminality."""
        with self._reading() as con:
            con.execute("BEGIN")
            try:
                for table in ("checkpoints", "events", "waits", "runs"):
                    con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
                con.execute("COMMIT")
            except duckdb.Error as exc:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot delete run {run_id}: {str(exc).splitlines()[0]}") from None

    def family(self, run_id: str) -> list[RunRecord]:
        """The run's lineage: its ancestors (root first), itself, then every descendant."""
        with self._reading() as con:
            rows = con.execute(f"SELECT {_RUN_COLS} FROM runs WHERE run_id = ? OR parent_run_id IS NOT NULL", [run_id]).fetchall()
        recs = {r[0]: _run_record(r) for r in rows}
        if run_id not in recs:
            raise RunNotFoundError(f"no run {run_id!r} in the store {self.path}; lab.runs() lists the runs it holds")
        chain = [recs[run_id]]
        while chain[0].parent_run_id is not None:
            parent = recs.get(chain[0].parent_run_id) or self._run_or_none(chain[0].parent_run_id)
            if parent is None:
                break
            chain.insert(0, parent)
        children: dict[str, list[RunRecord]] = {}
        for rec in recs.values():
            if rec.parent_run_id is not None:
                children.setdefault(rec.parent_run_id, []).append(rec)
        out = list(chain)
        queue = [run_id]
        while queue:
            for child in sorted(children.get(queue.pop(0), []), key=lambda r: r.run_id):
                out.append(child)
                queue.append(child.run_id)
        return out

    def _run_or_none(self, run_id: str) -> RunRecord | None:
        try:
            return self.get_run(run_id)
        except RunNotFoundError:
            return None

    def table_snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, for tests that prove a refused action changed nothing."""
        out = {}
        with self._reading() as con:
            for table in TABLES:
                out[table] = con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        return out


_RUN_COLS = (
    "run_id, graph_key, revision, digest, status, head_seq, durability, output, error, "
    "created_at, updated_at, parent_run_id, parent_seq, breakpoints"
)
_CP_COLS = "run_id, seq, parent_seq, status, state, next, output, created_at, counters"
_WAIT_COLS = (
    "run_id, owner, kind, node_id, checkpoint_seq, prompt, details, prior, created_at, resolved_at, resolution"
)
_EV_COLS = "run_id, seq, kind, node_id, attempt, checkpoint_seq, payload, created_at"


def _run_record(r: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        run_id=r[0],
        graph_key=r[1],
        revision=int(r[2]),
        digest=r[3],
        status=r[4],
        head_seq=r[5],
        durability=r[6],
        output=_loads(r[7]),
        error=_loads(r[8]),
        created_at=r[9],
        updated_at=r[10],
        parent_run_id=r[11],
        parent_seq=r[12],
        breakpoints=_loads(r[13]),
    )


def _checkpoint_record(r: tuple[Any, ...]) -> CheckpointRecord:
    run_id, seq = r[0], int(r[1])
    try:
        state = _loads(r[4])
        nxt = _loads(r[5])
        output = _loads(r[6])
        counters = _loads(r[8])
        stations = tuple(PendingStation(p["node_id"], p["fields"]) for p in nxt)
    except (ValueError, TypeError, KeyError) as exc:
        from ..errors import CheckpointError

        raise CheckpointError(
            f"stored JSON is damaged ({exc}); other runs and checkpoints are unaffected: fork the run from "
            "an earlier checkpoint (lab.fork(run_id, seq)), or restore the store file from a backup",
            run_id=run_id,
            seq=seq,
        ) from None
    return CheckpointRecord(
        run_id=run_id,
        seq=seq,
        parent_seq=r[2],
        status=r[3],
        state=state,
        next=stations,
        output=output,
        created_at=r[7],
        counters=counters,
    )


def _event_record(r: tuple[Any, ...]) -> EventRecord:
    try:
        payload = _loads(r[6]) or {}
    except ValueError:
        payload = {"damaged_payload": r[6]}
    return EventRecord(
        run_id=r[0],
        seq=int(r[1]),
        kind=r[2],
        node_id=r[3],
        attempt=r[4],
        checkpoint_seq=r[5],
        payload=payload,
        created_at=r[7],
    )


def _wait_record(r: tuple[Any, ...]) -> WaitRecord:
    try:
        details, prior, resolution = _loads(r[6]), _loads(r[7]) or [], _loads(r[10])
    except ValueError as exc:
        from ..errors import CheckpointError

        raise CheckpointError(
            f"the stored wait {r[1]} is damaged ({exc}); other runs are unaffected", run_id=r[0], seq=r[4]
        ) from None
    return WaitRecord(
        run_id=r[0],
        owner=r[1],
        kind=r[2],
        node_id=r[3],
        checkpoint_seq=int(r[4]),
        prompt=r[5],
        details=details,
        prior=prior,
        created_at=r[8],
        resolved_at=r[9],
        resolution=resolution,
    )
