"""`lab.map` on Ray with a PostgreSQL store, workers handed several runs per Ray call
(`BatchWorker.run_many`, docs/scale.md): each worker writes its runs' boundaries to PostgreSQL
itself, every run ends done with its output, a failing input fails its run alone."""

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


def test_runs_go_to_the_workers_in_chunks_and_all_end_in_postgres(pg_url: str, ray_session: str) -> None:
    lab = Lab(pg_url)
    try:
        g = declare(lab)
        g.step_limit = 6
        limits = [3] * 40 + [50]  # the last run passes the step limit: it fails alone
        batch = lab.map(g, [BenchState(limit=n) for n in limits], entry=Loop(), workers=2, progress=False)
        rows = batch.rows()
        assert [r.status for r in rows] == ["done"] * 40 + ["failed"]
        assert [r.output for r in rows[:40]] == [3] * 40
        assert rows[40].error
    finally:
        lab.close()
