"""The DuckDB store's side of the agent-job tables (jobs.py): its connection and transactions.

A job transaction runs on the store's connection under the store's lock (`_session`), so it
holds every job against this process's other threads; the file is held for the operation,
so against other processes too.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import duckdb

from ..errors import StoreError
from .jobs import JobTables

__all__ = ("DuckDBJobs",)


class DuckDBJobs(JobTables):
    """`JobTables` on the DuckDB store's connection."""

    insert_reads_first = True
    defers_admission = True

    _session: Any
    _check_writable: Any
    _check_open: Any

    @contextmanager
    def _job_tx(self, request_id: str) -> Iterator[duckdb.DuckDBPyConnection]:
        """The store's connection inside BEGIN ... COMMIT (ROLLBACK on error), errors translated."""
        self._check_writable()
        with self._jobs_reading() as con:
            con.execute("BEGIN")
            try:
                yield con
            except BaseException as exc:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                if isinstance(exc, duckdb.Error):
                    raise StoreError(f"cannot record the agent job: {str(exc).splitlines()[0]}") from None
                raise
            try:
                con.execute("COMMIT")
            except duckdb.Error as err:
                con.execute("ROLLBACK")
                raise StoreError(f"cannot record the agent job: {str(err).splitlines()[0]}") from None

    @contextmanager
    def _jobs_reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection for the job tables, without folding the journal first: jobs never go
        through the journal, so a fold (milliseconds while a run writes) would buy nothing here."""
        with self._session() as con:  # the file attached for this operation (docs/store.md "Who holds what")
            self._check_open()
            try:
                yield con
            except duckdb.Error as exc:
                raise StoreError(f"cannot read the agent jobs of {getattr(self, 'path', 'the store')}: {str(exc).splitlines()[0]}") from None
