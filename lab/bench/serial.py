"""The loop table of `python -m lab.bench`: what the lab costs per station, against raw pydantic-graph.

One process, one graph (`common.Loop`, a node that counts to N and ends), several ways to run it:

* `floor` — the native graph the lab builds (`g.build().native`, `auto_instrument=False`),
  driven exactly as the serial engine drives it (`Graph.iter`, a `GraphTaskRequest` injected at
  the first boundary, then `GraphRun.next()` until an `EndMarker`), with no persistence at all;
* `idiomatic` — pydantic-graph's own `GraphBuilder` graph with a start edge and the default
  `auto_instrument=True`, run with `await graph.run(...)` (context only, not the floor);
* `lab_step`, `lab_batch` — `run.run()` on a DuckDB file with `durability="step"` / `"batch"`;
* `lab_memory` — `run.run()` on `Lab(":memory:")` with step durability;
* `lab_step_async` — `await run.arun()` awaited from the benchmark's own event loop, step
  durability on a DuckDB file: the drive itself runs on the lab's loop thread (handed over by
  `lab.engine.loop.delegate`, as from a notebook cell), so this row is `lab_step` plus the
  hand-over between the two loops;
* `lab_step_fsync` — `run.run()` on a DuckDB file opened with `Lab(path, fsync=True)`, step
  durability: every settled boundary reaches the disk (one `fdatasync` each) before the next
  station runs;
* `lab_trace_off`, `lab_trace_on` — `lab_step` with OpenTelemetry tracing (lab/observe.py)
  turned off (`lab.observe(enabled=False)`: what every run pays when no provider is configured)
  and on (`lab.observe(provider)`: an SDK `TracerProvider` with a `BatchSpanProcessor` whose
  exporter drops the spans, so the row is the lab's span building, not an exporter's network).

Per-station time is the wall time of a whole N-visit run divided by N. Every variant is timed
R times, round-robin (variant A, B, C, ... then again), so machine noise hits them alike; the
report gives the median and the minimum, and each median's ratio to the floor's median. It is
a benchmark, not a test: it reports whether or not the targets are met.
"""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import statistics
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from importlib import metadata
from typing import Any

from pydantic_graph import EndMarker, Graph, GraphBuilder, GraphTaskRequest

from .. import Lab
from .common import DEFAULT_VISITS, BenchState, Loop, declare

__all__ = (
    "Variant",
    "VariantResult",
    "BenchReport",
    "VARIANTS",
    "run_benchmark",
    "to_markdown",
    "machine_info",
    "run_lab_async",
    "DEFAULT_REPEAT",
)

DEFAULT_REPEAT = 7
MEMORY = ":memory:"


# -- results --------------------------------------------------------------------------------


STEP_TARGET = 1.25
"""The product's target for a durable step: at most 1.25x the native iterator (issue 27)."""
BATCH_TARGET = 1.15
"""`durability="batch"`: at most 1.15x the native iterator."""
FSYNC_TARGET = 2.5
"""`fsync=True`: at most 2.5x the native iterator (one fdatasync per boundary)."""


@dataclass(frozen=True)
class Variant:
    """One row of the loop table: its key (for `--only`), its label, its target."""

    key: str
    label: str
    target: float | None = None
    """The ratio this variant should stay under, if it has a target: to the floor, or to `against`."""
    against: str | None = None
    """The row the target is a ratio to, when it is not the floor (`lab_postgres`: a DuckDB station)."""


VARIANTS: tuple[Variant, ...] = (
    Variant("floor", "floor: native `Graph.iter` of the lab's graph, no persistence"),
    Variant(
        "idiomatic", "pydantic-graph idiomatic `GraphBuilder` + `await graph.run()` (auto_instrument=True)"
    ),
    Variant("lab_step", 'lab, `durability="step"`, DuckDB file, `run.run()`', STEP_TARGET),
    Variant("lab_batch", 'lab, `durability="batch"`, DuckDB file, `run.run()`', BATCH_TARGET),
    Variant("lab_memory", 'lab, step, `Lab(":memory:")`, `run.run()`', STEP_TARGET),
    Variant(
        "lab_step_async",
        "lab, step, DuckDB file, `await run.arun()` from another event loop (driven on the lab's loop thread)",
        STEP_TARGET,
    ),
    Variant("lab_step_fsync", 'lab, step, `Lab(path, fsync=True)`, DuckDB file, `run.run()`', FSYNC_TARGET),
    Variant("lab_trace_off", "lab, step, DuckDB file, `run.run()`, tracing off (`lab.observe(enabled=False)`)", STEP_TARGET),
    Variant(
        "lab_trace_on",
        "lab, step, DuckDB file, `run.run()`, traced (`lab.observe(provider)`: SDK provider, batch processor, spans dropped)",
    ),
)
"""Every variant, in report order. The floor is first; ratios are to its median."""

