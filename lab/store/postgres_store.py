"""The PostgreSQL store: one shared server for a team, `Lab("postgresql://user@host/db")`.

Same tables and columns as the DuckDB store (docs/store.md), JSON as `jsonb`. Every boundary
is one transaction and one round trip: the rows travel as one JSON array to the server-side
function `graphlab_write` (postgres_schema.py), which applies them under a per-run lock, on one
pooled connection the store keeps for its writes (`_WriteConnection`); a station's usual boundary
goes as typed parameters to `graphlab_station` (postgres_station.py) instead. Connections come from a
`psycopg_pool` pool; psycopg errors are translated here, once, into the lab's own errors.
Several processes (machines) may open one store at once: each run is stepped by the process that
holds its handle, a verdict is recorded once (the first wins). Who holds a run, across a server
restart, is postgres_session.py; `lab.sql`, on a connection of its own, postgres_sql.py.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import duckdb

from ..errors import (
    CheckpointError,
    RunOwnedError,
    StoreError,
    StoreLockedError,
    WaitAnsweredError,
)
from ..manifest import Manifest
from ..records import utcnow
from . import sql_text as q
from .base import Store
from .boundary import expand, has_boundary
from .dialect import POSTGRES
from .holders import Process
from .journal import UnstorableValueError, dumps, string_at
from .journal_lines import plain_json
from .postgres_calls import PostgresCalls
from .postgres_effects import PostgresEffects
from .postgres_evals import PostgresEvals
from .postgres_jobs import PostgresJobs
from .postgres_schema import (
    GRAPH_LOCK,
    INSTALLED_WRITE_FUNCTION,
    MIGRATE_LOCK,
    MIGRATIONS,
    WRITE_FUNCTION,
    WRITE_FUNCTION_SOURCE,
    WRITERS_TABLE,
)
from .postgres_session import LiveSession, check_pooled, holders, stale
from .postgres_sql import SQL_TIMEOUT, SqlSession
from .postgres_station import FORMATS as STATION_FORMATS
from .postgres_station import (
    INSTALLED_STATION_FUNCTION,
    STATION,
    STATION_FUNCTION,
    STATION_FUNCTION_SOURCE,
    STATION_NAME,
    boundary_params,
    station_params,
)
from .reads import Rows, SqlReads
from .schema import SCHEMA_VERSION, TABLES, stored_version

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

__all__ = ("PostgresStore", "open_postgres", "is_postgres_url", "redact")

log = logging.getLogger(__name__)

_OPEN: dict[str, PostgresStore] = {}
_OPEN_LOCK = threading.Lock()
_URL = re.compile(r"^postgres(ql)?://", re.IGNORECASE)
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@/]*@")
_NUL = b"\\u0000"
_WRITE = b"SELECT graphlab_write($1::jsonb)"
"""A boundary: its rows, one JSON array, to the server-side function (postgres_schema.py)."""
_WRITE_NAME = b"graphlab_write"
"""The name `_WRITE` is prepared under on the write connection."""
_STEPS = frozenset({"cp", "b"})
"""Rows that make the process writing them the run's writer (a checkpoint, or a boundary row holding one)."""
_OBSERVATIONS = frozenset({"payload", "error"})
_INSTALL = "pip install 'graph-lab[postgres]' (psycopg 3 and psycopg-pool)"
OPEN_TIMEOUT = 30.0
"""Seconds `Lab(url)` waits for a lock someone else holds on the store before it says who holds it."""


def is_postgres_url(location: object) -> bool:
    """True for a `postgresql://` (or `postgres://`) URL: `Lab(url)` opens the PostgreSQL store."""
    return isinstance(location, str) and bool(_URL.match(location))


def redact(url: str) -> str:
    """The URL without its password, for messages and `store.path`."""
    return _PASSWORD.sub(r"\1***@", url)


def open_postgres(url: str, *, fsync: bool | None = None) -> PostgresStore:
    """The store at `url`, shared within this process (a notebook re-runs `Lab(url)`)."""
    with _OPEN_LOCK:
        store = _OPEN.get(url)
        if store is not None and not store.closed:
            if fsync is not None and fsync != store.fsync:
                raise StoreError(
                    f"the store {store.path} is already open in this process with fsync={store.fsync}; call "
                    "lab.close() on the Lab that holds it first, or leave fsync out to share the open store"
                )
            return store
        store = PostgresStore(url, fsync=fsync)
        _OPEN[url] = store
        return store


