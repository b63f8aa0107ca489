"""A PostgreSQL store under a hostile user and a restarting server (issue 24 items 4 and 5).

- The server restarts mid-run: the process goes on (the next `g.start` and step work), its run
  stays its own (another process neither marks it `interrupted` nor takes it over, even before
  the first process has reconnected), and a run taken over while it was cut off is refused to it.
- `lab.sql` cannot act beyond its query: session locks, ending other sessions, replication slots,
  settings and queries run from text are refused; a slow query is stopped; afterwards another
  `Lab(url)` opens at once. Opening a store someone else locks fails in bounded time, naming who.
- `lab.sql` can run as a least-privilege read role (docs/scale.md).

Every server, process and connection here is a real one.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from lab import Lab
from lab.errors import ArgumentError, RunOwnedError, StoreError, StoreQueryError
from lab.store import holders, postgres_store
from lab.store.postgres_schema import MIGRATE_LOCK, WRITER_LOCK
from tests.store.graphs import Count, Tally, declare_tally

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

_LOOK = """
import json, sys
from lab import Lab
from lab.errors import RunOwnedError
from tests.store.graphs import declare_tally
lab = Lab(sys.argv[1])
declare_tally(lab)
rec = lab.run(sys.argv[2])
interrupted = len(lab.store.events(sys.argv[2], kind="interrupted"))
run = lab.resume(sys.argv[2])
try:
    run.step()
    step = "stepped"
except RunOwnedError as exc:
    step = "refused: " + str(exc)
from lab.store import holders as h  # what decided the writer, for a failure's message
with lab.store._conn("look") as con:
    row = con.execute("SELECT pid, host, started, claimed_at::text FROM writers WHERE run_id = %s", [sys.argv[2]]).fetchone()
why = {"row": list(row) if row else None, "proc_started": h._started(int(row[0])) if row else None, "boot": h._BOOT}
print(json.dumps({"status": rec.status, "interrupted": interrupted, "writer": run.writer, "step": step, "why": why}))
lab.close()
"""


def _another_process(url: str, run_id: str) -> dict[str, object]:
    """What another process sees of `run_id` when it opens the store, resumes the run and steps it."""
    done = subprocess.run([sys.executable, "-c", _LOOK, url, run_id], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _until(what: Callable[[], object], deadline: float = 60.0) -> object:
    end = time.monotonic() + deadline
    while True:
        got = what()
        if got or time.monotonic() > end:
            return got
        time.sleep(0.05)


def _writer_lock_holders(url: str, run_id: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as con:
        rows = con.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 "
            "AND classid::bigint = %s AND objid::bigint = (hashtext(%s)::bigint & 4294967295)",
            [WRITER_LOCK, run_id],
        ).fetchall()
    return [r[0] for r in rows]


def _cut_off(lab: Lab) -> contextlib.AbstractContextManager[object]:
    """Keep this process from reconnecting for a while (as a slow network or a busy process would)."""
    session = getattr(lab.store, "_session", None)
    return session._mutex if session is not None else contextlib.nullcontext()


def test_a_restart_mid_run_neither_sticks_the_process_nor_frees_its_run(pg, pg_url: str) -> None:
    """issue 24 item 4: after `pg_ctl restart` the process goes on, and its live run stays its own."""
    lab = Lab(pg_url)
    g = declare_tally(lab)
    run = g.start(Count(), state=Tally(limit=6))
    run.step()
    run.step()
    assert lab.run(run.id).status == "running"
    with _cut_off(lab):
        pg.restart()
        # before this process has reconnected, another one opens the store and looks at the run
        seen = _another_process(pg_url, run.id)
    assert seen["status"] == "running" and seen["interrupted"] == 0, seen
    me = holders.this_process()
    assert seen["writer"] and f"process {os.getpid()} " in seen["writer"], (seen, me, holders._started(me.pid))
    assert str(seen["step"]).startswith("refused: cannot step run"), seen
    # this process holds its run again as soon as it has reconnected, without being asked
    assert _until(lambda: _writer_lock_holders(pg_url, run.id)), "the writer did not take its run's lock again"
    seen = _another_process(pg_url, run.id)
    assert (seen["status"], seen["interrupted"], str(seen["step"])[:8]) == ("running", 0, "refused:"), seen
    run.run()  # the next steps work
    assert (run.status, run.output) == ("done", 6)
    again = g.start(Count(), state=Tally(limit=2))  # and so does the next run
    again.run()
    assert again.output == 2
    events = lab.events(run.id)
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.kind for e in events].count("interrupted") == 0
    lab.close()


def test_sessions_ended_by_an_administrator_leave_the_run_with_its_writer(pg_url: str) -> None:
    """issue 24 items 4, 5: `pg_terminate_backend` of a writer's sessions does not let another process step its run."""
    lab = Lab(pg_url)
    g = declare_tally(lab)
    run = g.start(Count(), state=Tally(limit=5))
    run.step()
    with _cut_off(lab), psycopg.connect(pg_url, autocommit=True) as admin:
        ended = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'graph-lab' AND pid <> pg_backend_pid()"
        ).fetchone()[0]
        assert ended >= 2  # the pool's and this process's own session
        seen = _another_process(pg_url, run.id)
    assert (seen["status"], seen["interrupted"], str(seen["step"])[:8]) == ("running", 0, "refused:"), seen
    assert _until(lambda: _writer_lock_holders(pg_url, run.id))
    run.run()
    assert run.output == 5
    lab.close()


