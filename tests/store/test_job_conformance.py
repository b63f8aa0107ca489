"""The agent-job tables on both backends (issue 26 done-when 4, the PostgreSQL column): the same
contract as tests/agents/test_job_store.py, run on a DuckDB file and on a PostgreSQL database.

One row per request id (idempotent insert), every transition an event row, the first terminal
wins and a later one is kept `inert`, observations are numbered without a gap and a progress
line is recorded once, and a reopened store marks a dead runner's job LOST. On PostgreSQL the
racers are separate store objects (separate connections, as two processes would be).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from lab import Lab
from lab.errors import StoreError
from lab.records import JobRecord
from lab.store.jobs import JobTables
from lab.store.postgres_store import PostgresStore, is_postgres_url


def _job(request_id: str = "job-1", digest: str = "d1", **kw: object) -> JobRecord:
    return JobRecord(request_id, "writer", "task", {"prompt": "p", "n": [1, 2]}, digest, "QUEUED", run_id="run-x", **kw)


def _other_store(lab: Lab, location: str) -> JobTables:
    """A second, independent writer of the same store: its own connections on PostgreSQL; on DuckDB
    the store object a process shares (a file has one per process, which serialises its threads)."""
    if is_postgres_url(location):
        return PostgresStore(location)
    return lab.store


def _race(n: int, work: Callable[[int], object]) -> list[object]:
    results: list[object] = [None] * n
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            results[i] = work(i)
        except BaseException as exc:  # reported below, with the others' results
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not [t for t in threads if t.is_alive()], "a racer did not finish within 120 s"
    assert not errors, errors
    return results


def test_both_stores_keep_agent_jobs(lab: Lab) -> None:
    """issue 26 done-when 4: the PostgreSQL store has the job tables' methods (lab.agents refused it)."""
    assert isinstance(lab.store, JobTables)
    assert lab.agents.jobs() == []


def test_insert_is_idempotent_and_transitions_are_rows(lab: Lab, location: str) -> None:
    store = lab.store
    stored, inserted = store.insert_job(_job(wait_owner="w-1", checkpoint_seq=3))
    assert inserted and stored.status == "QUEUED" and stored.request == {"prompt": "p", "n": [1, 2]}
    assert (stored.wait_owner, stored.checkpoint_seq, stored.ended_at) == ("w-1", 3, None)
    again, inserted = store.insert_job(_job(digest="other"))
    assert not inserted and again.digest == "d1"  # the stored request stands
    assert store.transition_job("job-1", "ADMITTED", allowed_from=["QUEUED"])
    assert store.transition_job("job-1", "RUNNING", allowed_from=["ADMITTED"], worker={"pid": 1, "host": "h"})
    assert store.transition_job(
        "job-1", "SUCCEEDED", allowed_from=["RUNNING"], terminal=True, output={"answer": 42}, usage={"tokens": 7}
    )
    assert not store.transition_job("job-1", "FAILED", allowed_from=["RUNNING"], terminal=True, error={"message": "late"})
    job = store.job("job-1")
    assert (job.status, job.output, job.usage, job.worker, job.error) == (
        "SUCCEEDED", {"answer": 42}, {"tokens": 7}, {"pid": 1, "host": "h"}, None,
    )  # fmt: skip
    assert job.ended_at is not None and job.updated_at >= job.created_at
    rows = lab.sql("select kind, from_status, to_status from job_events order by seq").fetchall()
    assert rows == [
        ("transition", None, "QUEUED"),
        ("transition", "QUEUED", "ADMITTED"),
        ("transition", "ADMITTED", "RUNNING"),
        ("transition", "RUNNING", "SUCCEEDED"),
        ("inert", "SUCCEEDED", "FAILED"),
    ]
    assert store.job_events("job-1")[-1].payload == {"error": {"message": "late"}}  # what arrived late is kept
    assert [e.seq for e in store.job_events("job-1", after=2)] == [3, 4]
    assert store.job("nope") is None
    with pytest.raises(StoreError, match="no agent job 'nope'"):
        store.transition_job("nope", "RUNNING", allowed_from=["QUEUED"])
    with pytest.raises(ValueError, match="cannot set"):
        store.transition_job("job-1", "RUNNING", allowed_from=["QUEUED"], status="x")