POSTGRES_TARGET = 3.0
"""A station on PostgreSQL: at most 3x the same station on a DuckDB file (`lab_step`), issue 27 item 6."""

POSTGRES_VARIANT = Variant(
    "lab_postgres",
    'lab, step, `Lab("postgresql://...", fsync=False)` (a server on this machine), `run.run()`; target × `lab_step`',
    POSTGRES_TARGET,
    against="lab_step",
)
"""Measured only when `--postgres URL` (or `run_benchmark(postgres=...)`) names a database; `lab_step`
is then measured too. `fsync=False` (the lab's sessions commit with `synchronous_commit=off`) keeps
what the DuckDB row keeps: a settled boundary survives a kill of the writer, not of the machine."""


@dataclass
class VariantResult:
    """The timed runs of one variant."""

    key: str
    label: str
    visits: int
    target: float | None = None
    against: str | None = None
    seconds: list[float] = field(default_factory=list)
    """Wall time of each timed whole run."""
    outputs: list[Any] = field(default_factory=list)
    """Each timed run's End value (must equal `visits`)."""
    folded: list[bool] = field(default_factory=list)
    """Lab variants: whether the store folded its journal into DuckDB during each timed run.

    The fold is amortised (every `fold_every` journal lines), so it lands in some runs only:
    the median may leave it out, the mean carries its share."""
    cpu: list[float] = field(default_factory=list)
    """CPU seconds of this process during each timed run (every thread: the lab drives on its loop thread)."""
    server_cpu: list[float] = field(default_factory=list)
    """`lab_postgres` on a server on this machine: CPU seconds of the lab's server processes per timed run."""
    error: str | None = None
    """Set when the variant raised; its times stop there."""

    @property
    def per_station(self) -> list[float]:
        """Seconds per station of each timed run."""
        return [s / self.visits for s in self.seconds]

    @property
    def median(self) -> float | None:
        return statistics.median(self.per_station) if self.seconds else None

    @property
    def minimum(self) -> float | None:
        return min(self.per_station) if self.seconds else None

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.per_station) if self.seconds else None


@dataclass
class BenchReport:
    """One benchmark invocation: every variant measured in the same process."""

    visits: int
    repeat: int
    warmup: int
    variants: dict[str, VariantResult]
    machine: dict[str, str]
    day: str = field(default_factory=lambda: date.today().isoformat())
    sync_us: float | None = None
    """Median of one 1 KB write in place + `fdatasync` in the benchmark's directory, taken between the
    timed rounds: what one boundary of the fsync variant cannot avoid paying for the disk."""

    @property
    def floor(self) -> VariantResult:
        return self.variants["floor"]

    def ratio(self, key: str, to: str = "floor") -> float | None:
        """The variant's median over the floor's median (or over row `to`'s)."""
        mine, base = self.variants[key].median, self.variants[to].median if to in self.variants else None
        if mine is None or not base:
            return None
        return mine / base

    def target_ratio(self, key: str) -> float | None:
        """The ratio the variant's target is about: to the floor, or to its `against` row."""
        return self.ratio(key, self.variants[key].against or "floor")

    def met(self, key: str) -> bool | None:
        """Whether the variant's ratio is within its target (None when it has none)."""
        v, r = self.variants[key], self.target_ratio(key)
        if v.target is None or r is None:
            return None
        return r <= v.target


# -- machine --------------------------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, str]:
    """What the numbers were measured on."""
    import duckdb

    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": str(os.cpu_count()),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "pydantic-graph": _version("pydantic-graph"),
        "pydantic": _version("pydantic"),
        "duckdb": duckdb.__version__,
        "lab": _lab_revision(),
    }


def _lab_revision() -> str:
    """The commit the lab code was measured at, and whether `lab/` had uncommitted changes.

    Changes to the benchmarks themselves (`lab/bench/`) do not count: they measure, not run.
    """
    import subprocess

    lab_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=lab_dir,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", ".", ":(exclude)bench"],
            cwd=lab_dir,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return f"{head}{' + uncommitted changes in lab/' if dirty else ''}"


# -- the runners ----------------------------------------------------------------------------


