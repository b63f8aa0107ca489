"""A `subprocess` runtime's worker records and replays its agent's model calls (issue 28 item 1, docs/replay.md).

Real worker processes (forked from the lab's fork server) on a real DuckDB file. The worker imports
`tests.agents.agent_defs:counted_worker`, a `FunctionModel` that appends a line per call to a file, so
the calls are counted across processes:
- the first run makes 2 calls, recorded by the worker and written as the run's `calls` rows when the
  lab adopts its result; a fork replays both in its own worker (0 calls), marked replayed with the
  tokens saved, as `recorded` events of the station;
- a changed prompt calls for real; `replay="strict"` replays the same request and fails a changed one
  with the diff of the two requests;
- the agent's API key (in its model settings' headers) is in no request.json, calls file or store row;
- a worker killed after its first call (LOST) keeps that call: the person's retry replays it; a
  cancelled one's call is kept too, and a fork replays it;
- adopting a worker's calls again (a crash between writing them and recording the terminal) writes none twice;
  and across a real kernel restart (the worker outlives the kernel) in test_replay_worker_restart.py.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lab import Lab
from lab.agents.worker_calls import adopt_calls, read_calls
from tests.agents.agent_defs import WORKER_SECRET
from tests.agents.graphs import Essay, declare

TARGET = "tests.agents.agent_defs:counted_worker"


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the worker's model appends a line to per call (workers inherit the variable)."""
    path = tmp_path / "model-calls.txt"
    monkeypatch.setenv("GRAPHLAB_TEST_CALLS", str(path))
    monkeypatch.delenv("GRAPHLAB_TEST_HOLD", raising=False)
    monkeypatch.delenv("GRAPHLAB_TEST_HOLD_SECOND", raising=False)
    return path


def made(path: Path) -> list[str]:
    """The model calls made so far, in every process: one line each."""
    return path.read_text().splitlines() if path.exists() else []


def test_a_fork_of_a_subprocess_station_replays_in_its_worker(tmp_path: Path, counted: Path) -> None:
    with Lab(tmp_path / "lab.duckdb") as lab:
        lab.agents.register("recorded-worker", target=TARGET, runner="subprocess")
        g = declare(lab, runtime="recorded-worker")
        run = g.start(g.nodes["Outline"]())
        run.run()
        assert run.status == "done", run.error
        assert [line.split()[1] for line in made(counted)] == ["secret=yes"] * 2  # the model got its key
        assert len({line.split()[0] for line in made(counted)}) == 1  # in one worker, not this process
        assert lab.agents.jobs(run_id=run.id)[0].record.runner == "subprocess"
        live = run.calls()
        assert [(c.node_id, c.mode, c.call_index, c.kind) for c in live] == [
            ("Outline", "live", 1, "model"), ("Outline", "live", 2, "model"),
        ]  # fmt: skip
        assert all(c.attempt is not None and c.tokens > 0 for c in live)

        fork = run.fork(0)
        fork.run()
        assert fork.status == "done" and fork.output == run.output == "Durable agents: park, adopt"
        assert len(made(counted)) == 2  # the fork's worker made no model call
        replayed = fork.calls()
        assert [c.mode for c in replayed] == ["replayed", "replayed"]
        assert [c.replayed_from for c in replayed] == [c.call_id for c in live]
        for r, mode in ((run, "live"), (fork, "replayed")):  # taken in with the outcome, as an in-process job's
            events = r.events("recorded")
            assert [(e.node_id, e.payload["mode"], e.payload["job"]) for e in events] == [("Outline", mode, True)] * 2
            assert [e.payload["call"] for e in events] == [c.call_id for c in r.calls()]
            assert [e.payload["saved_tokens"] for e in events] == [c.tokens if mode == "replayed" else 0 for c in live]
            assert all(e.seq < r.events("settled")[0].seq for e in events)  # held for the station's settlement

        folder = Path(lab.agents.jobs(run_id=fork.id)[0].record.worker["folder"])
        shipped = json.loads((folder / "request.json").read_text())["recording"]
        assert shipped["mode"] == "auto" and shipped["run_id"] == fork.id and shipped["lineage"] == [fork.id, run.id]
        assert sorted(c["call_id"] for c in shipped["calls"]) == sorted(c.call_id for c in live)
        job = lab.agents.jobs(run_id=fork.id)[0].record  # adopted again (a crash between, a restart): nothing twice
        assert adopt_calls(lab.store, job, lab.agents.folder) == 2
        assert [c.call_id for c in fork.calls()] == [c.call_id for c in replayed]
        assert len(fork.events("recorded")) == 2

        changed = run.fork(0, state=Essay(topic="kites"))  # a changed prompt: both requests differ
        changed.run()
        assert changed.status == "done" and len(made(counted)) == 4
        assert [c.mode for c in changed.calls()] == ["live", "live"]

        strict = run.fork(0)
        strict.replay = "strict"  # the worker follows the run's mode
        strict.run()
        assert strict.status == "done" and len(made(counted)) == 4
        assert [c.mode for c in strict.calls()] == ["replayed", "replayed"]

        refused = run.fork(0, state=Essay(topic="gliders"))
        refused.replay = "strict"
        refused.run()
        assert refused.status == "failed" and len(made(counted)) == 4  # refused before the model was called
        message = refused.error["message"]
        assert "replay='strict'" in message and refused.job.error["type"] == "ReplayMissError"
        assert "lab.errors.ReplayMissError" in refused.job.error["mro"]  # what a Retry policy would match
        assert '-     "content": "Outline an essay about durable agents' in message
        assert '+     "content": "Outline an essay about gliders' in message
        assert refused.calls() == []

        texts = [p.read_bytes() for p in Path(lab.agents.folder).rglob("*") if p.is_file() and p.suffix != ".log"]
        assert any(b"Outline an essay" in t for t in texts)  # the recordings were shipped and written back
        assert all(WORKER_SECRET.encode() not in t and b"extra_headers" not in t for t in texts)
        stored = json.dumps(lab.sql("select request::VARCHAR, response::VARCHAR from calls").fetchall())
        stored += json.dumps(lab.sql("select payload::VARCHAR from events").fetchall())
        stored += json.dumps(lab.sql("select payload::VARCHAR from job_events").fetchall())
        assert WORKER_SECRET not in stored and "Bearer" not in stored and "extra_headers" not in stored
        assert json.loads(json.dumps(live[0].request))["settings"] == {"temperature": 0.5}  # what is not a secret stays