def _drivers() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise StoreError(f"a PostgreSQL store needs psycopg: {_INSTALL} ({exc})") from None
    return psycopg, psycopg_pool


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _release(pool: Any, live: list[Any]) -> None:
    """Close the pool, the live session and lab.sql's connection (on close, collection or exit)."""
    for con in live:
        try:
            con.close()
        except Exception:  # pragma: no cover - best effort
            pass
    try:
        pool.close()
    except Exception:  # pragma: no cover - best effort
        pass



class _WriteConnection:
    """The pooled connection the store writes with, kept between writes (used under the store's lock).

    A boundary is one round trip with nothing around it: `graphlab_write` is prepared once per
    connection and run with libpq's `PQexecPrepared` (psycopg's `pgconn.exec_prepared`), the rows'
    JSON as the one text parameter, in autocommit: one transaction. A connection the server ended (a
    restart) is given back to the pool, which replaces it, before the next write.
    """

    def __init__(self, psycopg: Any, pool: Any):
        self._pg = psycopg
        self._pool = pool
        self._con: Any = None

    @property
    def idle(self) -> Any:
        """The connection kept for the next write, or None: the live session checks it with its own
        connection, in one `poll` (`LiveSession.hold(..., also=...)`)."""
        return self._con

    def send(self, blob: bytes, *, ended: bool | None = None) -> None:
        """Apply one boundary's rows; a failure raises the psycopg error the server's answer makes.

        `ended`: whether the kept connection was found ended by the server just now (None: look here)."""
        res = self._connection(ended).pgconn.exec_prepared(_WRITE_NAME, [blob])
        if res.status != self._pg.pq.ExecStatus.TUPLES_OK:
            raise self._pg.errors.error_from_result(res, encoding="utf-8")

    def send_station(self, params: list[bytes | None], *, ended: bool | None = None) -> None:
        """Apply a station's boundary as `graphlab_station`'s typed parameters (postgres_station.py)."""
        res = self._connection(ended).pgconn.exec_prepared(STATION_NAME, params, STATION_FORMATS)
        if res.status != self._pg.pq.ExecStatus.TUPLES_OK:
            raise self._pg.errors.error_from_result(res, encoding="utf-8")

    def _connection(self, ended: bool | None = None) -> Any:
        if self._con is not None and not (stale(self._con) if ended is None else ended):
            return self._con
        self.drop()
        con = self._pool.getconn()  # `check_pooled` hands out only a live one
        try:
            self._prepare(con.pgconn)
        except BaseException:
            self._pool.putconn(con)
            raise
        self._con = con
        return con

    def _prepare(self, pgconn: Any) -> None:
        for name, statement in ((_WRITE_NAME, _WRITE), (STATION_NAME, STATION)):
            res = pgconn.prepare(name, statement)
            if res.status != self._pg.pq.ExecStatus.COMMAND_OK:
                err = self._pg.errors.error_from_result(res, encoding="utf-8")
                if not isinstance(err, self._pg.errors.DuplicatePreparedStatement):  # this session had it already
                    raise err

    def drop(self) -> None:
        """Give the connection back to the pool (it discards a broken one)."""
        con, self._con = self._con, None
        if con is not None:
            try:
                self._pool.putconn(con)
            except Exception:  # pragma: no cover - the pool is closing
                con.close()

    def close(self) -> None:
        self.drop()


def _unreachable(path: str, where: str, exc: BaseException) -> str:
    """What failed when the server cannot be reached or refuses, and what to do."""
    text = _first_line(exc)
    if "password" in text.lower() or "authentication" in text.lower():
        what = "the server refused the user or password"
        todo = "check the user and password in the URL (or PGPASSWORD / ~/.pgpass)"
    elif "does not exist" in text.lower():
        what = "the database or role does not exist"
        todo = "create it (createdb NAME) or name an existing one in the URL"
    elif "lock timeout" in text.lower():
        what = "another session holds a lock on the store's tables and does not let go"
        todo = "find it (SELECT * FROM pg_locks JOIN pg_stat_activity USING (pid)) and end it, then retry"
    else:
        what = "no PostgreSQL server answered"
        todo = (
            "start the server (pg_ctl start, or your service manager), check the host and port in the URL, "
            "or use Lab() for the embedded DuckDB store"
        )
    return f"cannot open the PostgreSQL store {path} ({where}): {what} ({text}); {todo}"