async def run_native_floor(native: Graph[Any, Any, Any, Any], visits: int) -> tuple[float, Any]:
    """Drive the lab's native graph as the serial engine does, with no hooks; (seconds, output)."""
    state = BenchState(limit=visits)
    t0 = time.perf_counter()
    async with native.iter(state=state, inputs=None, infer_name=False) as graph_run:
        first = graph_run.next_task
        assert not isinstance(first, EndMarker) and first, "the native run has no initial boundary"
        fork_stack = first[0].fork_stack
        result = await graph_run.next([GraphTaskRequest(Loop.get_node_id(), Loop(), fork_stack)])
        while not isinstance(result, EndMarker):
            result = await graph_run.next()
    return time.perf_counter() - t0, result.value


def idiomatic_graph() -> Graph[BenchState, None, Loop, int]:
    """pydantic-graph's own way: a `GraphBuilder` with the node and a start edge, default options."""
    g: GraphBuilder[BenchState, None, Loop, int] = GraphBuilder(
        name="bench_idiomatic", state_type=BenchState, input_type=Loop, output_type=int
    )
    g.add(g.node(Loop), g.edge_from(g.start_node).to(Loop))
    return g.build()


async def run_idiomatic(graph: Graph[BenchState, None, Loop, int], visits: int) -> tuple[float, Any]:
    state = BenchState(limit=visits)
    t0 = time.perf_counter()
    out = await graph.run(state=state, inputs=Loop())
    return time.perf_counter() - t0, out


def _journal_lines(g: Any) -> int | None:
    """Lines journalled since the store's last fold (None if the store does not say)."""
    journal = getattr(g.lab.store, "_journal", None)
    lines = getattr(journal, "pending_lines", None)
    return lines if isinstance(lines, int) else None


def _finish(run: Any, before: int | None) -> tuple[Any, bool]:
    if run.status != "done":
        raise RuntimeError(f"run {run.id} ended {run.status}: {run.error}")
    after = _journal_lines(run.graph)
    return run.output, before is not None and after is not None and after < before


def run_lab_sync(g: Any, visits: int) -> tuple[float, Any, bool]:
    """`run.run()` on the lab's private loop: (seconds, output, folded).

    The run's creation (`g.start`, one journal write) is not timed.
    """
    run = g.start(Loop(), state=BenchState(limit=visits), step_limit=visits + 1)
    before = _journal_lines(g)
    t0 = time.perf_counter()
    run.run()
    dt = time.perf_counter() - t0
    return (dt, *_finish(run, before))


async def run_lab_async(g: Any, visits: int) -> tuple[float, Any, bool]:
    """`await run.arun()` awaited on the caller's loop: (seconds, output, folded).

    The caller's loop is not the lab's, so `arun` hands the drive to the lab's loop thread
    (`lab.engine.loop.delegate`) and awaits it: the time includes that hand-over.
    """
    run = g.start(Loop(), state=BenchState(limit=visits), step_limit=visits + 1)
    before = _journal_lines(g)
    t0 = time.perf_counter()
    await run.arun()
    dt = time.perf_counter() - t0
    return (dt, *_finish(run, before))


# -- the benchmark --------------------------------------------------------------------------


def run_benchmark(
    visits: int = DEFAULT_VISITS,
    repeat: int = DEFAULT_REPEAT,
    warmup: int = 1,
    *,
    only: Sequence[str] | None = None,
    workdir: str | None = None,
    postgres: str | None = None,
) -> BenchReport:
    """Time every variant `repeat` times, round-robin, after `warmup` untimed runs of each.

    `only` restricts the variants (the floor is always measured). `workdir` holds the DuckDB
    files (a temporary directory by default, removed afterwards).
    """
    if visits < 1 or repeat < 1 or warmup < 0:
        raise ValueError("visits and repeat must be at least 1, warmup at least 0")
    chosen = [v for v in VARIANTS if v.key == "floor" or only is None or v.key in only]
    if postgres:  # its target is a ratio to the DuckDB step row, measured in the same rounds
        if not any(v.key == POSTGRES_VARIANT.against for v in chosen):
            chosen += [v for v in VARIANTS if v.key == POSTGRES_VARIANT.against]
        chosen.append(POSTGRES_VARIANT)
    results = {v.key: VariantResult(v.key, v.label, visits, v.target, v.against) for v in chosen}
    tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix="graphlab-bench-")
    root = workdir if workdir is not None else tmp.name  # type: ignore[union-attr]
    labs: list[Any] = []
    try:
        with asyncio.Runner() as runner:
            measures = _setup(list(results), visits, root, runner, labs, postgres)
            for _ in range(warmup):
                for key in results:
                    _measure(results[key], measures[key], record=False)
            syncs: list[float] = []
            for _ in range(repeat):
                for key in results:
                    _measure(results[key], measures[key], record=True)
                if "lab_step_fsync" in results:
                    syncs += disk_sync_seconds(root, 10)
    finally:
        for lab in reversed(labs):
            try:
                lab.close()
            except Exception:  # a benchmark reports; it does not fail on teardown
                traceback.print_exc()
        if tmp is not None:
            tmp.cleanup()
    sync_us = statistics.median(syncs) * 1e6 if syncs else None
    return BenchReport(
        visits=visits, repeat=repeat, warmup=warmup, variants=results, machine=machine_info(), sync_us=sync_us
    )