def test_jobs_are_listed_oldest_first_and_filtered(lab: Lab) -> None:
    store = lab.store
    store.insert_job(_job("a"))
    store.insert_job(JobRecord("b", "writer", "task", {}, "d", "QUEUED", run_id="run-y", wait_owner="w"))
    store.transition_job("b", "ADMITTED", allowed_from=["QUEUED"])
    assert [j.request_id for j in store.jobs()] == ["a", "b"]
    assert [j.request_id for j in store.jobs(run_id="run-y")] == ["b"]
    assert [j.request_id for j in store.jobs(status="QUEUED")] == ["a"]
    assert [j.request_id for j in store.jobs(wait_owner="w", status="ADMITTED")] == ["b"]
    assert store.jobs(run_id="run-y", status="QUEUED") == []


def test_the_outcome_a_process_recorded_is_the_one_the_store_gives_back(lab: Lab) -> None:
    """A run adopts the terminal its own process recorded without reading the job back (issue 27 item 4):
    that outcome must equal what a reader of the store gets, JSON round-trip included (int keys, tuples)."""
    from lab.agents.outcomes import outcome_of, stored_outcome

    store = lab.store
    store.insert_job(_job())
    store.transition_job("job-1", "RUNNING", allowed_from=["QUEUED"])
    output = {1: "one", "pair": (1, 2), "x": 0.1, "nested": {"ok": True, "none": None}}
    assert store.transition_job("job-1", "SUCCEEDED", allowed_from=["RUNNING"], terminal=True, output=output)
    assert stored_outcome("job-1", "SUCCEEDED", output, None) == outcome_of(store.job("job-1"))


def test_observations_are_numbered_and_a_progress_line_is_recorded_once(lab: Lab) -> None:
    store = lab.store
    store.insert_job(_job())
    store.add_job_events("job-1", [("message", {"text": "hi", "line": 0}), ("usage", {"tokens": 3, "line": 1})])
    store.add_job_events("job-1", [("message", {"text": "hi", "line": 0}), ("message", {"text": "more", "line": 2})])
    store.add_job_events("job-1", [])
    events = store.job_events("job-1")
    assert [(e.seq, e.kind, e.payload.get("line")) for e in events] == [
        (0, "transition", None), (1, "message", 0), (2, "usage", 1), (3, "message", 2),
    ]  # fmt: skip
    assert store.job("job-1").status == "QUEUED"  # observations never move a job


def test_racing_terminals_from_two_writers_one_wins_the_other_is_inert(lab: Lab, location: str) -> None:
    """Two writers (two store objects on PostgreSQL) record a terminal at once: exactly one applies."""
    stores = [lab.store, _other_store(lab, location)]
    try:
        statuses = ("SUCCEEDED", "FAILED")
        for round_ in range(5):
            rid = f"job-{round_}"
            stores[0].insert_job(_job(rid))
            stores[0].transition_job(rid, "RUNNING", allowed_from=["QUEUED"])
            won = _race(
                2, lambda i, rid=rid: stores[i].transition_job(rid, statuses[i], allowed_from=["RUNNING"], terminal=True)
            )
            assert sorted(won) == [False, True], (round_, won)
            winner = statuses[won.index(True)]
            job = stores[1].job(rid)
            assert job.status == winner and job.ended_at is not None
            events = stores[0].job_events(rid)
            assert [e.seq for e in events] == list(range(len(events)))
            assert [(e.kind, e.to_status) for e in events[2:]] == [
                ("transition", winner), ("inert", statuses[1 - statuses.index(winner)]),
            ]  # fmt: skip
    finally:
        if stores[1] is not lab.store:
            stores[1].close()


