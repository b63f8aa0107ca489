"""The batch worker: a Ray actor holding its own `Lab`, driving one run at a time.

The worker declares the driver's graph once (`spec.Shipment.declare`: any kind, with the agent
runtimes its delegated stations name), then drives the runs it is handed. With a PostgreSQL store
the worker opens the lab's store itself and writes every boundary directly. With the embedded
DuckDB store (which one process holds) the worker runs on a private in-memory store seeded with
the run's head, captures every transaction the run writes, and sends them back: the notebook
process writes them, in order, into the lab's store, with the agent jobs the run's delegated
stations ran here (`jobs`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_json

from ..errors import LabError
from ..store.journal import dumps


@dataclass
class Seed:
    """One run to drive: its id and, for an embedded store, the rows its head is rebuilt from."""

    run_id: str
    rows: list[dict[str, Any]] = field(default_factory=list)


NOT_DRIVEN = "not driven"
"""An outcome's status when the worker could not declare the run's graph (the run is left as it was)."""


@dataclass
class Outcome:
    """What a worker reports for one run."""

    run_id: str
    status: str
    output: Any = None
    error: str | None = None
    transactions: list[bytes] = field(default_factory=list)
    """Embedded store only: each transaction the run wrote, as JSON rows, in order."""
    jobs: list[bytes] = field(default_factory=list)
    """Embedded store only: each agent job the run's delegated stations ran, with its observations (JSON)."""


class BatchWorker:
    """Drives the runs it is handed (`run(shipment, seed)`), declaring each graph it is shipped once.

    `lab_type` is the driver's `Lab` class (passed in, so the batch kind never imports the facade):
    the worker opens its own lab with it, on the store at `location` or in memory. A worker keeps
    the graphs it declared by digest, so the next batch of another graph (or kind) reuses the
    warm worker instead of starting a Python process.
    """

    def __init__(self, location: str | None, lab_type: Callable[[str], Any], deps: Any = None):
        self.embedded = location is None
        self.lab = lab_type(":memory:") if self.embedded else lab_type(location)
        self.graphs: dict[str, Any] = {}
        """The graphs declared here, by digest."""
        self.deps = deps
        self._captured: list[bytes] | None = None
        if self.embedded:
            store = self.lab.store
            write = store.write

            def capture(rows: Any, **how: Any) -> None:  # `how` (sync, hot, ...) goes on as given: a new write option passes through
                if self._captured is not None:
                    # before the journal numbers them; each row as the journal encodes it (a recorded
                    # call's request and response are `Encoded` JSON, spliced in as they are)
                    self._captured.append(b"[" + b",".join(dumps(row) for row in rows) + b"]")
                write(rows, **how)

            store.write = capture  # type: ignore[method-assign]

    def ready(self) -> bool:
        return True

    def declare(self, shipment: Any) -> Any:
        """The shipped graph in this worker's lab, declared on first sight; the one its runs resume onto."""
        graph = self.graphs.get(shipment.digest)
        if graph is None:
            graph = self.graphs[shipment.digest] = shipment.declare(self.lab)
        elif self.lab.graphs.get(graph.name) is not graph:
            self.lab.add_graph(graph)  # another revision of the name ran here since
        return graph

    def run(self, shipment: Any, seed: Seed) -> Outcome:
        return self.run_many(shipment, [seed])[0]

    def run_many(self, shipment: Any, seeds: list[Seed]) -> list[Outcome]:
        """Drive the runs of `seeds` one after another. On the embedded store every seed is written
        first and every run's copy deleted last, so the store folds its journal once for all the
        seeds and once for the deletes, not twice per run (docs/benchmarks.md)."""
        lab = self.lab
        try:
            self.declare(shipment)
        except Exception as exc:  # the graph did not arrive: no run of it can be driven here
            return [Outcome(seed.run_id, NOT_DRIVEN, None, f"{type(exc).__name__}: {exc}") for seed in seeds]
        if self.embedded:
            for seed in seeds:
                if seed.rows:
                    lab.store.write(seed.rows)
        try:
            return [self._drive(seed) for seed in seeds]
        finally:
            if self.embedded:
                for seed in seeds:
                    lab.store.delete_run(seed.run_id)  # the notebook's store keeps it; this copy goes

    def _drive(self, seed: Seed) -> Outcome:
        lab = self.lab
        self._captured = [] if self.embedded else None
        try:
            run = lab.resume(seed.run_id, deps=self.deps)
            run.run()
            # the run object says what it stored: a read here would fold the store once more per run
            error = None
            if run.error and run.status == "failed":
                error = f"{run.error.get('type', '').rsplit('.', 1)[-1]}: {run.error.get('message', '')}"
            out = Outcome(seed.run_id, run.status, run.output_json, error)
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
            out.jobs = job_blobs(lab.store, seed.run_id)
        return out

    def close(self) -> None:
        self.lab.close()


def load_rows(blob: bytes) -> list[dict[str, Any]]:
    return json.loads(blob)


def job_blobs(store: Any, run_id: str) -> list[bytes]:
    """The agent jobs of `run_id` in this worker's store (none where the store keeps none), as JSON."""
    if not callable(getattr(store, "jobs", None)):
        return []
    out = []
    for job in store.jobs(run_id=run_id):
        events = [dataclasses.asdict(e) for e in store.job_events(job.request_id) if e.kind != "transition"]
        out.append(to_json({"job": dataclasses.asdict(job), "events": events}, fallback=str))
    return out


OBSERVED = ("request_id", "runtime", "runner", "request", "digest", "status", "run_id", "node_id", "wait_owner",
            "checkpoint_seq", "retry_of", "output", "error", "usage", "worker")  # fmt: skip
"""The fields of a job a worker's copy carries over (its times are the notebook store's)."""


def store_job(store: Any, blob: bytes) -> None:
    """Write a job a worker ran into the notebook's store: its record as it ended, and its observations."""
    from ..records import JobRecord

    data = json.loads(blob)
    job = JobRecord(**{k: data["job"][k] for k in OBSERVED})
    _, inserted = store.insert_job(job)
    if inserted:
        store.add_job_events(job.request_id, [(e["kind"], e["payload"]) for e in data["events"]])
