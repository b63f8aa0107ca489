"""Batch runs: one run per input, driven on Ray, every run durable in the lab's store.

`batch = lab.map(g, inputs, entry=Start())` (a graph of any kind: `spec.Shipment` carries it to the
workers, `inputs.start_input` says how an input starts its run) creates every run first (each `started` event
carries `tags: {"batch": id, "index": i}`, so `lab.sql` groups a batch and a restarted kernel
finds it), then hands the unfinished ones to a pool of Ray actors (`lab.batch.worker`). A run
that fails, fails alone; a run that parks at a gate waits for its verdict and the batch counts
it; `batch.run()` again (also after a kernel restart, `lab.batch(id).run()`) continues only the
runs that are not finished: queued after a verdict, interrupted, or never driven.
"""

from __future__ import annotations

import html
import secrets
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_graph import BaseNode

from ..display_hooks import show
from ..errors import ArgumentError, LabError, StoreError
from .inputs import start_input
from .ray_start import load_ray, start_ray
from .spec import GraphShippingError, Shipment
from .worker import NOT_DRIVEN, BatchWorker, Outcome, Seed, load_rows, store_job

if TYPE_CHECKING:
    from ..lab import Lab

__all__ = ("Batch", "BatchRow", "batch_runs", "start_batch", "open_batch", "release_workers", "start_ray")

FINISHED = frozenset({"done", "failed", "cancelled"})
"""Statuses a batch does not drive again."""

RUNS_PER_CALL = 8
"""At most this many runs go to a worker in one Ray call (`BatchWorker.run_many`)."""

SEED_CHUNK = 64
"""On the embedded store, the seeds of this many runs are read together before they are handed out:
each read of the store first folds the journal the workers' boundaries were written to (a DuckDB
transaction, tens of ms), so a seed read between two settled runs cost a fold per run; read a chunk
at a time, the folds are one per chunk (docs/benchmarks.md, "Evaluate")."""


@dataclass(frozen=True)
class BatchRow:
    """One run of a batch, as the table shows it."""

    index: int
    run_id: str
    status: str
    output: Any
    error: str | None


def start_batch(
    lab: Lab,
    graph: Any,
    inputs: Iterable[Any],
    *,
    entry: BaseNode[Any, Any, Any] | None = None,
    name: str | None = None,
    ship: bool = True,
) -> Batch:
    """Create one run per input (nothing runs yet), for a graph of any kind: how each input starts
    its run is `inputs.start_input`'s (a state with `entry`, a `(node, state)` pair, `StartWith`,
    or the start node's inputs). `ship=False`: the runs go in this process (`run(workers=0)`), so
    the graph is not made ready for Ray workers."""
    items = list(inputs)
    if not items:
        raise ArgumentError("lab.map(graph, inputs): inputs is empty; pass one input per run")
    batch_id = name or f"batch-{int(time.time() * 1000):x}-{secrets.token_hex(3)}"
    if not isinstance(batch_id, str) or not batch_id:
        raise ArgumentError(f"lab.map(name={name!r}): a batch's name is a non-empty str")
    if entry is not None and not isinstance(entry, BaseNode):
        raise ArgumentError(f"lab.map(entry={entry!r}): entry is the node every run starts at, say Start()")
    # a graph that cannot reach the workers is refused before any run exists
    shipment = Shipment.of(graph) if ship else None
    run_ids = [
        start_input(graph, item, i, entry=entry, tags={"batch": batch_id, "index": i}).id
        for i, item in enumerate(items)
    ]
    return Batch(lab, graph, batch_id, run_ids, shipment)


def batch_runs(lab: Lab, batch_id: str) -> dict[int, str]:
    """The runs the store holds of batch `batch_id`, by input index (tagged on their `started` events)."""
    rows = lab.sql(
        "select run_id, payload->'tags'->>'index' as i from events where kind = 'started' "
        "and payload->'tags'->>'batch' = ?",
        [batch_id],
    ).fetchall()
    return {int(i): run_id for run_id, i in rows}