def test_racing_inserts_and_observations_store_one_job_with_gap_free_events(lab: Lab, location: str) -> None:
    """Four writers insert one request id and add observations at once: one job, events 0..n-1."""
    other = _other_store(lab, location)
    stores = [lab.store, other, lab.store, other]
    try:
        inserted = _race(4, lambda i: stores[i].insert_job(_job("same"))[1])
        assert sorted(inserted) == [False, False, False, True]
        _race(4, lambda i: stores[i].add_job_events("same", [("message", {"from": i, "k": k}) for k in range(5)]))
        events = lab.store.job_events("same")
        assert [e.seq for e in events] == list(range(21))
        assert sorted((e.payload["from"], e.payload["k"]) for e in events[1:]) == [(i, k) for i in range(4) for k in range(5)]
    finally:
        if other is not lab.store:
            other.close()


def test_a_dead_runners_job_is_lost_after_a_reopen(location: str) -> None:
    """Durable across a reopen, where a job whose task runner stopped is recorded LOST (by recovery)."""
    with Lab(location) as lab:
        lab.store.insert_job(_job())
        assert lab.store.transition_job("job-1", "ADMITTED", allowed_from=["QUEUED"])
    with Lab(location) as lab:
        job = lab.store.job("job-1")
        assert job.status == "LOST" and "the process that ran it as a task stopped" in job.error["message"]
        assert lab.store.job_events("job-1")[-1].payload == {"by": "recovery"}
        assert [a.request_id for a in lab.agents.jobs()] == ["job-1"]


def test_a_job_write_on_a_closed_store_says_how_to_reopen(location: str) -> None:
    lab = Lab(location)
    lab.close()
    with pytest.raises(StoreError, match="closed"):
        lab.store.insert_job(_job())
    with pytest.raises(StoreError, match="closed"):
        lab.store.jobs()


def test_an_admission_held_with_its_observations_and_terminal_is_one_ordered_transaction(lab: Lab) -> None:
    """Issue 27 item 4: a job started in this process records ADMITTED, PREPARING, RUNNING, its messages
    and its terminal in one `advance_job`, each transition its own event, the messages after RUNNING."""
    store = lab.store
    assert isinstance(store, JobTables)
    store.insert_job(_job())
    moves = [
        ("ADMITTED", ["QUEUED"], False, None, {"worker": {"pid": 1}}),
        ("PREPARING", ["ADMITTED"], False, None, {}),
        ("RUNNING", ["PREPARING"], False, None, {}),
        ("SUCCEEDED", ["RUNNING"], True, {"by": "runner"}, {"output": {"title": "t"}, "error": None, "usage": None}),
    ]
    observed = [("message", {"role": "response"}), ("usage", {"total_tokens": 3})]
    assert store.advance_job("job-1", moves, observations=observed, observed_after=3) == 4
    events = store.job_events("job-1")
    assert [(e.kind, e.to_status) for e in events] == [
        ("transition", "QUEUED"), ("transition", "ADMITTED"), ("transition", "PREPARING"), ("transition", "RUNNING"),
        ("message", None), ("usage", None), ("transition", "SUCCEEDED"),
    ]  # fmt: skip
    assert [e.seq for e in events] == list(range(7))
    rec = store.job("job-1")
    assert rec.status == "SUCCEEDED" and rec.output == {"title": "t"} and rec.worker == {"pid": 1} and rec.ended_at


def test_a_held_admission_that_finds_its_job_cancelled_keeps_its_result_inert(lab: Lab) -> None:
    """A cancel recorded meanwhile (another process) wins: the held admission applies nothing, and the
    result that came with it is kept as an `inert` event (evidence), after the observations."""
    store = lab.store
    assert isinstance(store, JobTables)
    store.insert_job(_job())
    assert store.transition_job("job-1", "CANCELLING", allowed_from=["QUEUED"])
    assert store.transition_job("job-1", "CANCELLED", allowed_from=["CANCELLING"], terminal=True)
    moves = [
        ("ADMITTED", ["QUEUED"], False, None, {}),
        ("RUNNING", ["ADMITTED"], False, None, {}),
        ("SUCCEEDED", ["RUNNING"], True, {"by": "runner"}, {"output": {"title": "late"}}),
    ]
    assert store.advance_job("job-1", moves, observations=[("message", {"role": "response"})], observed_after=2) == 0
    tail = [(e.kind, e.from_status, e.to_status) for e in store.job_events("job-1")][3:]
    assert tail == [("inert", "CANCELLED", "ADMITTED"), ("message", None, None), ("inert", "CANCELLED", "SUCCEEDED")]
    assert store.job_events("job-1")[-1].payload == {"by": "runner", "output": {"title": "late"}}
    assert store.job("job-1").status == "CANCELLED"