def disk_sync_seconds(directory: str, n: int) -> list[float]:
    """`n` timings of one 1 KB write in place + `fdatasync` to a file in `directory` (the disk's own cost).

    In place, as the `fsync=True` journal writes (lab/store/journal.py): into zeros already written
    and synced, so the sync carries no metadata. `python -m lab.bench.disk` compares the ways.
    """
    path = os.path.join(directory, "sync-probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    out = []
    try:
        os.write(fd, bytes(1024 * n))
        os.fsync(fd)
        for i in range(n):
            t = time.perf_counter()
            os.pwrite(fd, b"x" * 1023 + b"\n", 1024 * i)
            os.fdatasync(fd)
            out.append(time.perf_counter() - t)
    finally:
        os.close(fd)
        os.remove(path)
    return out


Measure = Callable[[], tuple[Any, ...]]
"""One timed run of a variant: (seconds, output) or, for the lab, (seconds, output, folded)."""


def _setup(
    keys: list[str], visits: int, root: str, runner: asyncio.Runner, labs: list[Any], postgres: str | None = None
) -> dict[str, Measure]:
    """Build each variant's graph (and lab) once; return its one-run measure by key."""
    def lab_graph(path: str, durability: str, fsync: bool = False, trace: Any = None) -> Any:
        lab = Lab(path, durability=durability, fsync=fsync)  # type: ignore[arg-type]
        labs.append(lab)
        if trace is not None:
            lab.observe(trace or None, enabled=trace is not False)
        return declare(lab)

    # The memory lab also supplies the native graph for the floor: `built.native` is the very
    # graph the lab's engine drives (built with auto_instrument=False).
    mem_graph = lab_graph(MEMORY, "step")
    native = mem_graph.build().native

    def floor() -> Measure:
        return lambda: runner.run(run_native_floor(native, visits))

    def idiomatic() -> Measure:
        graph = idiomatic_graph()
        return lambda: runner.run(run_idiomatic(graph, visits))

    def lab_sync(name: str | None, durability: str, fsync: bool = False, trace: Any = None) -> Callable[[], Measure]:
        def make() -> Measure:
            if name is None:
                g = mem_graph
            else:
                tracing = trace() if callable(trace) else trace
                g = lab_graph(os.path.join(root, f"{name}.duckdb"), durability, fsync, tracing)
            return lambda: run_lab_sync(g, visits)

        return make

    def lab_async() -> Measure:
        g = lab_graph(os.path.join(root, "step_async.duckdb"), "step")
        return lambda: runner.run(run_lab_async(g, visits))

    makers: dict[str, Callable[[], Measure]] = {
        "floor": floor,
        "idiomatic": idiomatic,
        "lab_step": lab_sync("step", "step"),
        "lab_batch": lab_sync("batch", "batch"),
        "lab_memory": lab_sync(None, "step"),
        "lab_step_async": lab_async,
        "lab_step_fsync": lab_sync("step_fsync", "step", fsync=True),
        "lab_trace_off": lab_sync("trace_off", "step", trace=False),
        "lab_trace_on": lab_sync("trace_on", "step", trace=dropping_tracer_provider),
    }
    if postgres:

        def lab_postgres() -> Measure:
            lab = Lab(postgres, fsync=False)
            labs.append(lab)
            g = declare(lab)
            server = server_cpu_reader(postgres)

            def measure() -> tuple[Any, ...]:
                before = server()
                out = run_lab_sync(g, visits)
                after = server()
                return (*out, None if before is None or after is None else after - before)

            return measure

        makers["lab_postgres"] = lab_postgres
    return {key: makers[key]() for key in keys}


def server_cpu_reader(url: str) -> Callable[[], float | None]:
    """A reader of the CPU seconds the lab's server processes (`application_name` graph-lab, this
    database) have used, from /proc: a server on this machine that this user may look into; else None."""

    def read() -> float | None:
        import psycopg

        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=10) as con:
                pids = [r[0] for r in con.execute(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = 'graph-lab' AND datname = current_database()"
                )]  # fmt: skip
            return sum(_schedstat_ns(pid) for pid in pids) / 1e9
        except (psycopg.Error, OSError, ValueError, IndexError):
            return None

    return read


