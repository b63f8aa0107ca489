"""The store's job tables: one row per request, every transition an event row, first terminal wins."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

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


def _journalled(store, request_id: str) -> list[dict]:
    """A new job of a run created here, its rows put into a park's write (`insert_job(ride=)`), written."""
    ride: list[dict] = []
    stored, inserted = store.insert_job(_job(request_id), ride=ride)
    assert inserted and stored.status == "QUEUED"
    assert [r["t"] for r in ride] == ["job", "jev"]
    store.write(ride)
    return ride


RUN_TO_END = [
    ("RUNNING", ["QUEUED"], False, None, {"worker": {"pid": 1}}),
    ("SUCCEEDED", ["RUNNING"], True, {"by": "runner"}, {"output": {"title": "t"}, "error": None, "usage": {"requests": 1}}),
]


@pytest.mark.parametrize("held", [True, False])
def test_a_journalled_job_is_stored_as_its_moves_leave_it(tmp_path, monkeypatch, held):
    """While this process holds the file (no fold can take the job's lines) its moves are journal lines too,
    the job's last line its row; once it let go, its next write is a transaction that inserts the row as
    the moves leave it with every event from seq 0. Either way the fold of its lines leaves what was
    recorded: the QUEUED line is no later row's."""
    from lab.store import duckdb_files

    monkeypatch.setattr(duckdb_files, "LINGER", 3600.0 if held else 0.0)
    with Lab(tmp_path / "lab.duckdb") as lab:
        store = lab.store
        store.jobs()  # takes the file (held: for good; else it is let go at the watcher's next look)
        if not held:
            _until_let_go(store)
        opened = _count_transactions(monkeypatch, store)
        _journalled(store, "job-j")
        assert store.advance_job("job-j", RUN_TO_END, observations=[("usage", {"requests": 1})], observed_after=1) == 2
        assert len(opened) == (0 if held else 1)
        store.fold()
        job = store.job("job-j")
        assert job.status == "SUCCEEDED" and job.output == {"title": "t"} and job.worker == {"pid": 1} and job.ended_at
        events = store.job_events("job-j")
        assert [(e.seq, e.kind, e.to_status) for e in events] == [
            (0, "transition", "QUEUED"), (1, "transition", "RUNNING"), (2, "usage", None), (3, "transition", "SUCCEEDED")
        ]
    with Lab(tmp_path / "lab.duckdb") as lab:  # as stored, across a reopen
        assert lab.store.job("job-j").status == "SUCCEEDED" and len(lab.store.job_events("job-j")) == 4


def test_a_journalled_job_is_seen_by_a_read_and_then_moved_as_stored(tmp_path):
    """A read folds first, so it sees the QUEUED job its park carried; the first transaction then finds the
    row stored (its insert meets the key) and moves it with a guarded UPDATE, as any job."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        store = lab.store
        _journalled(store, "job-r")
        assert store.job("job-r").status == "QUEUED"
        assert [j.request_id for j in store.jobs()] == ["job-r"]
        assert store.advance_job("job-r", RUN_TO_END) == 2
        assert [e.to_status for e in store.job_events("job-r")] == ["QUEUED", "RUNNING", "SUCCEEDED"]
        assert not store.transition_job("job-r", "FAILED", allowed_from=["RUNNING"], terminal=True)  # first terminal won
        assert store.job("job-r").status == "SUCCEEDED"


def test_a_journalled_job_whose_park_was_never_written_is_not_stored(tmp_path):
    """The job's rows are durable with its park or not at all: a park that failed leaves no job, and the
    station parking again stores it as usual."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        store = lab.store
        store.insert_job(_job("job-f"), ride=[])  # the park carrying it failed: nothing written
        assert store.job("job-f") is None
        stored, inserted = store.insert_job(_job("job-f"), ride=[])  # parked again: known here, so stored now
        assert inserted and store.job("job-f").status == "QUEUED"
        assert store.advance_job("job-f", RUN_TO_END) == 2 and store.job("job-f").status == "SUCCEEDED"


def _until_let_go(store, timeout: float = 30.0) -> None:
    """Until the store's watcher let go of the file (LINGER pinned at 0)."""
    deadline = time.monotonic() + timeout
    while store.leases and store._journal_window() is not None:  # noqa: SLF001 - the window is what is under test
        assert time.monotonic() < deadline, "the store kept the file"
        time.sleep(0.01)


def _count_transactions(monkeypatch, store) -> list[str]:
    opened: list[str] = []
    tx = type(store)._job_tx  # noqa: SLF001 - counted, not changed

    @contextlib.contextmanager
    def counted(self, request_id):
        opened.append(request_id)
        with tx(self, request_id) as con:
            yield con

    monkeypatch.setattr(type(store), "_job_tx", counted)
    return opened


def test_two_racing_terminals_of_a_journalled_job_one_wins_the_other_is_inert(tmp_path, monkeypatch):
    """Journal lines are planned from the job as this process left it: a thread that journalled a move
    first makes the other plan again from there (here: the job ended, so the late terminal folds first and
    is a transaction), so the first terminal wins and the other is kept inert, the seqs gap-free."""
    from lab.store import duckdb_files

    monkeypatch.setattr(duckdb_files, "LINGER", 3600.0)
    with Lab(tmp_path / "lab.duckdb") as lab:
        store = lab.store
        store.jobs()  # takes the file: the job's moves are journal lines
        opened = _count_transactions(monkeypatch, store)
        _journalled(store, "job-race")
        assert store.transition_job("job-race", "RUNNING", allowed_from=["QUEUED"])
        results: list[tuple[str, bool]] = []
        barrier = threading.Barrier(2)

        def finish(status: str) -> None:
            barrier.wait()
            results.append((status, store.transition_job("job-race", status, allowed_from=["RUNNING"], terminal=True)))

        threads = [threading.Thread(target=finish, args=(s,)) for s in ("SUCCEEDED", "FAILED")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(opened) == {"job-race"} and sorted(won for _, won in results) == [False, True]
        winner = next(status for status, won in results if won)
        events = store.job_events("job-race")
        assert [e.seq for e in events] == list(range(len(events))) == [0, 1, 2, 3]
        assert [(e.kind, e.to_status) for e in events][2] == ("transition", winner)
        assert events[3].kind == "inert"
        assert store.job("job-race").status == winner