_OTHER_PROCESS = """
import sys
from lab.store import open_location
store = open_location(sys.argv[1])
if sys.argv[2] == "observe":
    store.add_job_events("job-1", [("message", {"from": "other"})])
elif sys.argv[2] == "cancel":  # a job it has not read yet (DuckDB: journalled by the first process)
    assert store.transition_job("job-1", "CANCELLING", allowed_from=["QUEUED"], payload={"by": "other"})
else:
    assert store.transition_job("job-1", "SUCCEEDED", allowed_from=["RUNNING"], terminal=True, output={"by": "other"})
store.close()
"""


@pytest.mark.parametrize("other_does", ["observe", "end"])
def test_a_job_moved_by_another_process_is_read_before_this_one_moves_it(lab: Lab, location: str, other_does: str) -> None:
    """This process remembers where it left a job (DuckDB skips the read); another process then writes
    the job: this process's next write finds that out, rolls back and moves it from what is stored."""
    import subprocess
    import sys

    lab.store.insert_job(_job())
    assert lab.store.transition_job("job-1", "RUNNING", allowed_from=["QUEUED"])
    done = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, location, other_does], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    won = lab.store.transition_job(
        "job-1", "FAILED", allowed_from=["RUNNING"], terminal=True, observations=[("message", {"from": "here"})]
    )
    assert won is (other_does == "observe")
    job = lab.store.job("job-1")
    events = lab.store.job_events("job-1")
    assert [e.seq for e in events] == list(range(len(events)))
    kinds = [(e.kind, e.to_status, e.payload.get("from")) for e in events[2:]]
    if other_does == "observe":
        assert job.status == "FAILED"
        assert kinds == [("message", None, "other"), ("message", None, "here"), ("transition", "FAILED", None)]
    else:
        assert job.status == "SUCCEEDED" and job.output == {"by": "other"}
        assert kinds == [("transition", "SUCCEEDED", None), ("message", None, "here"), ("inert", "FAILED", None)]


def test_a_job_that_rode_in_its_park_is_seen_and_moved_by_another_process_and_its_first_write_here_is_then_inert(
    lab: Lab, location: str
) -> None:
    """A new job of a run created here rides in its park's write (DuckDB journals it; PostgreSQL stores it in
    a transaction of its own): another process finds it (folding this one's journal) and cancels it; this
    process's held admission and terminal then meet the stored row, apply nothing and are kept inert."""
    import subprocess
    import sys

    ride: list[dict] = []
    stored, inserted = lab.store.insert_job(_job(), ride=ride)
    assert inserted and stored.status == "QUEUED"
    if ride:  # the park's write, which carries the job's rows
        lab.store.write(ride)
    done = subprocess.run([sys.executable, "-c", _OTHER_PROCESS, location, "cancel"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    moves = [
        ("ADMITTED", ["QUEUED"], False, None, {}),
        ("RUNNING", ["ADMITTED"], False, None, {}),
        ("SUCCEEDED", ["RUNNING"], True, {"by": "runner"}, {"output": {"title": "late"}}),
    ]
    assert lab.store.advance_job("job-1", moves) == 0
    assert lab.store.job("job-1").status == "CANCELLING"
    events = lab.store.job_events("job-1")
    assert [e.seq for e in events] == list(range(len(events)))
    assert [(e.kind, e.from_status, e.to_status) for e in events] == [
        ("transition", None, "QUEUED"), ("transition", "QUEUED", "CANCELLING"),
        ("inert", "CANCELLING", "ADMITTED"), ("inert", "CANCELLING", "SUCCEEDED"),
    ]  # fmt: skip
