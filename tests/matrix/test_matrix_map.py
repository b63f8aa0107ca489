"""The `lab.map` on Ray column of the kind × capability matrix (issue 26, done-when 4).

Every kind's plain variant is mapped over three inputs on the session's Ray and every run ends
done with the case's output, its history in the notebook's store; the gate variant's runs park
at their gate and the batch counts them as waiting, not failed, and an approved one continues on
the next `batch.run()`. One Ray for the whole session (the `ray_session` fixture), two workers at
most; each kind's graph is shipped to the workers as the kind declares it (lab/batch/spec.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab import Lab
from lab.batch import StartWith, release_workers

from .cases import KINDS, case_named

pytestmark = [pytest.mark.timeout(600)]  # a local Ray may take minutes to start on a busy machine

RUNS = 3


@pytest.fixture(scope="module", autouse=True)
def _release_workers() -> Iterator[None]:
    """The warm workers hold the session Ray's CPUs: free them for the session's other batches
    (a notebook's kernel joining the same Ray waited for a CPU until its cell timed out)."""
    yield
    release_workers()


def _inputs(case: Any, graph: Any, n: int) -> list[StartWith]:
    """`n` inputs that start what `case.start(graph)` starts (a fresh state each)."""
    return [StartWith(**case.subgraph_call(graph)) for _ in range(n)]


@pytest.mark.parametrize("kind", KINDS)
def test_lab_map_on_ray(kind: str, tmp_path: Path, ray_session: str) -> None:
    """issue 26 done-when 4 (`lab.map` on Ray): every kind maps, its runs end done with the
    expected output, and gated runs wait (counted as waiting, not failed) until approved."""
    case = case_named(kind)
    lab = Lab(str(tmp_path / "lab.duckdb"))
    try:
        plain = case.build(lab, "plain")
        batch = lab.map(plain, _inputs(case, plain, RUNS), workers=2, progress=False)
        rows = batch.rows()
        assert [(r.status, r.error) for r in rows] == [("done", None)] * RUNS, rows
        assert [r.output for r in rows] == [case.expected("plain")] * RUNS
        for run_id in batch.run_ids:  # every boundary reached the notebook's store
            events = [e.kind for e in lab.events(run_id)]
            assert events[0] == "started" and events[-1] == "done", events
            assert lab.resume(run_id).output == case.expected("plain")
            jobs = lab.agents.jobs(run_id=run_id)  # a delegated station's job ran in the worker, kept here
            assert [j.status for j in jobs] == ["SUCCEEDED"] * (1 if kind == "agent" else 0), jobs

        gated = case.build(lab, "gate")
        batch = lab.map(gated, _inputs(case, gated, 2), workers=1, progress=False)
        assert batch.counts() == {"waiting": 2} and batch.waiting == 2, batch.rows()
        assert sorted(w.run_id for w in lab.waiting()) == sorted(batch.run_ids)
        waits = {w.run_id: w for w in lab.waiting()}
        first = batch.run_ids[0]
        lab.resume(first).approve("ok", owner=waits[first].owner)
        batch.run(workers=1, progress=False)
        assert [r.status for r in batch.rows()] == ["done", "waiting"], batch.rows()
        assert batch.rows()[0].output == case.expected("gate")
    finally:
        lab.close()
