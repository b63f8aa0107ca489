"""The job folder of a PostgreSQL store (issue 26 done-when 4; defect item 1 of the agent-jobs review).

A subprocess runner writes its job's files to a folder; beside a store *file* for DuckDB. A server
store has no file: its folder is under this user's cache folder, named by a digest of the URL
without its password; never a relative path spelled from the URL (`postgresql:/...jobs` in the
current directory, as it was).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lab import Lab

pytestmark = pytest.mark.slow


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This user's cache folder for the test; the current directory an empty folder that must stay empty."""
    monkeypatch.setenv("XDG_CACHE_HOME", os.fspath(tmp_path / "cache"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return tmp_path / "cache"


def test_a_postgres_stores_worker_jobs_live_under_the_user_cache(pg_url: str, cache: Path) -> None:
    """issue 26 item 1: on PostgreSQL a subprocess job runs to its end with its files in an absolute
    folder under the cache (keyed by a digest of the URL), and nothing appears in the working directory."""
    with Lab(pg_url) as lab:
        lab.agents.register("worker", target="tests.agents.agent_defs:planner", runner="subprocess")
        folder = Path(lab.agents.folder)
        assert folder.is_absolute() and folder.parent == cache / "graphlab" / "jobs", folder
        assert "postgres" not in folder.name and "@" not in os.fspath(folder)
        job = lab.agents.submit("sub-1", "worker", {"prompt": "plan"}).wait(timeout=180)
        rec = job.record
        assert rec.status == "SUCCEEDED" and rec.output == {"title": "Durable agents", "points": ["park", "adopt"]}
        assert rec.worker["folder"] == os.fspath(folder / "sub-1")
        assert (folder / "sub-1" / "result.json").is_file()
        assert rec.worker["pid"] != os.getpid()  # the worker reported itself ...
        assert rec.worker["admitted_by"]["pid"] == os.getpid()  # ... after this lab admitted it
    assert os.listdir(".") == []


def test_the_folder_is_the_same_with_or_without_the_password(cache: Path) -> None:
    """issue 26 item 1: the digest leaves the password out (a redacted URL names the same folder) and
    the folder's name holds no part of the URL; a file store keeps its folder beside the file."""
    from lab.agents.folders import jobs_folder

    full = jobs_folder("postgresql://ann:s3cret@db.example:5432/lab")
    assert full == jobs_folder("postgresql://ann:***@db.example:5432/lab") == jobs_folder("postgresql://ann@db.example:5432/lab")
    assert full != jobs_folder("postgresql://ann@db.example:5432/other")
    assert os.path.dirname(full) == os.fspath(cache / "graphlab" / "jobs")
    assert not any(part in full for part in ("s3cret", "db.example", "ann"))
    assert jobs_folder("rel/lab.duckdb") == os.path.abspath("rel/lab.duckdb") + ".jobs"
