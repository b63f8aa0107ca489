"""An in-process agent job costs few job-table commits, and still records every transition and,
while it runs, what it observed (issue 27 item 4: a delegated station close to the agent's own time).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time

import pytest

from lab.agents import observations
from lab.records import JobRecord

from .graphs import declare


def _until(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def _spy(monkeypatch, store) -> tuple[list[str], list[list[dict]]]:
    """Count the store's job transactions and keep every journal transaction it writes."""
    opened: list[str] = []
    written: list[list[dict]] = []
    tx, write = type(store)._job_tx, type(store).write

    def spied_write(self, rows, **kw):
        written.append([dict(r) for r in rows])
        return write(self, rows, **kw)

    @contextlib.contextmanager
    def counted(self, request_id):
        opened.append(request_id)
        with tx(self, request_id) as con:
            yield con

    monkeypatch.setattr(type(store), "write", spied_write)
    monkeypatch.setattr(type(store), "_job_tx", counted)
    # the hold window made long: on a busy machine this fast agent can outlast 50 ms, and a timed
    # flush of its admission and messages would then be a write more (the window itself is a later test's)
    monkeypatch.setattr(observations, "EVERY", 3600.0)
    return opened, written


def _lines(written: list[list[dict]], rid: str) -> list[list[tuple]]:
    """Each journal transaction's job lines of `rid`: (t, status of a `job` line or to_status of a `jev`)."""
    picked = [[(r["t"], r["status"] if r["t"] == "job" else r["to_status"]) for r in rows if r.get("request_id") == rid] for rows in written]
    return [p for p in picked if p]


def _every_transition_in_order(store, rid: str) -> None:
    events = store.job_events(rid)
    moves = [(e.from_status, e.to_status) for e in events if e.kind == "transition"]
    assert moves == [
        (None, "QUEUED"), ("QUEUED", "ADMITTED"), ("ADMITTED", "PREPARING"), ("PREPARING", "RUNNING"), ("RUNNING", "SUCCEEDED")
    ]
    assert [e.seq for e in events] == list(range(len(events)))  # gap-free
    kinds = [e.kind for e in events]
    assert kinds.index("message") < kinds.index("usage") < len(kinds) - 1  # observations before the terminal


def test_a_job_in_this_process_takes_no_transaction_while_the_file_is_held_and_keeps_every_transition(lab, monkeypatch):
    """QUEUED rides in the park's journal write; ADMITTED, PREPARING, RUNNING, the agent's messages and the
    terminal in one more journal write, the job's row as they leave it (the file held by this process all
    along, so no fold took the job's lines meanwhile): no job transaction, each transition an event of its
    own, and a read (which folds) finds them all."""
    from lab.store import duckdb_files

    monkeypatch.setattr(duckdb_files, "LINGER", 3600.0)  # the file stays held between operations
    store = lab.store
    store.jobs()  # takes the file
    opened, written = _spy(monkeypatch, store)
    run = declare(lab).start(lab.graphs["essay"].nodes["Outline"]())
    run.run()
    assert run.status == "done"
    (park,) = [rows for rows in written if any(r.get("t") == "wait" for r in rows)]
    rid = next(r["request_id"] for r in park if r.get("t") == "job")
    assert opened == []
    queued, ended = _lines(written, rid)  # two journal transactions carry the job: the park, then its end
    assert queued == [("job", "QUEUED"), ("jev", "QUEUED")]
    assert ended[:4] == [("job", "SUCCEEDED"), ("jev", "ADMITTED"), ("jev", "PREPARING"), ("jev", "RUNNING")]
    assert ended[-1] == ("jev", "SUCCEEDED") and set(ended[4:-1]) == {("jev", None)}  # its observations between
    assert run.wait is None and run.events("waiting")[0].payload["details"]["admitted_by"]["pid"] == os.getpid()
    _every_transition_in_order(store, rid)
    job = store.job(rid)
    assert job.status == "SUCCEEDED" and job.ended_at is not None and job.output["title"]
    assert run.job.record.worker["pid"] > 0  # who runs it: this process


def test_a_job_whose_lines_a_fold_took_is_stored_by_a_transaction(lab, monkeypatch, release):
    """A read while the job runs folds its QUEUED lines into the tables: its terminal can no longer be a
    journal line (the fold keeps a job's last line only while its row is not stored), so it is a
    transaction that finds the stored row and moves it, every transition still in order."""
    lab.agents.register("stalling", _stalling_agent(release))
    store = lab.store
    opened, written = _spy(monkeypatch, store)
    run = declare(lab, runtime="stalling", name="stalling").start(lab.graphs["stalling"].nodes["Outline"]())
    t = threading.Thread(target=run.run)
    t.start()
    try:
        _until(lambda: run.job is not None and run.job.status == "QUEUED")  # a read: folds the park's lines
    finally:
        release.touch()
        t.join(120)
    assert run.status == "done"
    rid = run.job.request_id
    assert set(opened) == {rid}
    assert _lines(written, rid)[0] == [("job", "QUEUED"), ("jev", "QUEUED")]
    assert all(line[0] != ("job", "SUCCEEDED") for line in _lines(written, rid))
    events = store.job_events(rid)
    assert [(e.from_status, e.to_status) for e in events if e.kind == "transition"][-1] == ("RUNNING", "SUCCEEDED")
    assert [e.seq for e in events] == list(range(len(events)))
    assert store.job(rid).status == "SUCCEEDED"


