"""A subprocess worker's recorded calls on both backends (DuckDB file and PostgreSQL), issue 28 item 1.

The worker writes no store row: the lab adopting its result writes its `calls.ndjson` as `calls`
rows (docs/replay.md). On either store a fork replays them in its own worker (0 model calls), and
adopting the same file again writes nothing twice (DuckDB `INSERT OR IGNORE`, PostgreSQL
`ON CONFLICT DO NOTHING` on the call id).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab import Lab
from lab.agents.worker_calls import adopt_calls
from tests.agents.graphs import declare

pytestmark = pytest.mark.slow


def test_a_workers_calls_are_adopted_once_and_replayed_by_a_fork(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = tmp_path / "model-calls.txt"
    monkeypatch.setenv("GRAPHLAB_TEST_CALLS", str(counted))
    monkeypatch.delenv("GRAPHLAB_TEST_HOLD", raising=False)
    monkeypatch.delenv("GRAPHLAB_TEST_HOLD_SECOND", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a PostgreSQL store's job folders
    lab.agents.register("recorded-worker", target="tests.agents.agent_defs:counted_worker", runner="subprocess")
    g = declare(lab, runtime="recorded-worker")
    run = g.start(g.nodes["Outline"]())
    run.run()
    assert run.status == "done", run.error
    assert len(counted.read_text().splitlines()) == 2
    assert [(c.mode, c.call_index) for c in run.calls()] == [("live", 1), ("live", 2)]
    job = lab.agents.jobs(run_id=run.id)[0].record
    assert adopt_calls(lab.store, job, lab.agents.folder) == 2  # again: the rows stand as they were
    assert lab.sql("select count(*) from calls").fetchall() == [(2,)]
    fork = run.fork(0)
    fork.run()
    assert fork.status == "done" and fork.output == run.output
    assert len(counted.read_text().splitlines()) == 2  # replayed in the fork's worker
    assert [c.mode for c in fork.calls()] == ["replayed", "replayed"]
    assert [e.payload["mode"] for e in fork.events("recorded")] == ["replayed", "replayed"]
