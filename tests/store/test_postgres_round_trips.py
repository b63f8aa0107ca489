"""Issue 27 item 6: on PostgreSQL a boundary is one round trip and one transaction.

The server counts: `pg_stat_statements` (loaded by the throwaway cluster, tests/store/pgcluster.py)
records every top-level statement each session of the test's database runs, BEGIN and COMMIT
included. A statement is a round trip (nothing is pipelined) and, with nothing but autocommit
statements, a transaction. So after a warm-up, driving a run must show one statement per settled
boundary (`graphlab_station` for a station's, `graphlab_write` for any other), in both durabilities,
and nothing else: no pooled connection check, no lock or claim statement, no read.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from lab import Lab
from lab.errors import CheckpointError
from lab.store import postgres_station
from lab.store.postgres_session import stale
from tests.store.graphs import Count, Tally, declare_tally
from tests.store.pgcluster import Cluster

pytestmark = pytest.mark.slow

STATIONS = 30
WRITE = "SELECT graphlab_write($1::jsonb)"
STATION = postgres_station.STATION.decode()


@pytest.fixture
def counted(pg: Cluster, pg_url: str) -> Iterator[tuple[Cluster, str, str]]:
    """The test database, with the server's statement counts of it readable from the admin database."""
    pg.admin("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    yield pg, pg_url, pg_url.rsplit("/", 1)[1]


def _reset(pg: Cluster, db: str) -> None:
    pg.admin(f"SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = '{db}'), 0)")


def _statements(pg: Cluster, db: str) -> dict[str, int]:
    """Every statement the test database's sessions ran since `_reset`, with its count."""
    import psycopg

    with psycopg.connect(pg.url(), autocommit=True) as con:
        rows = con.execute(
            "SELECT s.query, s.calls FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
            "WHERE d.datname = %s",
            [db],
        ).fetchall()
    return {query: int(calls) for query, calls in rows}


@pytest.mark.parametrize("durability", ["step", "batch"])
def test_a_run_sends_one_statement_per_boundary(counted: tuple[Cluster, str, str], durability: str) -> None:
    pg, url, db = counted
    lab = Lab(url, durability=durability)
    g = declare_tally(lab)
    warm = g.start(Count(), state=Tally(limit=3))
    warm.run()  # the write statement is prepared on the write connection by now
    run = g.start(Count(), state=Tally(limit=STATIONS + 1))
    run.step()  # this process holds the run: its session lock and its `writers` row are taken
    _reset(pg, db)
    run.run()
    assert (run.status, run.output) == ("done", STATIONS + 1)
    sent = _statements(pg, db)
    # each station's `entered` carries the settlement before it, typed (`graphlab_station`); the first
    # `entered` (the step before settled alone) is all `graphlab_write` sends; the last settlement goes alone
    assert sent == {WRITE: 1, STATION: STATIONS}, sent
    events = lab.events(run.id)
    assert [e.seq for e in events] == list(range(len(events)))
    assert lab.store.seqs(run.id) == list(range(STATIONS + 2))
    lab.close()


def test_a_step_by_hand_sends_its_attempt_then_its_settlement(counted: tuple[Cluster, str, str]) -> None:
    """`run.step()` returns once its settlement is stored, so a lone step is two statements: the
    `entered` before the station's code, the settlement after it. Nothing else goes to the server."""
    pg, url, db = counted
    lab = Lab(url)
    g = declare_tally(lab)
    run = g.start(Count(), state=Tally(limit=20))
    run.step()
    _reset(pg, db)
    for _ in range(5):
        run.step()
    assert _statements(pg, db) == {WRITE: 5, STATION: 5}  # the `entered` alone, then the settlement
    assert lab.store.seqs(run.id) == list(range(7))
    lab.close()


def test_a_store_written_by_an_older_graph_lab_gets_this_write_function(counted: tuple[Cluster, str, str]) -> None:
    """The function is code, not schema: a store whose installed `graphlab_write` differs (an older
    Graph Lab's) gets this version's on open, and its runs go on."""
    import psycopg

    from lab.store.postgres_schema import WRITE_FUNCTION, WRITE_FUNCTION_SOURCE

    _, url, _ = counted
    lab = Lab(url)
    run = declare_tally(lab).start(Count(), state=Tally(limit=4))
    run.step()
    lab.close()
    older = WRITE_FUNCTION.replace("-- Graph Lab's write function", "-- an older Graph Lab's write function")
    with psycopg.connect(url, autocommit=True) as con:
        con.execute(older)
        [(src,)] = con.execute("SELECT prosrc FROM pg_proc WHERE proname = 'graphlab_write'").fetchall()
        assert src != WRITE_FUNCTION_SOURCE
    lab = Lab(url)
    with psycopg.connect(url, autocommit=True) as con:
        [(src,)] = con.execute("SELECT prosrc FROM pg_proc WHERE proname = 'graphlab_write'").fetchall()
    assert src == WRITE_FUNCTION_SOURCE
    declare_tally(lab)
    run = lab.resume(run.id)
    run.run()
    assert (run.status, run.output) == ("done", 4)
    assert lab.store.seqs(run.id) == list(range(5))
    lab.close()


def test_a_station_boundary_stores_what_the_general_path_stores(pg_url: str) -> None:
    """`graphlab_write` applies a boundary of one run's checkpoints, events and updates row by row (the
    station's shape); any other write goes through its row-set statements. The same rows must leave the
    same tables either way: numbering from the stored events (not the writer's guess), JSON nulls as SQL
    NULL, a checkpoint written again changing nothing, a different one refused with all of its write."""
    import psycopg

    from lab.records import CheckpointRecord, EventRecord, PendingStation

    lab = Lab(pg_url)
    g = declare_tally(lab)
    a, b = g.start(Count(), state=Tally(limit=9)), g.start(Count(), state=Tally(limit=9))
    store = lab.store

    def cp(seq: int, status: str = "running", output: object = None, state: object = None) -> dict:
        rec = CheckpointRecord(run_id=a.id, seq=seq, parent_seq=seq - 1, status=status,  # type: ignore[arg-type]
                               state={"n": seq, "note": None, "deep": [None, {"k": None}]} if state is None else state,
                               next=(PendingStation("Count", {}),), output=output,
                               counters={"limits": {"step_limit": None}})  # fmt: skip
        return store.checkpoint_row(rec)

    def ev(kind: str, guess: int, **kw: object) -> dict:
        return store.event_row(EventRecord(run_id=a.id, seq=guess, kind=kind, node_id="Count", **kw))  # type: ignore[arg-type]

    boundaries = [
        [ev("entered", 40, attempt=1, checkpoint_seq=0), store.update_row(a.id, status="running", head_seq=0)],
        [cp(1), ev("settled", 2, attempt=1, checkpoint_seq=1, payload={"x": None}), ev("entered", 0, attempt=2)],
        [store.update_row(a.id, status="failed", head_seq=1, output=None, error={"type": "Boom", "tb": None})],
        [cp(1), ev("warning", 9, payload={"message": "again"})],  # the same checkpoint again: nothing changes
        [cp(2, status="done", output={"v": 3}), store.update_row(a.id, status="done", head_seq=2, output={"v": 3})],
        [cp(3, state=[1, None]), ev("settled", 1), cp(4, output="text")],
    ]
    for rows in boundaries:
        store.write(rows)  # one run's checkpoints, events and updates: the row-by-row path
        twin = [{**r, "run_id": b.id} for r in rows]
        store.write([*twin, store.update_row("no-such-run", status="running", head_seq=0)])  # the row-set path

    def tables(run_id: str) -> list[list[tuple]]:
        with psycopg.connect(pg_url, autocommit=True) as con:
            return [
                con.execute(f"SELECT * FROM {t} WHERE run_id = %s ORDER BY {order}", [run_id]).fetchall()
                for t, order in (("checkpoints", "seq"), ("events", "seq"))
            ] + [con.execute("SELECT status, head_seq, output, error, updated_at FROM runs WHERE run_id = %s", [run_id]).fetchall()]

    def compared(run_tables: list[list[tuple]]) -> list[list[tuple]]:
        """Without the run id (the first column) and without the rows g.start wrote (their own times)."""
        cps, evs, run = run_tables
        return [[r[1:] for r in cps[1:]], [r[1:] for r in evs[1:]], run]

    ta, tb = tables(a.id), tables(b.id)
    assert compared(ta) == compared(tb)
    events = ta[1]
    assert [e[1] for e in events] == list(range(len(events)))  # gap-free from the stored events
    assert [e[2] for e in events] == ["started", "entered", "settled", "entered", "warning", "settled"]
    checkpoints = {c[1]: c for c in ta[0]}
    assert checkpoints[1][4] == {"n": 1, "note": None, "deep": [None, {"k": None}]}  # nulls inside kept
    assert checkpoints[1][6] is None and checkpoints[4][6] == "text"  # output: JSON null is SQL NULL
    assert ta[2][0][:4] == ("running", 4, "text", None)  # the last checkpoint is the head; error cleared

    before = store.table_snapshot()
    for run_id in (a.id, b.id):
        other = {**cp(4, output="other"), "run_id": run_id}
        extra = [] if run_id == a.id else [store.update_row("no-such-run", status="running", head_seq=0)]
        with pytest.raises(CheckpointError, match="two different checkpoints claim this id"):
            store.write([{**ev("entered", 0), "run_id": run_id}, other, *extra])
    assert store.table_snapshot() == before
    lab.close()


def test_a_write_connection_the_server_ended_alone_is_replaced_before_the_write(pg_url: str) -> None:
    """Before each write the live session and the kept write connection are checked in one `poll`: the
    write connection alone ended by the server (an administrator's `pg_terminate_backend`) is replaced,
    the boundary is written on the new one, and the session (with its locks) is left as it was."""
    import psycopg

    lab = Lab(pg_url)
    g = declare_tally(lab)
    run = g.start(Count(), state=Tally(limit=4))
    run.step()
    store = lab.store
    writes, session = store._writes.idle, store._session.backend_pid()
    with psycopg.connect(pg_url, autocommit=True) as con:
        assert con.execute("SELECT pg_terminate_backend(%s)", [writes.info.backend_pid]).fetchone()[0]
        deadline = time.monotonic() + 10  # the server ends it: its socket reads as closed
        while not stale(writes) and time.monotonic() < deadline:
            time.sleep(0.01)
    run.run()
    assert (run.status, run.output) == ("done", 4)
    assert store._writes.idle is not writes and store._session.backend_pid() == session
    events = lab.events(run.id)
    assert [e.seq for e in events] == list(range(len(events)))
    lab.close()
