"""`lab.map` on Ray with workers handed several runs per Ray call (`BatchWorker.run_many`,
docs/scale.md), on both stores: with PostgreSQL each worker writes its runs' boundaries itself,
with a DuckDB file it sends them back per run; every run ends done with its output and its
history, a failing input fails its run alone, a run again is not driven twice."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab import Lab
from lab.batch import release_workers
from lab.bench.common import BenchState, Loop, declare


@pytest.fixture(autouse=True)
def _release_workers() -> Iterator[None]:
    yield
    release_workers()


@pytest.fixture(params=["duckdb", "postgres"])
def where(request, tmp_path) -> str:
    if request.param == "duckdb":
        return str(tmp_path / "lab.duckdb")
    return request.getfixturevalue("pg_url")


def test_runs_go_to_the_workers_in_chunks_and_all_end_in_the_store(where: str, ray_session: str) -> None:
    lab = Lab(where)
    try:
        g = declare(lab)
        g.step_limit = 6
        limits = [3] * 40 + [50]  # the last run passes the step limit: it fails alone
        batch = lab.map(g, [BenchState(limit=n) for n in limits], entry=Loop(), workers=2, progress=False)
        rows = batch.rows()
        assert [r.status for r in rows] == ["done"] * 40 + ["failed"]
        assert [r.output for r in rows[:40]] == [3] * 40
        assert rows[40].error
        assert all(len(lab.store.events(r.run_id)) > 3 for r in rows[:40])  # each run's history is here
        batch.run(workers=2, progress=False)  # nothing left to drive: nothing changes
        assert [r.status for r in batch.rows()] == [r.status for r in rows]
    finally:
        lab.close()