class PostgresStore(SqlReads, PostgresJobs, PostgresEffects, PostgresCalls, PostgresEvals, Store):
    """Graph Lab's store on a PostgreSQL database (psycopg 3, a connection pool)."""

    dialect = POSTGRES

    def __init__(self, url: str, *, fsync: bool | None = None, pool_size: int = 4):
        psycopg, psycopg_pool = _drivers()
        self._pg = psycopg
        self.url = url
        self.path = redact(url)
        self.fsync = fsync
        self.closed = False
        self.live_runs: dict[str, Any] = {}
        self.recovery_done = False
        self._lock = threading.RLock()
        self._buffer: list[dict[str, Any]] = []
        self.sql_timeout = SQL_TIMEOUT
        """Seconds a `lab.sql` query may run before the server stops it."""
        try:
            info = psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.ProgrammingError as exc:
            raise StoreError(
                f"Lab({self.path!r}) is not a PostgreSQL URL psycopg can read ({_first_line(exc)}); write it as "
                "postgresql://user:password@host:5432/database, or use Lab() for the embedded DuckDB store"
            ) from None
        self._where = f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}/{info.get('dbname') or info.get('user') or ''}"
        options = "-c application_name=graph-lab"
        if fsync is not None:
            options += f" -c synchronous_commit={'on' if fsync else 'off'}"
        options += " -c lock_timeout=120s"  # no store operation waits for ever on someone else's lock
        kwargs = {"autocommit": True, "options": options, "connect_timeout": 10, "keepalives": 1, "keepalives_idle": 30}
        live: list[Any] = []
        try:  # this process's live session (postgres_session.py); also proves the server is there
            path, where = self.path, self._where  # not `self`: the session must not keep the store alive
            self._session = LiveSession(
                lambda: psycopg.connect(url, **kwargs),
                lambda exc: f"cannot write to the PostgreSQL store {path}: {_unreachable(path, where, exc)}",
            )
        except psycopg.Error as exc:
            raise StoreError(self._unreachable(exc)) from None
        self._sql = SqlSession(psycopg, url, {"connect_timeout": 10}, self._where)
        live += [self._session, self._sql]
        self._pool: psycopg_pool.ConnectionPool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=pool_size, kwargs=kwargs, open=False, timeout=30, name="graph-lab",
            check=check_pooled,  # a connection the server ended (a restart) is replaced, not handed out
        )
        try:
            self._pool.open(wait=True, timeout=30)
            self._migrate()
        except BaseException as exc:
            _release(self._pool, live)
            if isinstance(exc, psycopg.Error | psycopg_pool.PoolTimeout):
                raise StoreError(self._unreachable(exc)) from None
            raise
        self._session.on_drop = self._pool.check
        self._writes = _WriteConnection(psycopg, self._pool)
        live.insert(0, self._writes)  # given back before the pool closes
        self._finalizer = weakref.finalize(self, _release, self._pool, live)

    def _unreachable(self, exc: BaseException) -> str:
        return _unreachable(self.path, self._where, exc)


    # -- opening -------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Create or upgrade the tables (one process at a time); refuse a newer schema, changing nothing."""
        with self._pool.connection() as con, con.transaction():
            self._wait_for_migrate_lock(con)
            version = self._version(con)
            for v in range(version, SCHEMA_VERSION):
                for stmt in MIGRATIONS[v]:
                    con.execute(stmt)
                con.execute(POSTGRES.upsert("meta", q.META_COLUMNS, "key"), ["schema_version", str(v + 1)])
            present = {
                r[0]
                for r in con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                ).fetchall()
            }
            if "writers" not in present:  # migrated to 4 by an older Graph Lab
                con.execute(WRITERS_TABLE)
            for installed_sql, source, function in (
                (INSTALLED_WRITE_FUNCTION, WRITE_FUNCTION_SOURCE, WRITE_FUNCTION),
                (INSTALLED_STATION_FUNCTION, STATION_FUNCTION_SOURCE, STATION_FUNCTION),
            ):
                installed = con.execute(installed_sql).fetchone()
                if installed is None or installed[0] != source:  # none, or an older Graph Lab's: this one's
                    con.execute(function)
            missing = sorted(set(TABLES) - present)
            if missing:
                raise StoreError(
                    f"the PostgreSQL store {self.path} (schema {version}) lacks its table(s) {missing}: they were "
                    "dropped outside Graph Lab; restore them from a backup, or point the lab at another database"
                )

    def _wait_for_migrate_lock(self, con: psycopg.Connection[Any]) -> None:
        """The schema lock, or after `OPEN_TIMEOUT` s a `StoreLockedError` naming who holds it."""
        deadline = time.monotonic() + OPEN_TIMEOUT
        pause = 0.01
        while not con.execute("SELECT pg_try_advisory_xact_lock(%s)", [MIGRATE_LOCK]).fetchone()[0]:
            left = deadline - time.monotonic()
            if left <= 0:
                holder = con.execute(
                    "SELECT a.pid, a.usename, a.application_name, a.client_addr FROM pg_locks l "
                    "LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                    "AND l.objsubid = 1 AND l.objid::bigint = %s LIMIT 1",
                    [MIGRATE_LOCK],
                ).fetchone()
                who = (
                    f"server process {holder[0]} (user {holder[1] or '?'}, application {holder[2] or '?'}, from "
                    f"{holder[3] or 'a local socket'})" if holder else "another session"
                )
                raise StoreLockedError(
                    f"cannot open the PostgreSQL store {self.path}: {who} has held its schema lock for "
                    f"{OPEN_TIMEOUT:g} s (an advisory lock, {MIGRATE_LOCK}). Graph Lab releases it within "
                    f"moments; end that session or let it unlock (SELECT pg_terminate_backend({holder[0] if holder else 'PID'}) "
                    "as the database's administrator), then open the lab again"
                )
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.25)
        con.execute("SELECT set_config('lock_timeout', %s, true)", [f"{max(1, int((deadline - time.monotonic()) * 1000))}ms"])

    def _version(self, con: psycopg.Connection[Any]) -> int:
        has_meta = con.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0]
        if not has_meta:
            return 0
        row = con.execute(q.SCHEMA_VERSION_READ).fetchone()
        return stored_version(
            f"the PostgreSQL store {self.path}", row[0] if row else None, "point the lab at another database"
        )

    def close(self) -> None:
        """Write what is buffered and release the connections, for every Lab in this process sharing it."""
        with self._lock:
            if self.closed:
                return
            try:
                self._flush_buffer()
            finally:
                self.closed = True
                self._finalizer()  # the live session's `writers` rows go with it
                with _OPEN_LOCK:
                    if _OPEN.get(self.url) is self:
                        del _OPEN[self.url]

    def _check_open(self) -> None:
        if self.closed:
            raise StoreError(
                f"the store {self.path} is closed (lab.close() releases it for every Lab in this process); "
                f"open it again with Lab(url)"
            )

    @contextmanager
    def _conn(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; driver errors become a `StoreError` saying what failed."""
        self._check_open()
        try:
            with self._pool.connection() as con:
                yield con
        except self._pg.Error as exc:
            raise StoreError(f"cannot {what} in the PostgreSQL store {self.path}: {_first_line(exc)}") from None
        except Exception as exc:
            if type(exc).__module__.startswith("psycopg_pool"):
                raise StoreError(f"cannot {what}: {self._unreachable(exc)}") from None
            raise

    # -- writing -------------------------------------------------------------------------

    def write(self, rows: Sequence[dict[str, Any]], *, sync: bool = True, hot: bool = False) -> None:
        """One transaction of rows in one round trip; `sync=False` holds it until the next write.

        `hot` changes nothing here: the server checks every transaction. A boundary row (`t = 'b'`) is
        sent as the checkpoint and event rows it stands for.
        """
        # a station's boundary row (boundary.py) as typed parameters (postgres_station.py), else the rows it
        # stands for: the same rows stored
        params = boundary_params(rows[0]) if sync and len(rows) == 1 and rows[0].get("t") == "b" else None
        if params is None and has_boundary(rows):
            rows = expand(rows)
        with self._lock:
            self._check_open()
            if sync and not self._buffer:
                if params is None:
                    params = station_params(rows)  # a station's boundary: typed parameters (postgres_station.py)
                if params is not None:
                    self._send(params, rows)
                    return
            if params is not None:  # rows held back meanwhile: they ride in this transaction, as rows
                rows = expand(rows)
            blob = _encode(rows)  # refuses what jsonb cannot hold before anything is sent
            if not sync:
                self._buffer.extend(rows)
                return
            if self._buffer:
                held = [*self._buffer, *rows]
                try:
                    self._send(_encode(held), held)  # the held rows ride in this transaction
                except (StoreError, CheckpointError):
                    self._flush_buffer()  # the held rows alone, so only this write's failure is raised
                    self._send(blob, rows)
                self._buffer.clear()
                return
            self._send(blob, rows)

    def flush(self) -> None:
        with self._lock:
            self._flush_buffer()

    def _flush_buffer(self) -> None:
        if self._buffer:
            rows = list(self._buffer)
            self._send(_encode(rows), rows)
            self._buffer.clear()

    def fold(self) -> None:
        """Nothing to fold: every write is a committed transaction (held rows are flushed)."""
        self.flush()

    def _send(self, blob: bytes | list[bytes | None], rows: Sequence[dict[str, Any]]) -> None:
        """The rows' JSON to `graphlab_write`, or a station's parameters (a list) to `graphlab_station`."""
        run_ids: set[str] = set()
        own: set[str] = set()  # the process writing a step of a run is its writer
        for r in rows:
            run_id = r.get("run_id")
            if run_id:
                run_ids.add(run_id)
                if r.get("t") in _STEPS and r.get("status") != "created":
                    own.add(run_id)
        try:
            ended = self._session.hold(run_ids, own=own, also=self._writes.idle)
        except RunOwnedError:
            for run_id in run_ids & self._session.lost.keys():  # lab.resume reads it again from the store
                self.live_runs.pop(run_id, None)
            raise
        pg = self._pg
        try:
            if type(blob) is bytes:
                self._writes.send(blob, ended=ended)  # one round trip, one transaction
            else:
                self._writes.send_station(blob, ended=ended)
        except pg.Error as exc:
            raise self._write_error(exc, rows) from None
        except Exception as exc:
            if type(exc).__module__.startswith("psycopg_pool"):
                raise StoreError(f"cannot write: {self._unreachable(exc)}") from None
            raise

    def _write_error(self, exc: Any, rows: Sequence[dict[str, Any]]) -> StoreError | CheckpointError:
        diag = getattr(exc, "diag", None)
        code = getattr(diag, "sqlstate", None)
        if code == "GLANS":
            owner, resolution, where = diag.message_primary, diag.message_detail or "", diag.message_hint or ""
            if resolution:
                why = f"it was already answered ({resolution}), in another process or session: the first verdict wins"
            elif where:
                run_id, status, head, seq = (where.split(" ") + ["", "", "", ""])[:4]
                why = f"run {run_id} is {status} at checkpoint {head}, no longer waiting at checkpoint {seq}"
            else:
                why = "no such wait is stored"
            return WaitAnsweredError(
                f"the answer to wait {owner} was not recorded: {why}. Nothing was written; "
                "lab.resume(run_id) in a fresh process (or run.refresh()) shows the run as it is now"
            )
        if code == "GLCPX":
            return CheckpointError(
                f"two different checkpoints claim this id: the stored one and the one written now "
                f"({diag.message_hint}). A checkpoint id is written once: another process stepped this run from the "
                "same head at the same time; nothing of this write was stored. Step a run in one process only "
                "(lab.resume(run_id) there)",
                run_id=diag.message_primary,
                seq=int(diag.message_detail),
            )
        runs = sorted({r["run_id"] for r in rows if r.get("run_id")})
        return StoreError(
            f"cannot write {', '.join(runs) or 'to'} the PostgreSQL store {self.path}: {_first_line(exc)}; "
            "nothing of this boundary was stored (it is one transaction). Check the server, then retry the step"
        )

    def abandoned(self, run_id: str) -> bool:
        """True when no live process holds `run_id` (postgres_session.py: a dropped session is not death)."""
        if run_id in self._session.claimed:
            return False
        with self._conn("check who holds a run") as con:
            held, writer, _ = holders(con, run_id, [self._session.backend_pid()])
        return not held and writer is None

    def writer(self, run_id: str) -> Process | None:
        """The live process other than this one that steps `run_id` while it is `running`, or None.

        A parked run (waiting, queued, ...) may be resumed and answered from any process, as before.
        """
        if run_id in self._session.owned:
            return None
        with self._conn("check who steps a run") as con:
            _, writer, status = holders(con, run_id, [self._session.backend_pid()])
        return writer if status == "running" else None

    def claim(self, run_id: str) -> None:
        """Become the writer of `run_id` (Lab does this after `writer` said no live process steps it)."""
        self._check_open()
        self._session.own(run_id)

    def register_graph(self, manifest: Manifest) -> int:
        sql = POSTGRES.sql
        with self._conn("register a graph") as con, con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [GRAPH_LOCK, manifest.key])
            row = con.execute(sql(q.GRAPH_REVISION), [manifest.key, manifest.digest]).fetchone()
            if row:
                return int(row[0])
            nxt = con.execute(sql(q.GRAPH_NEXT_REVISION), [manifest.key]).fetchone()[0]
            body = manifest.with_revision(int(nxt)).to_json()
            con.execute(
                sql(q.GRAPH_INSERT),
                [manifest.key, int(nxt), manifest.digest, json.dumps(body), utcnow().replace(tzinfo=None)],
            )
            return int(nxt)

    def manifest(self, key: str, revision: int) -> Manifest | None:
        rows = self._fetch("read a graph", q.MANIFEST, [key, revision])
        return Manifest.from_json(rows[0][0]) if rows else None

    # -- reading (the shared reads of reads.py run here) ----------------------------------

    def _fetch_each(self, what: str, statements: Sequence[tuple[str, Sequence[Any]]], *, flush: bool) -> list[Rows]:
        if flush:
            self.flush()
        with self._conn(what) as con:
            return [con.execute(sql, params).fetchall() for sql, params in statements]

    def delete_checkpoints(self, run_id: str, keep: Sequence[int]) -> int:
        self.flush()
        with self._conn(f"prune run {run_id}") as con, con.transaction():
            cur = con.execute(POSTGRES.sql(q.PRUNE), [run_id, [int(k) for k in keep]])
            return int(cur.rowcount)

    def delete_run(self, run_id: str) -> None:
        self.flush()
        with self._conn(f"delete run {run_id}") as con, con.transaction():
            for table in q.TABLES_BY_RUN:
                con.execute(POSTGRES.sql(q.DELETE_BY_RUN[table]), [run_id])

    def table_snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table, for tests that prove a refused action changed nothing."""
        out = {}
        with self._conn("read the tables") as con:
            for table in TABLES:
                rows = con.execute(f"SELECT * FROM {table}").fetchall()
                out[table] = sorted(rows, key=lambda r: json.dumps(r, default=str, sort_keys=True))
        return out

    # -- SQL -----------------------------------------------------------------------------

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> duckdb.DuckDBPyRelation:
        """One read of the lab's tables, on lab.sql's own connection (postgres_sql.py); a DuckDB relation back.

        One statement only, starting with SELECT, WITH, VALUES, TABLE or EXPLAIN, in a READ ONLY
        transaction that is rolled back, stopped after `sql_timeout` seconds; functions that act
        beyond the query are refused. Parameters are written `?` (as on DuckDB) or `%s`.
        """
        self._check_open()
        self.flush()
        return self._sql.run(query, params, self.sql_timeout)

    @property
    def sql_url(self) -> str:
        """Where `lab.sql` connects, without its password: the store's URL unless a read role is given."""
        return redact(self._sql.url)

    def use_sql_url(self, url: str) -> None:
        """Run `lab.sql` as another role (a least-privilege reader, docs/scale.md) from now on."""
        if not is_postgres_url(url):
            raise StoreError(f"sql_url={redact(str(url))!r} is not a postgresql:// URL; give the read role's URL")
        self._check_open()
        self._sql.switch(url)


def _encode(rows: Sequence[dict[str, Any]]) -> bytes:
    """The rows as one JSON array; refuses what the store cannot hold (`UnstorableValueError`).

    The journal's encoder refuses a lone surrogate in data and escapes it in observations;
    jsonb cannot hold a NUL character either (`\\u0000`): refused in data, escaped in observations.
    A boundary of JSON's own values (a station's, as a rule) is one orjson call (`plain_json`).
    """
    blob = plain_json(rows)
    if blob is not None and _NUL not in blob:
        return blob
    parts = [dumps(r) for r in rows]
    for i, part in enumerate(parts):
        if _NUL in part:
            parts[i] = dumps(_without_nul(rows[i]))
    return b"[" + b",".join(parts) + b"]"


def _without_nul(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key, value in row.items():
        if key in _OBSERVATIONS:
            out[key] = json.loads(json.dumps(value, default=str).replace(_NUL.decode() * 1, "\\\\u0000"))
            continue
        where = string_at(value, key, _has_nul)
        if where:
            what = {"cp": "checkpoint", "run": "run", "upd": "run", "wait": "wait", "vd": "answer"}.get(row.get("t", ""), "row")
            raise UnstorableValueError(
                f"cannot store {what} field {where} of run {row.get('run_id')}: it holds a NUL character ('\\x00'), "
                "which PostgreSQL's jsonb cannot keep; nothing was written. Keep such data as bytes or strip the NULs"
            )
    return out


def _has_nul(text: str) -> bool:
    return "\x00" in text
