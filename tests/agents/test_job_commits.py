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

from .graphs import declare


def _until(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def test_a_job_in_this_process_takes_one_commit_and_keeps_every_transition(lab, monkeypatch):
    """QUEUED rides in the park's journal write; ADMITTED, PREPARING, RUNNING, the agent's messages and
    the terminal in one commit with the job's row (a fast agent: its admission is held with its
    observations, and its park names the process that started it): one job transaction, each
    transition still an event of its own."""
    store = lab.store
    opened = []
    written: list[list[dict]] = []
    tx = type(store)._job_tx
    write = type(store).write

    def spied_write(self, rows, **kw):
        written.append([dict(r) for r in rows])
        return write(self, rows, **kw)

    monkeypatch.setattr(type(store), "write", spied_write)

    @contextlib.contextmanager
    def counted(self, request_id):
        opened.append(request_id)
        with tx(self, request_id) as con:
            yield con

    monkeypatch.setattr(type(store), "_job_tx", counted)
    # the hold window made long: on a busy machine this fast agent can outlast 50 ms, and a timed
    # flush of its admission and messages would then be a third commit (the window itself is the next test's)
    monkeypatch.setattr(observations, "EVERY", 3600.0)
    run = declare(lab).start(lab.graphs["essay"].nodes["Outline"]())
    run.run()
    assert run.status == "done"
    rid = run.job.request_id
    assert opened == [rid]
    (park,) = [rows for rows in written if any(r.get("t") == "wait" for r in rows)]
    assert [(r["t"], r["request_id"], r["status"] if r["t"] == "job" else r["to_status"]) for r in park if r["t"] in ("job", "jev")] == [
        ("job", rid, "QUEUED"), ("jev", rid, "QUEUED")
    ]
    assert run.wait is None and run.events("waiting")[0].payload["details"]["admitted_by"]["pid"] == os.getpid()
    events = store.job_events(rid)
    moves = [(e.from_status, e.to_status) for e in events if e.kind == "transition"]
    assert moves == [
        (None, "QUEUED"), ("QUEUED", "ADMITTED"), ("ADMITTED", "PREPARING"), ("PREPARING", "RUNNING"), ("RUNNING", "SUCCEEDED")
    ]
    assert [e.seq for e in events] == list(range(len(events)))  # gap-free
    kinds = [e.kind for e in events]
    assert kinds.index("message") < kinds.index("usage") < len(kinds) - 1  # observations before the terminal
    assert run.job.record.worker["pid"] > 0  # who runs it: this process


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
    monkeypatch.setattr(observations, "EVERY", 3600.0)  # one job commit a station, whatever the machine's load
    with Lab(tmp_path / "lab.duckdb", fsync=fsync) as lab:
        lab.agents.register("planner", planner)
        runs = [declare(lab).start(lab.graphs["essay"].nodes["Outline"]()) for _ in range(2)]
        for run in runs:  # two stations, nothing read between them
            run.run()
        commits = [s for s in sent if s.endswith("COMMIT")]
        if fsync:
            assert commits == ["COMMIT", "COMMIT"] and not any("fsync_mode" in s for s in sent)
        else:
            assert commits == ["SET fsync_mode = 'none'; COMMIT", "COMMIT"]  # left 'none' between the two
            assert not any("'standard'" in s for s in sent)
        # each station's one job transaction inserts its row as the moves leave it (QUEUED rode in the park)
        assert [s.split()[:2] for s in sent if s.startswith("BEGIN")] == [["BEGIN;", "INSERT"], ["BEGIN;", "INSERT"]]
        assert "BEGIN" not in sent
        assert all(run.status == "done" and run.job.transitions()[-1] == "SUCCEEDED" for run in runs)
        assert lab.sql("SELECT current_setting('fsync_mode')").fetchall()[0][0].lower() == "standard"