def test_a_writer_on_another_host_cut_off_by_a_restart_is_given_time_to_come_back(pg, pg_url: str) -> None:
    """issue 24 item 4: a free lock is death only when the session ended while the server ran on."""
    from lab.store.postgres_session import RESTART_GRACE, holders

    Lab(pg_url).close()  # the tables
    pg.restart()
    with psycopg.connect(pg_url, autocommit=True) as con:
        con.execute(
            "INSERT INTO writers VALUES ('before', 4242, 'elsewhere', 1.0, now() AT TIME ZONE 'UTC' - interval '1 hour'), "
            "('after', 4243, 'elsewhere', 1.0, now() AT TIME ZONE 'UTC' + interval '1 second')"
        )
        up = con.execute("SELECT extract(epoch FROM now() - pg_postmaster_start_time())").fetchone()[0]
        assert float(up) < RESTART_GRACE
        _, writer, _ = holders(con, "before", [])
        assert writer is not None and writer.pid == 4242  # its session went with the server: it may reconnect
        _, writer, _ = holders(con, "after", [])
        assert writer is None  # its session ended while the server ran: the process is gone


def test_a_run_taken_over_while_its_writer_was_cut_off_is_refused_to_it(pg, pg_url: str) -> None:
    """issue 24 item 4: a writer that reconnects after another process took its run over steps it no more."""
    lab = Lab(pg_url)
    g = declare_tally(lab)
    run = g.start(Count(), state=Tally(limit=6))
    run.step()
    with _cut_off(lab):
        pg.restart()
        thief = psycopg.connect(pg_url, autocommit=True)  # a process on another host, after the grace
        thief.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", [WRITER_LOCK, run.id])
        thief.execute("UPDATE writers SET pid = 4242, host = 'elsewhere', started = 1 WHERE run_id = %s", [run.id])
    try:
        before = lab.store.seqs(run.id)
        with pytest.raises(RunOwnedError, match="process 4242 on host elsewhere .*took the run over"):
            run.step()
        assert lab.store.seqs(run.id) == before
        again = lab.resume(run.id)  # read from the store: the process that took it over steps it
        assert again is not run and "process 4242 on host elsewhere" in (again.writer or "")
        with pytest.raises(RunOwnedError, match="process 4242 on host elsewhere"):
            again.step()
        other = g.start(Count(), state=Tally(limit=2))  # its other work goes on
        other.run()
        assert other.output == 2
    finally:
        thief.close()
    lab.close()


@pytest.mark.parametrize(
    "query",
    [
        f"select pg_advisory_lock({MIGRATE_LOCK})",
        f"select pg_try_advisory_lock_shared({MIGRATE_LOCK})",
        f'select "pg_advisory_lock"({MIGRATE_LOCK})',
        f"SELECT PG_CATALOG.PG_ADVISORY_LOCK({MIGRATE_LOCK})",
        f"select pg_advisory_lock/**/({MIGRATE_LOCK})",
        f"select query_to_xml('select pg_advisory_lock({MIGRATE_LOCK})', true, true, '')",
        'select U&"pg_advisory_lock"(1)',
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name like 'graph-lab%'",
        "select pg_cancel_backend(pid) from pg_stat_activity where application_name like 'graph-lab%'",
        "select pg_create_physical_replication_slot('graphlab_slot')",
        "select * from pg_create_logical_replication_slot('graphlab_slot', 'test_decoding')",
        "select set_config('statement_timeout', '0', false)",
        "select dblink_exec('dbname=postgres', 'select 1')",
        "select lo_import('/etc/passwd')",
        "select pg_read_file('postgresql.conf')",
        "with t as (select pg_advisory_lock(1)) select * from t",
        # hidden from a naive reader by what looks like a string or comment to it, not to the server
        """select "x'", pg_advisory_lock(1), 'a'""",
        "select 1 /* /* */ ' */, pg_advisory_lock(1), ' ' */",
        "select x$a$, pg_advisory_lock(1), $a$ $a$",
    ],
)
def test_sql_refuses_what_acts_beyond_the_query(pg_url: str, query: str) -> None:
    """issue 24 item 5: session locks, other sessions, slots, settings: refused, with what to do."""
    lab = Lab(pg_url)
    with pytest.raises(StoreQueryError, match="lab.sql refuses"):
        lab.sql(query)
    lab.close()


