"""Fixtures of the store conformance suite: every test runs on DuckDB and on PostgreSQL.

`location` is what `Lab(...)` takes: a DuckDB file path, or the URL of a fresh database on a
throwaway PostgreSQL cluster (one cluster per test session, tests/store/pgcluster.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from lab import Lab
from tests.store.pgcluster import Cluster, cluster


@pytest.fixture(scope="session")
def pg() -> Iterator[Cluster]:
    with cluster() as c:
        yield c


@pytest.fixture
def pg_url(pg: Cluster) -> Iterator[str]:
    name = pg.create_db()
    yield pg.url(name)
    _close_all()
    pg.drop_db(name)


@pytest.fixture(params=["duckdb", "postgres"])
def location(request, tmp_path) -> Iterator[str]:
    """Where a Lab opens its store: each conformance test runs once per backend."""
    if request.param == "duckdb":
        yield os.fspath(tmp_path / "lab.duckdb")
        _close_all()
    else:
        yield request.getfixturevalue("pg_url")


@pytest.fixture
def lab(location) -> Iterator[Lab]:
    lab = Lab(location)
    yield lab
    if not lab.store.closed:
        lab.close()


def _close_all() -> None:
    """Close every store this test left open (so a dropped database has no connections)."""
    from lab.store import duckdb_store, postgres_store

    for registry in (postgres_store._OPEN, duckdb_store.OPEN):
        for store in list(registry.values()):
            if not store.closed:
                store.close()
