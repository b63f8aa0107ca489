"""The store's job tables: one row per request, every transition an event row, first terminal wins."""

from __future__ import annotations

import threading

from lab import Lab
from lab.records import JobRecord


def _job(request_id: str = "job-1", digest: str = "d1") -> JobRecord:
    return JobRecord(request_id, "writer", "task", {"prompt": "p"}, digest, "QUEUED", run_id="run-x")


def test_insert_is_idempotent_by_request_id_and_transitions_are_rows(tmp_path):
    with Lab(tmp_path / "lab.duckdb") as lab:
        store = lab.store
        stored, inserted = store.insert_job(_job())
        assert inserted and stored.status == "QUEUED"
        again, inserted = store.insert_job(_job(digest="other"))
        assert not inserted and again.digest == "d1"  # the stored request stands
        assert store.transition_job("job-1", "ADMITTED", allowed_from=["QUEUED"])
        assert not store.transition_job("job-1", "SUCCEEDED", allowed_from=["RUNNING"], terminal=True, output=1)
        rows = lab.sql("select kind, from_status, to_status from job_events order by seq").fetchall()
        assert rows == [("transition", None, "QUEUED"), ("transition", "QUEUED", "ADMITTED"), ("inert", "ADMITTED", "SUCCEEDED")]
    with Lab(tmp_path / "lab.duckdb") as lab:  # durable across a reopen, where a dead runner's job is LOST
        job = lab.store.job("job-1")
        assert job.status == "LOST" and "the process that ran it as a task stopped" in job.error["message"]
        assert lab.store.job_events("job-1")[-1].payload == {"by": "recovery"}


def test_two_racing_terminals_one_wins_the_other_is_inert():
    lab = Lab(":memory:")
    store = lab.store
    store.insert_job(_job())
    store.transition_job("job-1", "RUNNING", allowed_from=["QUEUED"])
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def finish(status: str) -> None:
        barrier.wait()
        results.append(store.transition_job("job-1", status, allowed_from=["RUNNING"], terminal=True))

    threads = [threading.Thread(target=finish, args=(s,)) for s in ("SUCCEEDED", "FAILED")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False, True]
    kinds = [e.kind for e in store.job_events("job-1")]
    assert kinds.count("inert") == 1 and store.job("job-1").ended_at is not None
