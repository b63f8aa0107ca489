"""Delegated agent tests: a released-or-not switch for the slow agent, and a lab with the test agents."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lab import Lab


@pytest.fixture
def release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Touch the returned path to let the slow agent answer (workers inherit the variable).

    Touched at teardown too, so a worker of a failed test finishes instead of waiting."""
    path = tmp_path / "release"
    monkeypatch.setenv("GRAPHLAB_TEST_RELEASE", str(path))
    yield path
    path.touch()


@pytest.fixture
def lab(tmp_path: Path):
    from .agent_defs import broken, planner, slow_planner

    with Lab(tmp_path / "lab.duckdb") as lab:
        lab.agents.register("planner", planner)
        lab.agents.register("slow", slow_planner)
        lab.agents.register("broken", broken)
        lab.agents.register("slow-worker", target="tests.agents.agent_defs:slow_planner", runner="subprocess")
        lab.agents.register("worker", target="tests.agents.agent_defs:planner", runner="subprocess")
        yield lab