def test_the_run_adopts_its_jobs_outcome_without_reading_the_job_back(lab, monkeypatch):
    """The job ran as a task here and its terminal won here: the run takes that outcome from the job's
    completion, not from the job table (issue 27 item 4); nor does the run read its binding back: this
    process created it, so it has no job this process did not store."""
    store = lab.store
    reads: list[str] = []
    for name in ("job", "jobs"):
        method = getattr(type(store), name)
        monkeypatch.setattr(type(store), name, lambda self, *a, _m=method, _n=name, **k: (reads.append(_n), _m(self, *a, **k))[1])
    run = declare(lab).start(lab.graphs["essay"].nodes["Outline"]())
    run.run()
    assert run.status == "done"
    assert reads == []
    monkeypatch.undo()
    (verdict,) = run.events("verdict")
    rec = store.job(run.job.request_id)
    assert rec.status == "SUCCEEDED" and verdict.payload["output"] == rec.output and verdict.payload["status"] == "SUCCEEDED"


def _stalling_agent(release):
    """An agent whose first round calls a tool that waits for `release` (a file), then answers."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from .agent_defs import Plan

    def model(messages, info):
        if len(messages) == 1:
            return ModelResponse(parts=[TextPart("Waiting for the data."), ToolCallPart("fetch", {})])
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"title": "Late", "points": ["data"]})])

    agent = Agent(FunctionModel(model), output_type=Plan, name="stalling")

    @agent.tool_plain
    async def fetch() -> str:
        deadline = time.monotonic() + 120
        while not release.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return "the data"

    return agent


def test_a_running_jobs_messages_are_recorded_before_it_ends(lab, release):
    """The agent's messages are held at most 50 ms: a person sees its first round (text and a tool call)
    while the tool still works, not only with the job's terminal."""
    lab.agents.register("stalling", _stalling_agent(release))
    run = declare(lab, runtime="stalling", name="stalling").start(lab.graphs["stalling"].nodes["Outline"]())
    t = threading.Thread(target=run.run)
    t.start()
    try:
        _until(lambda: run.job is not None and any(e.kind == "message" for e in lab.store.job_events(run.job.request_id)))
        assert run.job.status == "RUNNING"  # still at work: the messages did not wait for the terminal
        parts = [p for m in run.job.messages() for p in m["parts"]]
        assert any(p.get("content") == "Waiting for the data." for p in parts)
    finally:
        release.touch()
        t.join(120)
    assert run.status == "done" and run.output is not None


@pytest.mark.parametrize("fsync", [False, True])
def test_a_job_commit_syncs_only_on_a_store_that_syncs_its_boundaries(tmp_path, monkeypatch, fsync):
    """A job's rows are as durable as its run's boundaries (docs/store.md): without fsync=True its commit
    is not synced (DuckDB's fsync_mode is set 'none' with the first job COMMIT and left so for the next
    station's,
    set back by any other use of the connection, so a read or a fold still syncs); with fsync=True it is.
    BEGIN rides in each job transaction's first statement."""
    from lab import Lab
    from lab.store import duckdb_jobs

    from .agent_defs import planner

    sent: list[str] = []

    class Spy:
        def __init__(self, con):
            self.con = con

        def execute(self, text, *args):
            sent.append(" ".join(text.split()))
            return self.con.execute(text, *args)

    reading = duckdb_jobs.DuckDBJobs._jobs_reading

    @contextlib.contextmanager
    def spied(self):
        with reading(self) as con:
            yield Spy(con)

    monkeypatch.setattr(duckdb_jobs.DuckDBJobs, "_jobs_reading", spied)
    with Lab(tmp_path / "lab.duckdb", fsync=fsync) as lab:
        for rid in ("job-a", "job-b"):  # two job transactions (a job not journalled), nothing else between them
            lab.store.insert_job(JobRecord(rid, "planner", "task", {"prompt": "p"}, "d", "QUEUED", run_id="run-x"))
        commits = [s for s in sent if s.endswith("COMMIT")]
        if fsync:
            assert commits == ["COMMIT", "COMMIT"] and not any("fsync_mode" in s for s in sent)
        else:
            assert commits == ["SET fsync_mode = 'none'; COMMIT", "COMMIT"]  # left 'none' between the two
            assert not any("'standard'" in s for s in sent)
        assert [s.split()[:2] for s in sent if s.startswith("BEGIN")] == [["BEGIN;", "INSERT"], ["BEGIN;", "INSERT"]]
        assert "BEGIN" not in sent
        lab.agents.register("planner", planner)
        run = declare(lab).start(lab.graphs["essay"].nodes["Outline"]())
        run.run()  # a station's job, however it is stored, never leaves a commit unsynced with fsync=True
        assert run.status == "done" and run.job.transitions()[-1] == "SUCCEEDED"
        assert not fsync or not any("fsync_mode" in s for s in sent)
        assert lab.sql("SELECT current_setting('fsync_mode')").fetchall()[0][0].lower() == "standard"
