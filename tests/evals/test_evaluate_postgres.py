"""`lab.evaluate` on a PostgreSQL store (a throwaway cluster, tests/store/pgcluster.py): the same
evaluation as on DuckDB, its rows in PostgreSQL, and continued by a second `Lab` on the same database."""

from __future__ import annotations

import pytest

from lab import Lab
from tests.evals.test_evaluate import Closeness, dataset, declare
from tests.store.conftest import pg, pg_url  # noqa: F401 - the throwaway cluster's fixtures

pytestmark = pytest.mark.timeout(300)


def test_an_evaluation_on_postgres_is_stored_and_continued(pg_url: str) -> None:  # noqa: F811
    lab = Lab(pg_url)
    g, Clean = declare(lab)
    ev = lab.evaluate(g, dataset(), evaluators=[Closeness()], entry=Clean(), progress=False)
    assert ev.counts() == {"scored": 4, "failed": 1, "waiting": 1}
    rows = lab.sql(
        "select c.case_name, s.value from eval_cases c join eval_scores s using (evaluation_id, case_index) "
        "where s.name = 'closeness' order by c.case_index"
    ).fetchall()
    assert [n for n, _ in rows] == ["hi", "hello", "loud", "longer"]
    before = [(r.name, r.run_id, r.status, r.scores) for r in ev.rows()]
    lab.close()

    other = Lab(pg_url)  # another process's lab on the shared store: the same call continues it
    try:
        g2, Clean2 = declare(other)
        again = other.evaluate(g2, dataset(), evaluators=[Closeness()], entry=Clean2(), progress=False)
        assert again.id == ev.id and [(r.name, r.run_id, r.status, r.scores) for r in again.rows()] == before
        again.open("question").approve(note="ok")
        again.run(progress=False)
        assert again.counts() == {"scored": 5, "failed": 1} and again.averages().assertions == 0.8
    finally:
        other.close()
