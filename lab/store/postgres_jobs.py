"""The PostgreSQL store's side of the agent-job tables (jobs.py): its connections and transactions.

A job transaction runs on a pooled connection and first takes a transaction lock on the request
id (`JOB_LOCK`), so two processes (or threads) writing one job queue: the first to record a
terminal wins and the other finds the job moved on (an `inert` event), two inserts of one
request id store it once, and the events of one job are numbered without a gap or a clash.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .jobs import JobTables
from .postgres_schema import JOB_LOCK

__all__ = ("PostgresJobs",)


class PostgresJobs(JobTables):
    """`JobTables` on the PostgreSQL store's connection pool."""

    _conn: Any
    """`PostgresStore._conn(what)`: a pooled connection, driver errors translated into `StoreError`."""

    @contextmanager
    def _job_tx(self, request_id: str) -> Iterator[Any]:
        """A pooled connection in one transaction holding `request_id` (committed, or rolled back on error)."""
        with self._conn("record the agent job") as con, con.transaction():
            con.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [JOB_LOCK, request_id])
            yield con

    @contextmanager
    def _jobs_reading(self) -> Iterator[Any]:
        with self._conn("read the agent jobs") as con:
            yield con
