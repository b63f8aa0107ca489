"""Every kind on the PostgreSQL store (issue 26, done-when 4: the PostgreSQL column of the matrix).

One throwaway PostgreSQL server for this module (tests/store/pgcluster.py), a fresh database per
test. Each kind of `cases.KINDS` runs there as it runs on DuckDB: the plain variant to its end,
the gate variant parked, approved and done, the history read back with `state_at`, and a parked
run (a consent gate, an interrupt) resumed by a lab that opened the store again (the first one
closed). For the agent kind, its jobs live in the PostgreSQL store's `jobs` and `job_events` tables.

Under CI=true a missing PostgreSQL fails (scripts/setup.sh installs it); elsewhere it skips.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab import Lab
from lab.store.postgres_store import PostgresStore
from tests.store.pgcluster import Cluster, cluster

from .cases import ANSWER, KINDS, case_named

pytestmark = pytest.mark.parametrize("kind", KINDS)


@pytest.fixture(scope="module")
def server() -> Iterator[Cluster]:
    with cluster() as c:
        yield c


@pytest.fixture
def url(server: Cluster) -> Iterator[str]:
    name = server.create_db()
    yield server.url(name)
    server.drop_db(name)  # WITH (FORCE): a lab a failed test left open does not keep the database


@pytest.fixture
def lab(url: str) -> Iterator[Lab]:
    lab = Lab(url)
    assert isinstance(lab.store, PostgresStore)
    yield lab
    if not lab.store.closed:
        lab.close()


def _jobs_on_the_server(lab: Lab, kind: str, run_ids: set[str]) -> None:
    """The agent kind's jobs of `run_ids` are rows of the PostgreSQL store, each SUCCEEDED with its events."""
    if kind != "agent":
        return
    jobs = [j for j in lab.store.jobs() if j.run_id in run_ids]
    assert jobs and all(j.status == "SUCCEEDED" and j.ended_at is not None for j in jobs), [(j.request_id, j.status) for j in jobs]
    rows = lab.sql(
        "select request_id, count(*) from job_events group by request_id order by request_id"
    ).fetchall()
    counts = dict(rows)
    for job in jobs:
        kinds = [e.kind for e in lab.store.job_events(job.request_id)]
        assert kinds[0] == "transition" and counts[job.request_id] == len(kinds) >= 3, (job.request_id, kinds)
    handles = [a for run_id in run_ids for a in lab.agents.jobs(run_id=run_id)]  # what lab.agents shows
    assert sorted(a.request_id for a in handles) == sorted(j.request_id for j in jobs)
    assert {a.status for a in handles} == {"SUCCEEDED"}


def test_pg_plain_runs_to_its_end(lab: Lab, kind: str) -> None:
    """issue 26 done-when 4: the plain variant of every kind runs to its end on PostgreSQL."""
    case = case_named(kind)
    run = case.start(case.build(lab, "plain"))
    run.run()
    assert (run.status, run.output) == ("done", case.expected("plain")), (kind, run.error)
    assert lab.store.get_run(run.id).status == "done"
    assert run.id in [r.run_id for r in lab.runs(status="done")]
    _jobs_on_the_server(lab, kind, {run.id})


def test_pg_gate_parks_and_approve_finishes(lab: Lab, kind: str) -> None:
    """The gate variant parks at its consent gate on PostgreSQL; approve() lets it finish."""
    case = case_named(kind)
    run = case.start(case.build(lab, "gate"))
    run.run()
    assert run.status == "waiting" and run.wait is not None, (kind, run.status, run.error)
    assert run.wait.kind == "consent"
    assert [w.run_id for w in lab.store.open_waits()] == [run.id]
    run.approve(note="fine")
    run.run()
    assert (run.status, run.output) == ("done", case.expected("gate")), (kind, run.error)
    assert run.events("verdict") and lab.store.open_waits() == []
    _jobs_on_the_server(lab, kind, {run.id})


def test_pg_history_and_state_at(lab: Lab, kind: str) -> None:
    """The history on PostgreSQL lists every checkpoint oldest first, and state_at reads each of them."""
    case = case_named(kind)
    run = case.start(case.build(lab, "plain"))
    run.run()
    history = run.history()
    seqs = [c.seq for c in history]
    assert len(seqs) >= 3 and seqs == sorted(seqs) and seqs[-1] == run.head, (kind, seqs)
    assert history[-1].status == "done"
    states = [run.state_at(seq) for seq in seqs]  # each checkpoint's state decodes under the declared type
    assert states[-1] == run.state
    assert lab.store.seqs(run.id) == sorted(set(lab.store.seqs(run.id)))


def test_pg_reopened_store_resumes_a_parked_run(url: str, kind: str) -> None:
    """A parked run outlives its lab: another Lab on the same URL (the first closed) resumes,
    approves and finishes it, and the run's history is one line from start to end."""
    case = case_named(kind)
    first = Lab(url)
    try:
        run = case.start(case.build(first, "gate"))
        run.run()
        assert run.status == "waiting" and run.wait is not None, (kind, run.status, run.error)
        run_id, parked_at = run.id, run.head
    finally:
        first.close()
    second = Lab(url)
    try:
        assert second.store is not first.store and not second.store.closed
        case.build(second, "gate")  # the same graph, declared again (a new kernel would)
        again = second.resume(run_id)
        assert (again.status, again.head, again.wait.kind if again.wait else None) == ("waiting", parked_at, "consent")
        again.approve()
        again.run()
        assert (again.status, again.output) == ("done", case.expected("gate")), (kind, again.error)
        seqs = [c.seq for c in again.history()]
        assert parked_at in seqs and seqs[-1] == again.head
        _jobs_on_the_server(second, kind, {run_id})
    finally:
        second.close()


def test_pg_reopened_store_answers_an_interrupt(url: str, kind: str) -> None:
    """An interrupt() parked under one lab is answered with resume_with by a lab that opened the
    store again, and the answer reaches the station that asked."""
    case = case_named(kind)
    with Lab(url) as first:
        run = case.start(case.build(first, "interrupt"))
        run.run()
        assert run.status == "waiting" and run.wait is not None and run.wait.kind == "interrupt", (kind, run.status, run.error)
        run_id = run.id
    with Lab(url) as second:
        case.build(second, "interrupt")
        again = second.resume(run_id)
        again.resume_with(ANSWER)
        again.run()
        assert (again.status, again.output) == ("done", case.expected("interrupt")), (kind, again.error)
        _jobs_on_the_server(second, kind, {run_id})
