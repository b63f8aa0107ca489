"""The batch worker: a Ray actor holding its own `Lab`, driving one run at a time.

With a PostgreSQL store the worker opens the lab's store itself and writes every boundary
directly. With the embedded DuckDB store (which one process holds) the worker runs on a private
in-memory store seeded with the run's head, captures every transaction the run writes, and
sends them back: the notebook process writes them, in order, into the lab's store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from ..errors import LabError


@dataclass
class Seed:
    """One run to drive: its id and, for an embedded store, the rows its head is rebuilt from."""

    run_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Outcome:
    """What a worker reports for one run."""

    run_id: str
    status: str
    output: Any = None
    error: str | None = None
    transactions: list[bytes] = field(default_factory=list)
    """Embedded store only: each transaction the run wrote, as JSON rows, in order."""


class BatchWorker:
    """Declares the driver's graph once, then drives the runs it is handed (`run(seed)`).

    `lab_type` is the driver's `Lab` class (passed in, so the batch kind never imports the facade):
    the worker opens its own lab with it, on the store at `location` or in memory.
    """

    def __init__(self, spec: Any, location: str | None, lab_type: Callable[[str], Any], deps: Any = None):
        self.embedded = location is None
        self.lab = lab_type(":memory:") if self.embedded else lab_type(location)
        self.graph = spec.declare(self.lab)
        self.deps = deps
        self._captured: list[bytes] | None = None
        if self.embedded:
            store = self.lab.store
            write = store.write

            def capture(rows: Any, *, sync: bool = True) -> None:
                if self._captured is not None:
                    self._captured.append(to_json(list(rows), fallback=str))  # before the journal numbers them
                write(rows, sync=sync)

            store.write = capture  # type: ignore[method-assign]

    def ready(self) -> bool:
        return True

    def run(self, seed: Seed) -> Outcome:
        lab = self.lab
        if self.embedded and seed.rows:
            lab.store.write(seed.rows)
        self._captured = [] if self.embedded else None
        try:
            run = lab.resume(seed.run_id, deps=self.deps)
            run.run()
            rec = lab.store.get_run(seed.run_id)
            error = None
            if rec.error and rec.status == "failed":
                error = f"{rec.error.get('type', '').rsplit('.', 1)[-1]}: {rec.error.get('message', '')}"
            out = Outcome(seed.run_id, rec.status, rec.output, error)
        except LabError as exc:
            out = Outcome(seed.run_id, "failed", None, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a failing input fails its run only
            out = Outcome(seed.run_id, "failed", None, f"{type(exc).__name__}: {exc}")
        finally:
            lab.store.live_runs.pop(seed.run_id, None)  # this worker keeps no handle between seeds
            if self.embedded:
                lab.store.flush()
                out_tx, self._captured = self._captured or [], None
        if self.embedded:
            out.transactions = out_tx
            lab.store.delete_run(seed.run_id)  # the notebook's store keeps it; this copy goes
        return out

    def close(self) -> None:
        self.lab.close()


def load_rows(blob: bytes) -> list[dict[str, Any]]:
    return json.loads(blob)