def _schedstat_ns(pid: int) -> int:
    """Nanoseconds process `pid` has run on a CPU (Linux's /proc/PID/schedstat)."""
    with open(f"/proc/{pid}/schedstat", encoding="ascii") as f:
        return int(f.read().split()[0])


def dropping_tracer_provider() -> Any:
    """An OpenTelemetry SDK provider as a user configures one (a batch processor), whose exporter drops spans."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropping(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping()))
    return provider


def _measure(result: VariantResult, fn: Measure, *, record: bool) -> None:
    if result.error is not None:
        return
    gc.collect()
    cpu = time.process_time()
    try:
        seconds, output, *rest = fn()
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        return
    cpu = time.process_time() - cpu
    if record:
        result.seconds.append(seconds)
        result.outputs.append(output)
        result.cpu.append(cpu)
        if rest:
            result.folded.append(bool(rest[0]))
        if len(rest) > 1 and rest[1] is not None:
            result.server_cpu.append(rest[1])


# -- reporting ------------------------------------------------------------------------------


def _us(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1e6:.1f}"


def to_markdown(report: BenchReport) -> str:
    """The report as Markdown: a header line, the machine, and the table."""
    m = report.machine
    lines = [
        f"Graph Lab benchmark, {report.day}: {report.visits} visits per run, {report.repeat} timed runs "
        f"per variant (round-robin, after {report.warmup} warm-up run each); times are µs per station.",
        "",
        f"Machine: {m['platform']}; {m['cpu']}; {m['cpus']} CPUs; {m['python']}; "
        f"pydantic-graph {m['pydantic-graph']}; pydantic {m['pydantic']}; duckdb {m['duckdb']}; "
        f"lab at {m['lab']}",
        "",
        "| variant | median µs/station | min | mean | × floor (median) | target | met | runs with a fold |",
        "|---|---:|---:|---:|---:|---:|:---:|---:|",
    ]
    for key, v in report.variants.items():
        ratio = report.ratio(key)
        met = report.met(key)
        ratio_s = "—" if ratio is None else f"{ratio:.2f}x"
        target_s = "—" if v.target is None else f"≤ {v.target:g}x"
        if v.against is not None and v.target is not None:
            mine = report.target_ratio(key)
            target_s = f"≤ {v.target:g}x `{v.against}` ({'—' if mine is None else f'{mine:.2f}x'})"
        met_s = "" if met is None else ("yes" if met else "**no**")
        label = v.label if v.error is None else f"{v.label} — failed: {v.error}"
        folds = f"{sum(v.folded)}/{len(v.folded)}" if v.folded else "—"
        lines.append(
            f"| {label} | {_us(v.median)} | {_us(v.minimum)} | {_us(v.mean)} | {ratio_s} | {target_s} | {met_s} | {folds} |"
        )
    for key, v in report.variants.items():
        if v.against is not None and v.target is not None and report.met(key) is not None:
            lines += [
                "",
                f"`{key}`: {report.target_ratio(key):.2f}x a `{v.against}` station (median over median, same rounds); "
                f"target ≤ {v.target:g}x: {'yes' if report.met(key) else 'no'}.",
            ]
            base = report.variants[v.against]
            if v.cpu and base.cpu:
                mine, theirs = statistics.median(v.cpu) / v.visits, statistics.median(base.cpu) / base.visits
                server = statistics.median(v.server_cpu) / v.visits if v.server_cpu else None
                total = mine + (server or 0.0)
                lines.append(
                    f"CPU per station (medians): `{v.against}` {theirs * 1e6:.1f} µs; `{key}` {mine * 1e6:.1f} µs in this "
                    f"process" + (f" + {server * 1e6:.1f} µs in its server processes = {total * 1e6:.1f} µs" if server is not None
                                  else " (its server's CPU not readable from here)")
                    + f": {total / theirs:.2f}x."
                )
    if report.sync_us is not None:
        floor = report.floor.median
        share = f" ({report.sync_us / (floor * 1e6):.2f}x the floor's median)" if floor else ""
        lines += [
            "",
            f"Disk: one 1 KB write in place + fdatasync in the same directory, between rounds: median "
            f"{report.sync_us:.1f} µs{share}; the fsync row pays one per station.",
        ]
    bad = [k for k, v in report.variants.items() if v.seconds and any(o != report.visits for o in v.outputs)]
    if bad:
        lines += ["", f"WARNING: outputs differ from {report.visits} in {', '.join(bad)}"]
    return "\n".join(lines)
