"""Shared fixtures: labs on a real DuckDB file and in memory, and a small counter graph."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, LabGraph
from tests.matrix.summary import pytest_runtest_logreport, pytest_terminal_summary
from tests.xdist_groups import check_ray_modules

__all__ = ("pytest_runtest_logreport", "pytest_terminal_summary")  # hooks: the matrix's summary


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that uses the session Ray is in a module tests/xdist_groups.py groups on one worker."""
    check_ray_modules(items, config.rootpath)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, absent under `-p no:xdist`
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The whole suite's two workers (scripts/test.sh) take the browser tests and the Ray tests as one
    group each (tests/xdist_groups.py)."""
    from tests.xdist_groups import GroupScheduling

    return GroupScheduling(config, log) if config.getvalue("dist") == "loadgroup" else None


@dataclass
class Counter:
    count: int = 0
    seen: list[str] = field(default_factory=list)


@dataclass
class Inc(BaseNode[Counter, None, int]):
    by: int = 1

    async def run(self, ctx: GraphRunContext[Counter, None]) -> Check:
        ctx.state.count += self.by
        ctx.state.seen.append(f"inc{self.by}")
        return Check()


@dataclass
class Check(BaseNode[Counter, None, int]):
    limit: int = 6

    async def run(self, ctx: GraphRunContext[Counter, None]) -> Inc | End[int]:
        if ctx.state.count >= self.limit:
            return End(ctx.state.count)
        return Inc(by=2)


def declare_counter(lab: Lab, name: str = "counter") -> LabGraph:
    g = lab.graph(name, state_type=Counter, output_type=int)
    g.node(Inc)
    g.node(Check)
    return g


@pytest.fixture
def db_path(tmp_path) -> str:
    return os.fspath(tmp_path / "lab.duckdb")


@pytest.fixture
def file_lab(db_path) -> Iterator[Lab]:
    lab = Lab(db_path)
    yield lab
    if not lab.store.closed:
        lab.close()


@pytest.fixture(params=["file", "memory"])
def lab(request, tmp_path) -> Iterator[Lab]:
    """Every store-facing test runs against a DuckDB file and against `:memory:`."""
    lab = Lab(os.fspath(tmp_path / "lab.duckdb")) if request.param == "file" else Lab(":memory:")
    yield lab
    if not lab.store.closed:
        lab.close()


@pytest.fixture(scope="session")
def ray_session() -> Iterator[str]:
    """One local Ray for the whole test session (2 CPUs), started once; its address, for other
    processes (kernels, workers) to join with RAY_ADDRESS instead of starting a Ray of their own,
    which takes a minute on a busy machine."""
    try:
        import ray
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Ray is required under CI=true: {exc}; pip install -e '.[dev]'")
        pytest.skip(f"Ray is not installed here ({exc}); pip install -e '.[dev]'")
    from lab.batch.batch import start_ray

    start_ray(num_cpus=2, attempts=4)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()