def test_sql_still_reads_what_merely_mentions_those_names(pg_url: str) -> None:
    """issue 24 item 5: a string or a comment naming a refused function is data, not a call."""
    lab = Lab(pg_url)
    got = lab.sql(
        "select count(*) as n, 'pg_advisory_lock(1)' as s from checkpoints "
        "where state->>'lo_limit' is null -- pg_terminate_backend\n"
    ).fetchall()
    assert got == [(0, "pg_advisory_lock(1)")]
    lab.close()


def test_after_every_sql_abuse_the_team_goes_on(pg_url: str) -> None:
    """issue 24 item 5: nothing of lab.sql outlives its query: another Lab(url) opens at once, sessions live."""
    lab = Lab(pg_url)
    g = declare_tally(lab)
    run = g.start(Count(), state=Tally(limit=4))
    run.step()
    for query in (
        f"select pg_advisory_lock({MIGRATE_LOCK})",
        "select pg_terminate_backend(pid) from pg_stat_activity where pid <> pg_backend_pid()",
        "select pg_create_physical_replication_slot('graphlab_slot')",
    ):
        with contextlib.suppress(StoreQueryError):
            lab.sql(query)
    assert lab.sql("select count(*) from runs").fetchall() == [(1,)]  # lab.sql still works
    with psycopg.connect(pg_url, autocommit=True) as con:
        assert con.execute("SELECT count(*) FROM pg_replication_slots").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1").fetchone()[0] == 0
    started = time.monotonic()
    seen = _another_process(pg_url, run.id)  # opens the store, finds the run live and this process its writer
    assert time.monotonic() - started < 90
    assert seen["status"] == "running" and str(seen["step"]).startswith("refused"), seen
    run.run()
    assert run.output == 4
    lab.close()


def test_a_slow_sql_query_is_stopped(pg_url: str) -> None:
    """issue 24 item 5: `select pg_sleep(30)` is stopped by lab.sql's statement timeout."""
    lab = Lab(pg_url)
    assert 0 < lab.store.sql_timeout <= 60
    lab.store.sql_timeout = 1
    started = time.monotonic()
    with pytest.raises(StoreQueryError, match="statement timeout.*sql_timeout"):
        lab.sql("select pg_sleep(30)")
    assert time.monotonic() - started < 20
    assert lab.sql("select 1 as one").fetchall() == [(1,)]
    lab.close()


def test_opening_a_store_someone_locks_fails_in_bounded_time_naming_them(pg_url: str, monkeypatch) -> None:
    """issue 24 item 5: a Lab(url) blocked by another session's lock says who holds it, instead of hanging."""
    monkeypatch.setattr(postgres_store, "OPEN_TIMEOUT", 1.0)
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK])
        pid = holder.info.backend_pid
        started = time.monotonic()
        with pytest.raises(StoreError, match=f"server process {pid} .*pg_terminate_backend\\({pid}\\)"):
            Lab(pg_url)
        assert time.monotonic() - started < 30
    Lab(pg_url).close()  # once it lets go, the store opens


def test_sql_can_run_as_a_least_privilege_read_role(pg_url: str) -> None:
    """issue 24 item 5: docs/scale.md's read role: lab.sql reads the lab's tables and nothing else."""
    lab = Lab(pg_url)
    run = declare_tally(lab).start(Count(), state=Tally(limit=2))
    run.run()
    role = "graphlab_reader_" + uuid.uuid4().hex[:8]
    db = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("CREATE TABLE secret (x int)")
        for stmt in (  # as docs/scale.md says
            f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION CONNECTION LIMIT 5",
            f"ALTER ROLE {role} SET default_transaction_read_only = on",
            f"GRANT CONNECT ON DATABASE {db} TO {role}",
            f"GRANT USAGE ON SCHEMA public TO {role}",
            f"GRANT SELECT ON graphs, runs, checkpoints, events, waits, jobs, job_events TO {role}",
        ):
            admin.execute(stmt)
    try:
        lab.store.use_sql_url(pg_url.replace("postgres@", f"{role}@"))
        assert lab.sql("select current_user").fetchall() == [(role,)]
        assert lab.sql("select status, count(*) from runs group by 1").fetchall() == [("done", 1)]
        with pytest.raises(StoreQueryError, match="permission denied"):
            lab.sql("select * from secret")
        assert lab.store.sql_url.startswith(f"postgresql://{role}@")
        with Lab(pg_url, sql_url=pg_url.replace("postgres@", f"{role}@")) as other:  # the same, when opening
            assert other.sql("select current_user").fetchall() == [(role,)]
    finally:
        lab.close()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role]
            )
            admin.execute(f"DROP OWNED BY {role}")
            admin.execute(f"DROP ROLE {role}")


def test_sql_url_on_a_duckdb_store_is_refused_before_opening(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A read role is a PostgreSQL idea: on DuckDB the argument is refused, naming why."""
    with pytest.raises(ArgumentError, match="only a PostgreSQL store takes a read role"):
        Lab(tmp_path / "lab.duckdb", sql_url="postgresql://reader@localhost/x")
    assert not (tmp_path / "lab.duckdb").exists()
