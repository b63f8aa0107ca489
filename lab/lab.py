"""The `Lab`: one store, the graphs declared against it, and the runs started from them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType, NoneType
from typing import TYPE_CHECKING, Any, Literal, get_args

import duckdb

from .current import current_run, note_run
from .diff import StateDiff, diff_json
from .display_hooks import show
from .errors import (
    ArgumentError,
    CheckpointError,
    GraphDefinitionError,
    RunOwnedError,
    RunStateError,
    StateEditError,
)
from .events import ColdStream
from .graph import LabGraph
from .history import StoredRun
from .idempotent import settle_effect
from .limits import DEFAULT_STEP_LIMIT, check_step_limit
from .manifest import Manifest
from .peek import PeekedRun
from .records import Durability, EffectRecord, EventRecord, RunRecord, Status, WaitRecord
from .reducers import check_model_options
from .reopen import fork_stored, open_stored, recover_interrupted, unfinished_jobs
from .replay import recorded
from .retry import Retry, check_policies, check_timeouts
from .run import Run
from .run_list import RunList
from .v1_import import continue_v1
from .waits import Budgets

if TYPE_CHECKING:
    from .adopt import AdoptedGraph
    from .agents.board import AgentBoard
    from .batch import Batch
    from .evaluate import Comparison, Evaluation
    from .subroutine.compile import SubroutineGraph
    from .workflow.compile import WorkflowGraph
from .store import MEMORY, Store, is_postgres_url, open_location, redact

__all__ = ("Lab", "DEFAULT_PATH", "current_lab", "current_run")

DEFAULT_PATH = os.path.join(".graphlab", "lab.duckdb")
"""The embedded default store, under the working directory (beside the notebook)."""

_current: Lab | None = None

_graphs_of: dict[Store, dict[str, LabGraph]] = {}
"""The graphs declared on each open file store: every `Lab` of one path in a process shares them
(a `:memory:` store is private to its Lab). Dropped when the store closes."""


_settings_of: dict[Store, dict[str, Any]] = {}
"""Settings every `Lab` of one file store shares (as its graphs): `raise_on_failure`."""

_STATUSES: tuple[str, ...] = get_args(Status)


def _run_id(run_id: Any, call: str) -> str:
    """`run_id` if it can name a run, else an error saying what it should be."""
    if isinstance(run_id, str) and run_id:
        return run_id
    hint = f"; pass run.id, {run_id.id!r}" if isinstance(run_id, Run) else " (lab.runs() lists them)"
    raise ArgumentError(f"{call}({run_id!r}): run_id is a run's id, a str like 'run-01a2b3c4d5e6-0f1a2b'{hint}")


def current_lab() -> Lab | None:
    """The last `Lab` created in this process (the kernel extension acts on it)."""
    return _current


_note_run = note_run  # the name older callers import


def _adopt_policies(
    g: AdoptedGraph,
    step_limit: int | None,
    retry: Mapping[str, Retry] | None,
    timeouts: Mapping[str, float] | None,
    blocking: Iterable[str],
) -> None:
    """The run-control settings `lab.adopt` was given, checked against the graph's stations."""
    stations = g.manifest.station_ids
    where = f"lab.adopt(name={g.name!r})"
    policies, seconds = check_policies(retry, stations, where), check_timeouts(timeouts, stations, where)
    names = [blocking] if isinstance(blocking, str) else list(blocking)
    unknown = [n for n in names if n not in stations]
    if unknown:
        raise GraphDefinitionError(f"{where}: blocking names {unknown}, which the graph does not have; its stations are {sorted(stations)}")
    g.step_limit, g.retry_policies, g.node_timeouts = step_limit, policies, seconds
    for name in names:
        g.set_policy(name, retry=policies.get(name), timeout=seconds.get(name), blocking=True, where=where)


