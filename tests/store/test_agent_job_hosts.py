"""Recovery across hosts (issue 26 done-when 4, the PostgreSQL column; defect item 2 of the agent-jobs
review): when a lab opens a store, only a job whose runner is proven dead on this host is LOST.

A job run by a process on another host (two machines sharing one PostgreSQL store) is left as it
is, whether it is RUNNING in a task, RUNNING in a worker subprocess, or only ADMITTED by that
host's lab; this lab follows its row and sees its end when that host records it. On both backends.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from lab import Lab
from lab.records import JobRecord
from lab.store.postgres_store import PostgresStore, is_postgres_url

ELSEWHERE = {"pid": 4242, "host": "another-host.example", "start": "123"}
"""A process identity on a host that is not this one."""


def _job(request_id: str, runner: str = "task") -> JobRecord:
    return JobRecord(request_id, "writer", runner, {"prompt": "p"}, "d-" + request_id, "QUEUED", run_id="run-x")


def _dead_here() -> dict[str, object]:
    """The identity of a process of this host that has ended (a start time no live process has)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    return {"pid": int(proc.stdout), "host": socket.gethostname(), "start": "0"}


def _seed(location: str, tmp_path) -> None:
    """Write, as other labs would have, one job per case; then close."""
    with Lab(location) as lab:
        s = lab.store
        for rid, runner in (("task-there", "task"), ("worker-there", "subprocess"), ("admitted-there", "task"),
                            ("admitted-worker-there", "subprocess"), ("task-dead-here", "task")):  # fmt: skip
            s.insert_job(_job(rid, runner))
        folder = os.fspath(tmp_path / "not-on-this-host")
        s.transition_job("task-there", "ADMITTED", allowed_from=["QUEUED"], worker={"admitted_by": ELSEWHERE})
        s.transition_job("task-there", "PREPARING", allowed_from=["ADMITTED"], worker=ELSEWHERE)
        s.transition_job("task-there", "RUNNING", allowed_from=["PREPARING"])
        s.transition_job("worker-there", "ADMITTED", allowed_from=["QUEUED"], worker={"admitted_by": ELSEWHERE, "folder": folder})
        s.transition_job("worker-there", "RUNNING", allowed_from=["ADMITTED"], worker={"folder": folder, **ELSEWHERE, "pid": 777})
        s.transition_job("admitted-there", "ADMITTED", allowed_from=["QUEUED"], worker={"admitted_by": ELSEWHERE})
        s.transition_job(
            "admitted-worker-there", "ADMITTED", allowed_from=["QUEUED"], worker={"admitted_by": ELSEWHERE, "folder": folder}
        )
        s.transition_job("task-dead-here", "ADMITTED", allowed_from=["QUEUED"], worker={"admitted_by": ELSEWHERE})
        s.transition_job("task-dead-here", "RUNNING", allowed_from=["ADMITTED"], worker=_dead_here())


def test_another_hosts_jobs_survive_a_second_labs_open(location: str, tmp_path) -> None:
    """issue 26 item 2 (agent jobs on PostgreSQL): a second machine opening the store leaves the first
    machine's live jobs as they are (docs/agents.md: "is left as it is"); a runner proven dead on
    this host is still LOST."""
    _seed(location, tmp_path)
    with Lab(location) as lab:
        status = {j.request_id: j.status for j in lab.store.jobs()}
        assert status == {
            "task-there": "RUNNING", "worker-there": "RUNNING", "admitted-there": "ADMITTED",
            "admitted-worker-there": "ADMITTED", "task-dead-here": "LOST",
        }  # fmt: skip
        for rid in ("task-there", "worker-there", "admitted-there", "admitted-worker-there"):
            assert "LOST" not in [e.kind for e in lab.store.job_events(rid)], rid
        lost = lab.store.job("task-dead-here")
        assert "the process that ran it as a task stopped" in lost.error["message"]
    with Lab(location) as lab:  # and again: opening twice changes nothing
        assert lab.store.job("task-there").status == "RUNNING"
        assert lab.store.job("admitted-there").status == "ADMITTED"


def test_a_followed_job_ends_when_its_host_records_the_end(location: str, tmp_path) -> None:
    """issue 26 item 2: the job left to its host is followed through the store: `job.wait()` here
    returns once that host records the terminal (here: another writer of the store)."""
    _seed(location, tmp_path)
    with Lab(location) as lab:
        ended = lab.agents.completion("task-there")  # what `job.wait()` and a settling run await
        assert not ended.done()
        other = PostgresStore(location) if is_postgres_url(location) else lab.store
        try:
            assert other.transition_job(
                "task-there", "SUCCEEDED", allowed_from=["RUNNING"], terminal=True, output={"done": True}
            )
        finally:
            if other is not lab.store:
                other.close()
        ended.result(timeout=60)  # resolved by following the row: nothing in this process delivered it
        job = lab.agents.job("task-there")
        assert job.status == "SUCCEEDED" and job.record.output == {"done": True}


def test_a_store_without_job_tables_is_refused_naming_both_backends() -> None:
    """issue 26 item 3: the refusal no longer says only the DuckDB store keeps agent jobs (PostgreSQL does too)."""
    from types import SimpleNamespace

    from lab.agents import AgentRuntimeError
    from lab.agents.board import board_for

    with pytest.raises(AgentRuntimeError, match=r"JobTables.*Lab\('path.duckdb'\) or Lab\('postgresql://...'\)"):
        board_for(SimpleNamespace(store=object()))  # type: ignore[arg-type]