def test_a_calls_file_cut_mid_line_is_read_to_its_last_whole_line(tmp_path: Path, counted: Path) -> None:
    """A worker killed as it wrote a call leaves a last piece without its newline: no reader takes it."""
    with Lab(tmp_path / "lab.duckdb") as lab:
        lab.agents.register("recorded-worker", target=TARGET, runner="subprocess")
        g = declare(lab, runtime="recorded-worker")
        run = g.start(g.nodes["Outline"]())
        run.run()
        job = lab.agents.jobs(run_id=run.id)[0].record
    folder = Path(job.worker["folder"])
    whole = (folder / "calls.ndjson").read_bytes()
    lines = whole.split(b"\n")
    assert len(lines) == 3 and lines[-1] == b""
    (folder / "calls.ndjson").write_bytes(lines[0] + b"\n" + lines[1][: len(lines[1]) // 2])
    assert [c.call_index for c in read_calls(folder)] == [1]


def _until(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def _held_after_first_call(lab: Lab) -> tuple[Any, threading.Thread, Path]:
    """A run whose subprocess worker made (and recorded) its first call and is held before the second:
    the run, the thread running it, and the job's folder."""
    lab.agents.register("recorded-worker", target=TARGET, runner="subprocess")
    g = declare(lab, runtime="recorded-worker")
    run = g.start(g.nodes["Outline"]())
    t = threading.Thread(target=run.run)
    t.start()
    _until(lambda: run.job is not None and run.job.status == "RUNNING")
    folder = Path(lab.agents.folder) / run.job.request_id
    _until(lambda: (folder / "calls.ndjson").exists() and len(read_calls(folder)) == 1)  # paid for, recorded
    return run, t, folder


def test_a_killed_workers_calls_are_kept_and_its_retry_replays_them(
    tmp_path: Path, counted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "hold"
    monkeypatch.setenv("GRAPHLAB_TEST_HOLD_SECOND", str(hold))
    try:
        with Lab(tmp_path / "lab.duckdb") as lab:
            run, t, folder = _held_after_first_call(lab)
            os.kill(int(json.loads((folder / "worker.json").read_text())["pid"]), signal.SIGKILL)  # held before call 2
            t.join(30)
            assert not t.is_alive() and run.job.status == "LOST" and len(made(counted)) == 1
            assert [(c.mode, c.call_index) for c in run.calls()] == [("live", 1)]  # kept with the LOST job
            hold.touch()
            run.job.retry()
            run.run()
            assert run.status == "done" and run.output == "Durable agents: park, adopt"
            assert len(made(counted)) == 2  # the retry replayed the first call and made only the second
            assert [(c.mode, c.call_index) for c in run.calls()] == [("live", 1), ("replayed", 1), ("live", 2)]
            assert [e.payload["mode"] for e in run.events("recorded")] == ["live", "replayed", "live"]
    finally:
        hold.touch()


def test_a_cancelled_workers_call_is_kept_and_a_fork_replays_it(
    tmp_path: Path, counted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "hold"
    monkeypatch.setenv("GRAPHLAB_TEST_HOLD_SECOND", str(hold))
    try:
        with Lab(tmp_path / "lab.duckdb") as lab:
            run, t, folder = _held_after_first_call(lab)
            run.job.cancel()  # the worker, held before its second call, is killed
            t.join(30)
            assert not t.is_alive() and run.job.status == "CANCELLED" and run.status == "failed"
            assert [(c.mode, c.call_index) for c in run.calls()] == [("live", 1)]
            assert [e.payload["mode"] for e in run.events("recorded")] == ["live"]  # taken in with the outcome
            hold.touch()
            fork = run.fork(0)
            fork.run()
            assert fork.status == "done" and len(made(counted)) == 2  # the first call replayed
            assert [(c.mode, c.call_index) for c in fork.calls()] == [("replayed", 1), ("live", 2)]
    finally:
        hold.touch()