class Lab:
    """Declare graphs, start and resume runs, and query everything with SQL.

    `Lab()` opens `.graphlab/lab.duckdb` under the working directory; `Lab(":memory:")` keeps
    everything in memory (tests); `Lab("postgresql://user@host/db")` opens a PostgreSQL store a
    team shares (docs/scale.md). Opening a path already open in this process shares its store,
    its graphs and its live runs, so a notebook that says `lab = Lab()` twice loses nothing
    (asking for another `fsync` than it was opened with is an error); `lab.close()` releases
    the file for every Lab sharing it.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "step",
        batch_size: int = 100,
        fsync: bool | None = None,
        budgets: Budgets | None = None,
        raise_on_failure: bool | None = None,
        sql_url: str | None = None,
    ):
        global _current
        if durability not in ("step", "batch"):
            raise ArgumentError(f"Lab(durability={durability!r}): durability is 'step' or 'batch'")
        if is_postgres_url(path):
            self.path: str = str(path)  # the shared PostgreSQL store (docs/scale.md)
        else:
            self.path = MEMORY if path == MEMORY else os.path.abspath(os.fspath(path or DEFAULT_PATH))
        self.durability: Durability = durability
        self.batch_size = batch_size
        if budgets is not None and not isinstance(budgets, Budgets):
            raise ArgumentError(f"Lab(budgets={budgets!r}): pass lab.Budgets(resumes=..., consecutive=...)")
        self.budgets: Budgets = budgets or Budgets()
        """Capability budgets of new runs, unless their graph sets its own (seed 001 default limits)."""
        if raise_on_failure is not None and not isinstance(raise_on_failure, bool):
            raise ArgumentError(f"Lab(raise_on_failure={raise_on_failure!r}): pass True or False")
        if sql_url is not None and not is_postgres_url(self.path):
            raise ArgumentError(
                f"Lab(sql_url=...): only a PostgreSQL store takes a read role for lab.sql; {self.path} is a DuckDB "
                "store, whose lab.sql already refuses every write: leave sql_url out"
            )
        self.store: Store = open_location(self.path, fsync=fsync)
        if sql_url is not None:  # lab.sql connects as this role: a least-privilege reader (docs/scale.md)
            self.store.use_sql_url(sql_url)  # type: ignore[attr-defined]
        self._graphs: dict[str, LabGraph] = {} if self.path == MEMORY else _graphs_of.setdefault(self.store, {})
        self._settings: dict[str, Any] = (
            {} if self.path == MEMORY else _settings_of.setdefault(self.store, {})
        )
        if raise_on_failure is not None or "raise_on_failure" not in self._settings:
            self._settings["raise_on_failure"] = bool(raise_on_failure)
        self._live: dict[str, Run] = self.store.live_runs
        self._providers: dict[str, Callable[[WaitRecord], Any]] = {}
        if not self.store.recovery_done:
            recover_interrupted(self.store)
            if unfinished_jobs(self.store):  # lab.agents is imported only then (~6 ms a process)
                from .agents.board import recover_jobs

                recover_jobs(self)  # adopt what agent workers finished while no lab watched (docs/agents.md)
            self.store.recovery_done = True
        _current = self

    # -- graphs --------------------------------------------------------------------------

    def graph(
        self,
        name: str,
        *,
        state_type: Any = NoneType,
        deps_type: Any = NoneType,
        output_type: Any = object,
        input_type: Any = NoneType,
        budgets: Budgets | None = None,
        step_limit: int | None = DEFAULT_STEP_LIMIT,
        model: Literal["superstep"] | None = None,
        reducers: Mapping[str, Any] | None = None,
        isolate_state: Literal["fanout", "always", "never"] = "fanout",
        max_node_concurrency: int | None = None,
    ) -> LabGraph:
        """The graph `name` (created on first call; a re-run cell gets the same graph back).

        `input_type` is what `g.start(inputs=...)` takes when the graph is declared with steps and edges.
        `step_limit` bounds each `run.run()` of its runs (seed 002 default 100; None: no limit).
        `model="superstep"` runs its `@g.step` nodes as seed 002 does: each returns an update, folded by
        `reducers` (lab.reducers), on snapshots copied per `isolate_state`, at most `max_node_concurrency`
        at once (docs/run-control.md "The super-step model").
        """
        check_step_limit(step_limit, f"lab.graph({name!r})")
        spec = check_model_options(name, state_type, model, reducers, isolate_state, max_node_concurrency)
        g = self._graphs.get(name)
        if g is None:
            g = self._graphs[name] = LabGraph(
                self, name, state_type=state_type, deps_type=deps_type, output_type=output_type, input_type=input_type
            )
        else:
            g.state_type, g.deps_type, g.output_type = state_type, deps_type, output_type
            g.input_type = input_type
            g.changed()
        if budgets is not None and not isinstance(budgets, Budgets):
            raise ArgumentError(f"lab.graph({name!r}, budgets={budgets!r}): pass lab.Budgets(resumes=..., consecutive=...)")
        g.budgets = budgets
        g.step_limit = step_limit
        if (g.model, g.reducers, g.isolate_state, g.max_node_concurrency) != spec:
            g.model, g.reducers, g.isolate_state, g.max_node_concurrency = spec
            g.changed()
        return g

    @property
    def raise_on_failure(self) -> bool:
        """Whether `run.step()` / `run.run()` / `run.retry()` raise a failure they record (seed 003):
        `NodeExecutionError` for a station, `StepLimitError` / `RunTimeout` for a bound. Off by
        default: a notebook shows the failed run. A call's own `raise_on_failure=` wins over this;
        every `Lab` of one file shares the setting."""
        return bool(self._settings["raise_on_failure"])

    @raise_on_failure.setter
    def raise_on_failure(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise ArgumentError(f"lab.raise_on_failure = {value!r}: set True or False")
        self._settings["raise_on_failure"] = value

    @property
    def graphs(self) -> dict[str, LabGraph]:
        """The graphs declared here, by name (a copy: `lab.graph`, `lab.adopt`, ... declare them)."""
        return dict(self._graphs)

    def add_graph(self, g: Any) -> None:
        """Keep the graph handle `g` under `g.name`, replacing what had that name: how a kind made
        outside `lab.graph` (a subroutine, a workflow) makes its graph one `lab.resume` finds."""
        self._graphs[g.name] = g

    # -- runs ----------------------------------------------------------------------------

    def runs(self, *, graph: str | None = None, status: str | None = None) -> RunList:
        """The runs in the store, oldest first, as a list that displays as a table; filter by graph
        name or status. A run a gone process left `running` shows as `interrupted` (lab/run_list.py)."""
        if graph is not None and not isinstance(graph, str):
            raise ArgumentError(f"lab.runs(graph={graph!r}): graph is a graph's name, a str (lab.graphs lists them)")
        if status is not None and status not in _STATUSES:
            raise ArgumentError(
                f"lab.runs(status={status!r}): status is one of {', '.join(map(repr, _STATUSES))}, or None for every run"
            )
        stored = self.store.list_runs(graph_key=graph, status=None if status == "interrupted" else status)
        gone = self.store.abandoned_among([r.run_id for r in stored if r.status == "running"])
        return RunList.read(stored, abandoned=gone.__contains__, status=status)

    def read(self, run_id: str) -> StoredRun:
        """A stored run to read without its graph's code: record, history, state (JSON), events, waits.

        For a run another notebook declared; `lab.resume(run_id)` once its graph is defined here."""
        return StoredRun(self.store, _run_id(run_id, "lab.read"))

    def compare(self, a: Any, b: Any) -> Any:
        """Two runs or branches side by side: each a run, `lab.read(id)`, or a `(run, checkpoint_seq)`
        pair. The `lab.share.Comparison` displays as a widget (docs/share.md)."""
        return show("compare.make", a, b)

    def export_html(self, runs: Any, path: Any, *, title: str | None = None) -> Any:
        """Write a run, a `(run, seq)` branch, or `[a, b]` (compared) as one self-contained HTML file."""
        return show("share.export_html", runs, path, title=title)

    def peek(self, run_id: str) -> PeekedRun:
        """Get-state: `lab.read` plus next stations, state decoded when the graph is defined here;
        writes nothing, claims nothing (lab/peek.py)."""
        return PeekedRun(self.store, _run_id(run_id, "lab.peek"), self._graphs.get)

    def run(self, run_id: str) -> RunRecord:
        """The stored record of one run."""
        return self.store.get_run(_run_id(run_id, "lab.run"))

    def resume(self, run_id: str, *, deps: Any = None) -> Run:
        """A handle on a stored run, continuing from its head checkpoint.

        Re-run the cells that define the run's graph first: a run is pinned to the revision it
        started on, and resuming onto a changed graph is refused (fork onto the new revision).
        An interrupted station (the process died while it ran, or Ctrl-C stopped it) is run again
        only because you asked here; in the process that was interrupted this continues the same
        handle (as `run.retry()` does).
        """
        live = self._live.get(_run_id(run_id, "lab.resume"))
        if live is not None:
            if deps is not None:
                live.deps = deps
            live.continue_interrupted()
            note_run(live)
            return live
        # Whether another live process advances the run, and taking it over if not, is one step for
        # every process on the store (docs/store.md "Who holds what, when").
        with self.store.held():
            run = open_stored(self, run_id, deps)
        note_run(run)
        return run

    def fork(
        self, run_id: str, seq: int | None = None, *, state: Any = None, revision: int | str | None = None, deps: Any = None
    ) -> Run:
        """`run.fork(seq, state=..., revision=...)` for a stored run you cannot (or need not) resume.

        The way forward when `resume` refuses: the graph changed since the run started
        (`lab.fork(run_id, seq, revision="current")`), or its head checkpoint is damaged (fork an
        earlier `seq`). Nothing is decoded but checkpoint `seq`; the parent gains a `fork` event.
        """
        live = self._live.get(_run_id(run_id, "lab.fork"))
        if live is not None:
            return live.fork(seq, state=state, revision=revision)
        with self.store.held():
            return fork_stored(self, run_id, seq, state, revision, deps)

    def workflow(self, source: Any, *, workers: dict[str, Callable[..., Any]] | None = None) -> WorkflowGraph:
        """A declarative workflow (seed 004) from a YAML/JSON file path or a dict, compiled onto the engine.

        `workers` maps activity ids to the functions that do their work. The workflow has the
        run API of any graph (`wf.start(user_request=...)`), plus `wf.choose`, `wf.export` and
        `wf.resume` for checkpoints and session folders. See docs/workflows.md.
        """
        from .workflow.compile import workflow_graph

        return workflow_graph(self, source, workers)

    def subroutine(
        self, source: Any, *, input: Any = Any, output: Any = Any, params: Any = None
    ) -> SubroutineGraph:
        """A subroutine (seed 000): declared cell by cell on the handle, or a `Definition` from a module.

        `lab.subroutine("triage", input=Ticket, output=Reply, params=Params)` starts an empty one;
        then `sub.feature(...)`, `@sub.node(state=...)`, `@sub.feature_node`, `sub.edge(...)`.
        `sub.start(ticket, params=...)` runs it on the same engine and store. See docs/subroutines.md.
        """
        from .subroutine.compile import subroutine_graph

        if isinstance(source, str):
            return subroutine_graph(self, source, input=input, output=output, params=params)
        return subroutine_graph(self, source)

    def adopt(
        self,
        graph: Any,
        *,
        name: str | None = None,
        step_limit: int | None = DEFAULT_STEP_LIMIT,
        retry: Mapping[str, Retry] | None = None,
        node_timeouts: Mapping[str, float] | None = None,
        blocking: Iterable[str] = (),
    ) -> AdoptedGraph:
        """The lab's handle on a graph built with pydantic-graph's own `GraphBuilder`, unchanged.

        `lg = lab.adopt(fives_graph, name="fives"); run = lg.start(inputs=4)` gives the same run
        API as a lab-declared graph. Adopting the same name again with a changed graph makes a new
        revision. See `lab.adopt` module docs for the checkpoint contract of steps.
        `retry={"station": Retry(...)}` and `node_timeouts={"station": seconds}` set policies per
        station by name (the graph's own code stays unchanged); `step_limit` bounds each run() call;
        `blocking=["station"]` runs those stations on threads of their own (see lab.engine.blocking).
        """
        from .adopt import AdoptedGraph, caller_namespace

        key = name if name is not None else getattr(graph, "name", None)
        if not key:
            raise GraphDefinitionError("lab.adopt needs a name= for a graph built without one")
        check_step_limit(step_limit, f"lab.adopt(name={key!r})")
        namespace = caller_namespace()
        existing = self._graphs.get(key)
        if isinstance(existing, AdoptedGraph):
            existing.replace(graph, namespace)
            existing.build()
            _adopt_policies(existing, step_limit, retry, node_timeouts, blocking)
            return existing
        if existing is not None:
            raise GraphDefinitionError(
                f"the name {key!r} is already a graph declared with lab.graph(); adopt under another name"
            )
        adopted = AdoptedGraph(self, key, graph, namespace)
        adopted.build()  # refuse what the lab cannot checkpoint now, not at the first step
        _adopt_policies(adopted, step_limit, retry, node_timeouts, blocking)
        self._graphs[key] = adopted  # type: ignore[assignment]
        return adopted

    @property
    def agents(self) -> AgentBoard:
        """Agent runtimes and the jobs of delegated stations: `lab.agents.register("name", agent)` (docs/agents.md)."""
        from .agents.board import board_for

        return board_for(self)

    def map(
        self,
        graph: Any,
        inputs: Iterable[Any],
        *,
        entry: Any = None,
        name: str | None = None,
        workers: int | None = None,
        address: str | None = None,
        deps: Any = None,
        progress: bool = True,
    ) -> Batch:
        """One run of `graph` per input, driven on Ray; returns the batch (it displays as a table).

        `graph` is any kind: declared with nodes or steps, adopted, a subroutine, a workflow, with
        delegated agent stations (the runtimes they name go to the workers too). `entry=Start()`
        starts every run there with the input as its state; or pass `(node, state)` pairs,
        `lab.batch.StartWith(node=..., inputs=..., state=...)`, or the start node's inputs (as
        `graph.start(inputs=item)`). Runs are created in the store first and tagged with the batch
        id, so a failing input fails its run alone, runs parked at a gate wait (counted by the
        batch), and `lab.batch(id).run()` continues the unfinished ones after a kernel restart.
        `ray.init()` starts a local Ray unless one runs (`address=` joins a cluster). See docs/scale.md.
        """
        from .batch.batch import start_batch

        batch = start_batch(self, graph, inputs, entry=entry, name=name, ship=workers != 0)
        return batch.run(workers=workers, address=address, deps=deps, progress=progress)

    def batch(self, batch_id: str) -> Batch:
        """A batch started by `lab.map`, as the store holds it (re-run the graph's cells first)."""
        from .batch.batch import open_batch

        if not isinstance(batch_id, str) or not batch_id:
            raise ArgumentError(f"lab.batch({batch_id!r}): a batch id is a str like 'batch-18c3f0a1b2c-1a2b3c'")
        return open_batch(self, batch_id)

    def evaluate(
        self,
        graph: Any,
        dataset: Any,
        *,
        evaluators: Iterable[Any] = (),
        report_evaluators: Iterable[Any] = (),
        entry: Any = None,
        name: str | None = None,
        repeat: int = 1,
        max_concurrency: int | None = None,
        workers: int = 0,
        address: str | None = None,
        deps: Any = None,
        progress: bool = True,
    ) -> Evaluation:
        """One run of `graph` per case of a `pydantic_evals.Dataset`, scored by its evaluators and
        `evaluators`; returns the evaluation (a table and a plot). `workers=0` runs the cases here,
        `workers=n` on Ray (as `lab.map`). Scores, assertions, durations and tokens go to the store,
        linked to each case's run; the same call again (also after a kernel restart) continues the
        unfinished cases. Cases parked at a gate are `waiting`. `report_evaluators`, `repeat` and
        `max_concurrency` mean what they mean to `Dataset.evaluate`. See docs/evaluate.md.
        """
        from .evaluate import evaluate

        return evaluate(self, graph, dataset, evaluators=list(evaluators),
                        report_evaluators=list(report_evaluators), entry=entry, name=name, repeat=repeat,
                        max_concurrency=max_concurrency, workers=workers, address=address, deps=deps,
                        progress=progress)  # fmt: skip

    def evaluation(self, evaluation_id: str) -> Evaluation:
        """An evaluation in the store, by id (to show or compare; `lab.evaluate` continues one)."""
        from .evaluate import open_evaluation

        return open_evaluation(self, evaluation_id)

    def compare_evaluations(self, before: Evaluation | str, after: Evaluation | str) -> Comparison:
        """Two evaluations of one data set side by side: per-case changes, the cases that got worse, a plot."""
        from .evaluate import compare_evaluations

        return compare_evaluations(self, before, after)

    def waiting(self) -> list[WaitRecord]:
        """Every unanswered wait in the store: the runs that need a person (or a capability)."""
        return self.store.open_waits()

    @property
    def providers(self) -> Mapping[str, Callable[[WaitRecord], Any]]:
        """The capability providers `lab.provide` registered, by capability (read-only)."""
        return MappingProxyType(self._providers)

    def provide(self, capability: str, provider: Callable[[WaitRecord], Any] | None) -> None:
        """Grant `capability` automatically when a node raises `CapabilityRequired(capability)`.

        `provider(wait)` (sync or async) converges the capability and returns the value that
        `granted(capability)` gives the node. The park is still checkpointed and counted
        against the run's budget. `provider=None` removes it.
        """
        if not isinstance(capability, str) or not capability:
            raise ArgumentError(f"lab.provide: a capability name is a non-empty str, got {capability!r}")
        if provider is None:
            self._providers.pop(capability, None)
        elif not callable(provider):
            raise ArgumentError(f"lab.provide: provider for {capability!r} must be callable (a function of the wait), got {provider!r}")
        else:
            self._providers[capability] = provider

    def graph_of(self, rec: RunRecord, action: str) -> Any:
        """The graph a stored run belongs to, defined in this process; else an error saying what to
        re-run before `action` (the words that end the message: "resume", "fork", ...)."""
        g = self._graphs.get(rec.graph_key)
        if g is None:
            raise GraphDefinitionError(
                f"run {rec.run_id} belongs to graph {rec.graph_key!r}, which is not defined in this process; "
                f"re-run the cells that define it (lab.graph({rec.graph_key!r}, ...) and its @g.node "
                f"classes, or lab.adopt(graph, name={rec.graph_key!r}) for a native graph), then {action}; "
                f"to read it without them: lab.read({rec.run_id!r}) (history, state, events)"
            )
        return g

    def lineage(self, run_id: str) -> list[RunRecord]:
        """The run's family: ancestors root first, the run, then every fork descended from it."""
        return self.store.family(_run_id(run_id, "lab.lineage"))

    def diff(self, left: tuple[Any, int], right: tuple[Any, int]) -> StateDiff:
        """Difference of two checkpoints, also across runs: `lab.diff((run1, 3), (run2, 8))`."""
        sides = []
        for run, seq in (left, right):
            run_id = run.id if isinstance(run, Run) else str(run)
            rec = self.store.get_run(run_id)
            cp = self.store.checkpoint(run_id, seq)
            if cp is None:
                raise CheckpointError(f"no checkpoint {seq} in this run", run_id=run_id)
            manifest = self.store.manifest(rec.graph_key, rec.revision)
            sides.append((run_id, seq, cp.state, manifest.state_type if manifest else ""))
        (a_id, a_seq, a_state, a_type), (b_id, b_seq, b_state, b_type) = sides
        if a_type != b_type:
            raise StateEditError(
                f"cannot diff states of different types: {a_id}@{a_seq} holds {a_type or '?'}, "
                f"{b_id}@{b_seq} holds {b_type or '?'}"
            )
        return diff_json(a_state, b_state, left=f"{a_id}@{a_seq}", right=f"{b_id}@{b_seq}")

    def prune(self, run_id: str, *, keep: str | int = "head") -> int:
        """Delete checkpoints of a finished run: all but the head (`keep="head"`), or all but the
        last `keep` of the current branch. Returns how many were deleted. Events stay."""
        rec = self._terminal(run_id, "prune")
        if keep == "head":
            kept = [rec.head_seq]
        elif isinstance(keep, int) and not isinstance(keep, bool) and keep >= 1:
            kept = self.store.branch(run_id, rec.head_seq)[-keep:]
        else:
            raise ArgumentError(f"lab.prune(keep={keep!r}): keep is 'head' or a positive number of checkpoints")
        return self.store.delete_checkpoints(run_id, [k for k in kept if k is not None])

    def delete_run(self, run_id: str) -> None:
        """Delete a finished run with its checkpoints and events."""
        self._terminal(run_id, "delete")
        self.store.delete_run(run_id)
        self._live.pop(run_id, None)

    def _terminal(self, run_id: str, action: str) -> RunRecord:
        rec = self.store.get_run(_run_id(run_id, f"lab.{'delete_run' if action == 'delete' else action}"))
        writer = self.store.writer(run_id) if run_id not in self._live else None
        if writer is not None:
            raise RunOwnedError(
                f"cannot {action} run {run_id}: it belongs to {writer.describe()}, which has it open; {action} it "
                f"there, or end that process (or call lab.close() in it) first"
            )
        live = self._live.get(run_id)
        if rec.status not in ("done", "failed", "cancelled") or (live is not None and live.busy):
            raise RunStateError(
                f"cannot {action} run {run_id}: it is {rec.status}; deleting checkpoints needs a finished run "
                "(done, failed or cancelled — seed 001). Cancel it first with run.cancel()"
            )
        return rec

    def events(self, run_id: str) -> list[EventRecord]:
        return self.store.events(_run_id(run_id, "lab.events"))

    def sql(self, query: str, params: list[Any] | None = None) -> duckdb.DuckDBPyRelation:
        """Read-only SQL over the tables `graphs`, `runs`, `checkpoints`, `events` (see docs/store.md)."""
        return self.store.sql(query, params)

    def close(self) -> None:
        """Fold the journal into DuckDB and release the file (every Lab in this process sharing it closes)."""
        busy = [r.id for r in self._live.values() if r.busy]
        if busy:
            raise RunStateError(f"runs {busy} are running; cancel or wait for them before closing the lab")
        self.store.close()
        if self.store.closed:
            _graphs_of.pop(self.store, None)
            _settings_of.pop(self.store, None)

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------

    def mismatch_message(self, run_id: str, pinned: Manifest | None, current: Manifest) -> str:
        """Why run `run_id`, pinned to `pinned`, cannot go on under the graph defined now, and what to do."""
        pinned_rev = pinned.revision if pinned is not None else "?"
        changes = current.changes_from(pinned) if pinned is not None else ["the pinned manifest is missing"]
        return (
            f"run {run_id} is pinned to {current.key}@{pinned_rev}, but the graph defined now is "
            f"{current.key}@{current.revision}: " + "; ".join(changes) + ". A run never silently changes "
            "graph: fork it onto the new revision (run.fork(seq, revision='current'), or "
            f"lab.fork({run_id!r}, seq, revision='current') without a run handle), or restore the old "
            "definition to continue it."
        )

    def effects(self, run_id: str | None = None) -> list[EffectRecord]:
        """The `IdempotentOp` records (of one run), oldest first: `record.in_doubt` marks those to settle."""
        return self.store.effects(None if run_id is None else _run_id(run_id, "lab.effects"))

    recorded = staticmethod(recorded)
    """`@lab.recorded` on a function, `lab.recorded(agent)`: record a station's calls and replay them (docs/replay.md)."""

    def settle_effect(self, key: str, result: Any = None, *, rerun: bool = False) -> EffectRecord:
        """Settle an in-doubt effect: it happened with `result`, or (`rerun=True`) it did not (lab/idempotent.py)."""
        return settle_effect(self.store, key, result, rerun=rerun)

    def continue_v1(self, graph: LabGraph | str, document: Any, *, at: str | None = None, **start: Any) -> Run:
        """Continue a pydantic-graph v1 snapshot document as a run of `graph` (lab/v1_import.py)."""
        return continue_v1(self.graphs[graph] if isinstance(graph, str) else graph, document, at=at, **start)

    def resume_stream(self, run_id: str, *, deps: Any = None, **stream: Any) -> ColdStream:
        """`resume(run_id)` and `stream(...)` in one call, cold: nothing is resumed until it is iterated (seed 003 resumeStream)."""
        return ColdStream(lambda: self.resume(run_id, deps=deps), lambda run: run.stream(**stream))

    def fork_stream(self, run_id: str, seq: int | None = None, *, state: Any = None, revision: int | str | None = None, **stream: Any) -> ColdStream:
        """`fork(run_id, seq, ...)` and `stream(...)` in one call, cold: nothing is forked until it is iterated (seed 003 forkStream)."""
        return ColdStream(lambda: self.fork(run_id, seq, state=state, revision=revision), lambda run: run.stream(**stream))
    def observe(self, tracer_provider: Any = None, *, enabled: bool = True) -> None:
        """OpenTelemetry traces of this lab's runs: automatic when a provider is configured, this
        `tracer_provider`, or off (`enabled=False`); for runs opened from now on (docs/observe.md)."""
        from .observe import observe

        observe(self, tracer_provider, enabled=enabled)

    def __repr__(self) -> str:
        return f"<Lab {redact(self.path)} graphs={list(self._graphs)}>"