def open_batch(lab: Lab, batch_id: str) -> Batch:
    """A batch as the store holds it (after a kernel restart): its runs by index."""
    runs = batch_runs(lab, batch_id)
    if not runs:
        raise ArgumentError(f"lab.batch({batch_id!r}): no batch of that id in the store {lab.store.path}")
    run_ids = [runs[i] for i in sorted(runs)]
    graph = lab.graph_of(lab.store.get_run(run_ids[0]), f"lab.batch({batch_id!r})")
    return Batch(lab, graph, batch_id, run_ids, Shipment.of(graph))


class Batch:
    """A batch of runs of one graph: `run()` drives the unfinished ones; displays as a table."""

    def __init__(self, lab: Lab, graph: Any, batch_id: str, run_ids: list[str], spec: Shipment | None):
        self.lab = lab
        self.graph = graph
        self.id = batch_id
        self.run_ids = run_ids
        self._spec = spec
        """What the Ray workers declare the graph from (made on the first run on Ray when None)."""
        self.widget: Any = None
        self.seconds: float | None = None
        """Wall time of the last `run()`."""

    # -- reading ---------------------------------------------------------------------------

    def rows(self) -> list[BatchRow]:
        """Each run's index, id, status, output and error, from the store."""
        out = []
        for i, run_id in enumerate(self.run_ids):
            rec = self.lab.store.get_run(run_id)
            err = None
            if rec.error and rec.status == "failed":
                err = f"{str(rec.error.get('type', '')).rsplit('.', 1)[-1]}: {rec.error.get('message', '')}"
            out.append(BatchRow(i, run_id, rec.status, rec.output, err))
        return out

    def counts(self) -> dict[str, int]:
        """How many runs are in each status (`waiting`: parked for a verdict)."""
        return dict(Counter(r.status for r in self.rows()))

    @property
    def waiting(self) -> int:
        return self.counts().get("waiting", 0)

    @property
    def outputs(self) -> list[Any]:
        return [r.output for r in self.rows()]

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        *,
        workers: int | None = None,
        address: str | None = None,
        deps: Any = None,
        progress: bool = True,
        on_progress: Callable[[dict[str, int]], None] | None = None,
        on_run: Callable[[str], None] | None = None,
        around_run: Callable[[str], AbstractContextManager[Any]] | None = None,
    ) -> Batch:
        """Drive every unfinished run on Ray until it is done, failed or waiting for a verdict
        (`workers=0`: in this process, one after another, without Ray).

        `ray.init()` starts a local Ray unless one is running (`address=` joins a cluster).
        `workers` actors run at once (default: Ray's CPUs). With a PostgreSQL store the workers
        write to it; with the embedded store they send their boundaries here to be written.
        `on_run(run_id)` is called here as each run is stored as it stopped (done, failed, waiting).
        `around_run(run_id)`: a context manager each run is driven inside, in this process only
        (`workers=0`; `lab.evaluate` captures a case's spans in it).
        """
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 0):
            raise ArgumentError(
                f"batch.run(workers={workers!r}): workers is how many runs go at once on Ray, an int >= 1 "
                "(0: one after another in this process)"
            )
        ray = load_ray() if workers != 0 else None
        if ray is not None and not ray.is_initialized():
            start_ray(address=address)
        todo = [r for r in self.rows() if r.status not in FINISHED and r.status != "waiting"]
        widget = self._progress_widget() if progress else None
        started = time.perf_counter()
        self._report(widget, on_progress)
        if todo and ray is None:
            self._drive_here(todo, deps, widget, on_progress, on_run, around_run)
        elif todo:
            n = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
            self._drive(ray, todo, n, deps, widget, on_progress, on_run)
        self.seconds = time.perf_counter() - started
        self._report(widget, on_progress)
        return self

    def _drive(
        self,
        ray: Any,
        todo: list[BatchRow],
        workers: int,
        deps: Any,
        widget: Any,
        on_progress: Any,
        on_run: Any = None,
    ) -> None:
        from ..store import is_postgres_url

        location = self.lab.path if is_postgres_url(self.lab.path) else None
        actors = _actors(ray, location, deps, min(workers, len(todo)), type(self.lab))
        if self._spec is None:
            self._spec = Shipment.of(self.graph)
        shipment = ray.put(self._spec)  # sent once, read by every worker
        queue = [r.run_id for r in todo]
        seeds: deque[Seed] = deque()
        # runs per Ray call: a few, so each worker folds its store once per call rather than per run,
        # and 4 calls per worker at least, so the workers stay evenly loaded to the end
        per_call = max(1, min(RUNS_PER_CALL, len(todo) // (4 * len(actors))))

        def next_seeds() -> list[Seed]:
            """The next runs' seeds; read `SEED_CHUNK` at a time (see there)."""
            if not seeds:
                chunk, queue[:SEED_CHUNK] = queue[:SEED_CHUNK], []
                seeds.extend(self._seed(run_id, location) for run_id in chunk)
            return [seeds.popleft() for _ in range(min(per_call, len(seeds)))]

        busy: dict[Any, Any] = {}
        try:
            for actor in actors:
                if queue or seeds:
                    busy[actor.run_many.remote(shipment, next_seeds())] = actor
            while busy:
                ready, _ = ray.wait(list(busy), num_returns=1)
                ref = ready[0]
                actor = busy.pop(ref)
                if queue or seeds:
                    busy[actor.run_many.remote(shipment, next_seeds())] = actor
                for settled in self._settle(ray, ref):
                    if on_run is not None:
                        on_run(settled)
                self._report(widget, on_progress)
        except BaseException:
            _drop_actors(ray)  # a worker in an unknown state is not handed the next batch
            raise

    def _drive_here(
        self,
        todo: list[BatchRow],
        deps: Any,
        widget: Any,
        on_progress: Any,
        on_run: Any = None,
        around_run: Any = None,
    ) -> None:
        """`workers=0`: drive each run in this process, one after another (no Ray). A failing run
        fails alone: its error is stored with it, as a worker's would be."""
        for row in todo:
            with around_run(row.run_id) if around_run is not None else nullcontext():
                run = self.lab.resume(row.run_id, deps=deps)
                try:
                    run.run()
                except Exception:  # the run's status and error are in the store (raise_on_failure, a limit)
                    pass
            if on_run is not None:
                on_run(row.run_id)
            self._report(widget, on_progress)

    def _seed(self, run_id: str, location: str | None) -> Seed:
        """What a worker needs to rebuild the run's head: nothing on PostgreSQL, its rows otherwise."""
        live = self.lab.store.live_runs.pop(run_id, None)
        if live is not None and live.busy:
            raise LabError(
                f"run {run_id} of batch {self.id} is running in this process; wait for it, then batch.run()"
            )
        if location is not None:
            return Seed(run_id)
        store = self.lab.store
        rec = store.get_run(run_id)
        rows = [store.run_row(rec)]
        head = store.checkpoint(run_id, rec.head_seq) if rec.head_seq is not None else None
        if head is not None:
            rows.append(store.checkpoint_row(head))
        last_seq = store.seqs(run_id)[-1:]
        if (
            last_seq and head is not None and last_seq[0] != head.seq
        ):  # rewound: new checkpoints go after the last
            rows.append(store.checkpoint_row(store.checkpoint(run_id, last_seq[0])))
        count, last = store.event_tail(run_id, 1)
        rows.extend(store.event_row(e) for e in last)
        rows.extend(
            store.wait_row(w)
            for w in store.waits(run_id)
            if head is not None and w.checkpoint_seq == head.seq
        )
        for w in store.waits(run_id):
            if head is not None and w.checkpoint_seq == head.seq and w.resolution is not None:
                rows.append(store.resolution_row(w.owner, w.resolution, w.resolved_at))
        # last: the run's status as stored (a head checkpoint row would say `waiting` for a queued run)
        rows.append(
            store.update_row(
                run_id, status=rec.status, head_seq=rec.head_seq, output=rec.output, error=rec.error
            )
        )
        return Seed(run_id, rows)

    def _settle(self, ray: Any, ref: Any) -> list[str]:
        """Write what the worker sent back for each run of its call (embedded store), in order.
        Returns the runs' ids."""
        try:
            outs: list[Outcome] = ray.get(ref)
        except Exception as exc:  # the actor died (OOM, killed): which run is unknown here
            raise StoreError(
                f"a batch worker died: {exc}; batch.run() again continues the unfinished runs"
            ) from None
        return [self._settle_one(out) for out in outs]

    def _settle_one(self, out: Outcome) -> str:
        """Write one run's transactions and jobs; a run the worker failed that its rows do not say
        failed is failed here, alone. Returns the run's id."""
        store = self.lab.store
        if out.status == NOT_DRIVEN:  # the run is as it was: fix the graph, then batch.run() again
            raise GraphShippingError(
                f"a batch worker could not declare graph {self.graph.name!r}: {out.error}"
            )
        for blob in out.transactions:
            store.write(load_rows(blob))
        for blob in out.jobs:
            store_job(store, blob)
        if out.status != "failed":  # the rows just written say it; a read here would fold them per run
            return out.run_id
        rec = store.get_run(out.run_id)
        if rec.status not in FINISHED and rec.status != "waiting":
            err = {
                "node_id": None,
                "attempt": None,
                "type": "lab.batch.WorkerError",
                "message": out.error or "",
                "traceback": "",
            }
            store.write([store.update_row(out.run_id, status="failed", head_seq=rec.head_seq, error=err)])
        return out.run_id

    # -- progress --------------------------------------------------------------------------

    def _progress_widget(self) -> Any:
        if self.widget is None:  # the progress bar is a view (lab.views registers it): never imported here
            self.widget = show(
                "batch.progress", total=len(self.run_ids), title=f"{self.id} · {self.graph.name}"
            )
        try:
            from IPython import get_ipython
            from IPython.display import display

            shell = get_ipython()
            if shell is not None and getattr(shell, "kernel", None) is not None:
                display(self.widget)
        except ImportError:  # pragma: no cover - IPython ships with ipykernel
            pass
        return self.widget

    def _report(self, widget: Any, on_progress: Callable[[dict[str, int]], None] | None) -> None:
        if widget is None and on_progress is None:
            return
        counts = self.counts()
        if widget is not None:
            widget.update(counts)
        if on_progress is not None:
            on_progress(counts)

    # -- display ---------------------------------------------------------------------------

    def __repr__(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts().items()))
        return f"<Batch {self.id} of {self.graph.name}: {len(self.run_ids)} runs ({counts})>"

    def _repr_html_(self) -> str:
        rows = self.rows()
        counts = Counter(r.status for r in rows)
        head = " · ".join(f"{html.escape(k)} {v}" for k, v in sorted(counts.items()))
        body = "".join(
            f"<tr><td>{r.index}</td><td><code>{html.escape(r.run_id)}</code></td><td>{html.escape(r.status)}</td>"
            f"<td>{html.escape(repr(r.output)) if r.output is not None else ''}</td>"
            f"<td>{html.escape(r.error or '')}</td></tr>"
            for r in rows
        )
        return (
            f"<div><b>{html.escape(self.id)}</b> ({html.escape(self.graph.name)}): {len(rows)} runs, {head}</div>"
            "<table><thead><tr><th>#</th><th>run</th><th>status</th><th>output</th><th>error</th></tr></thead>"
            f"<tbody>{body}</tbody></table>"
        )


_POOL: dict[tuple[Any, ...], list[Any]] = {}
"""Warm actors for the last (store, deps): starting a Python worker costs seconds, so a batch run
again, or the next batch of any graph, reuses them (a worker declares each graph it is shipped
once). One pool at a time: each actor holds a CPU of the Ray cluster until the next pool replaces it."""


def _actors(ray: Any, location: str | None, deps: Any, n: int, lab_type: Any) -> list[Any]:
    key = (location, id(deps), ray.get_runtime_context().get_job_id())
    if key not in _POOL:
        _drop_actors(ray)
    pool = _POOL.setdefault(key, [])
    if len(pool) < n:
        actor_cls = ray.remote(num_cpus=1)(BatchWorker)
        pool.extend(actor_cls.remote(location, lab_type, deps) for _ in range(n - len(pool)))
    return pool[:n]


def release_workers() -> None:
    """Stop the warm batch workers of this process (each holds a CPU of the Ray cluster)."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        _drop_actors(ray)


def _drop_actors(ray: Any) -> None:
    for actors in _POOL.values():
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # pragma: no cover - already gone
                pass
    _POOL.clear()
