"""Issue 27 item 6: on PostgreSQL a boundary is one round trip and one transaction.

The server counts: `pg_stat_statements` (loaded by the throwaway cluster, tests/store/pgcluster.py)
records every top-level statement each session of the test's database runs, BEGIN and COMMIT
included. A statement is a round trip (nothing is pipelined) and, with nothing but autocommit
statements, a transaction. So after a warm-up, driving a run must show one statement only,
`graphlab_write`, once per settled boundary, in both durabilities, and nothing else: no pooled
connection check, no lock or claim statement, no read.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab import Lab
from tests.store.graphs import Count, Tally, declare_tally
from tests.store.pgcluster import Cluster

pytestmark = pytest.mark.slow

STATIONS = 30


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
    # each station's `entered` carries the settlement before it; the last settlement goes alone
    assert sent == {"SELECT graphlab_write($1::jsonb)": STATIONS + 1}, sent
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
    assert _statements(pg, db) == {"SELECT graphlab_write($1::jsonb)": 10}
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
