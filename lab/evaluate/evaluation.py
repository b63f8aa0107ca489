"""`lab.evaluate(graph, dataset)`: one lab run per case of a pydantic-evals `Dataset`, scored and stored.

An evaluation is a batch (`lab.batch`) whose runs are tagged with the evaluation's id, plus the
store's evaluation tables (lab/store/evals.py). Its life:

1. `add_evaluation` records it (or finds it: the default id names the data set, the graph and
   its revision, so running the same cell again, also after a kernel restart, continues it);
2. each case without a run gets one (`batch.inputs.start_input`: the case's `inputs` start it as
   `lab.map` starts an input, with `entry=` for a state);
3. the unfinished runs are driven: in this process (`workers=0`) or on Ray (`workers=n`);
4. as runs stop, a chunk of cases at a time (`SCORE_CHUNK`), each case whose run ended and that is
   not recorded yet is scored (scoring.py) and recorded with its scores, the chunk in one
   transaction: `scored` (done), `failed` (failed or cancelled), or `waiting` (parked at a gate:
   not a failure; approve it, then `evaluation.run()` again); what is left is scored at the end.

A recorded `scored` or `failed` case is never run or scored again, so an evaluation continued after
a restart does only what was left.
"""

from __future__ import annotations

import copy
import functools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from ..batch.batch import Batch, batch_runs
from ..batch.inputs import start_input
from ..errors import ArgumentError
from ..store.evals import EvalCaseRecord, EvalScoreRecord, EvaluationRecord
from .analyses import run_report_evaluators
from .errors import EvaluationError, pydantic_evals
from .scoring import run_duration, run_usage, score_case
from .spans import capture, rebuilt_tree

if TYPE_CHECKING:
    from ..lab import Lab

__all__ = ("Evaluation", "CaseRow", "evaluate", "open_evaluation")

SETTLED = frozenset({"scored", "failed"})
"""Case statuses an evaluation does not run or score again."""

SCORE_CHUNK = 25
"""Cases are scored as their runs stop, an eighth of the data set at a time (at most this many, at
least one): each scoring reads the store, which on DuckDB first folds the journal (docs/store.md),
so a read per case would cost more than the case. A kill loses no run, only scores not yet written,
which the next `lab.evaluate` writes without running the cases again."""


@dataclass(frozen=True)
class CaseRow:
    """One case as the evaluation shows it: its run, status, output, scores, duration and tokens."""

    index: int
    name: str
    run_id: str | None
    status: str
    """`scored`, `failed`, `waiting` (parked at a gate) or `pending` (not driven to an end yet)."""
    output: Any
    expected: Any
    duration: float | None
    usage: dict[str, Any]
    error: str | None
    scores: dict[str, float]
    assertions: dict[str, bool]
    labels: dict[str, str]
    failures: dict[str, str]
    """Evaluators that raised, with their error."""
    reasons: dict[str, str]


def _row(rec: EvalCaseRecord) -> CaseRow:
    by: dict[str, dict[str, Any]] = {"score": {}, "assertion": {}, "label": {}, "failure": {}}
    reasons = {}
    for s in rec.scores:
        by[s.kind][s.name] = s.reason if s.kind == "failure" else s.value
        if s.reason and s.kind != "failure":
            reasons[s.name] = s.reason
    return CaseRow(
        rec.case_index, rec.case_name, rec.run_id, rec.status, rec.output, rec.expected, rec.duration,
        rec.usage or {}, rec.error, by["score"], by["assertion"], by["label"], by["failure"], reasons,
    )  # fmt: skip


def _case_names(cases: Sequence[Any]) -> list[str]:
    """Each case's name; an unnamed case is called as pydantic-evals calls it (`Case 1`, ...)."""
    return [c.name or f"Case {i + 1}" for i, c in enumerate(cases)]


def _tasks(cases: Sequence[Any], repeat: int) -> list[tuple[int, str, str | None]]:
    """One `(case position, name, source case name)` per run, as `Dataset.evaluate` builds them:
    with `repeat > 1` each case runs `repeat` times, named `hi [1/3]`, `hi [2/3]`... (the evaluation's
    case indices count these runs: case i's r-th run is index i * repeat + r - 1)."""
    names = _case_names(cases)
    if repeat == 1:
        return [(i, name, None) for i, name in enumerate(names)]
    return [(i, f"{name} [{r}/{repeat}]", name) for i, name in enumerate(names) for r in range(1, repeat + 1)]


def evaluate(
    lab: Lab,
    graph: Any,
    dataset: Any,
    *,
    evaluators: Sequence[Any] = (),
    report_evaluators: Sequence[Any] = (),
    entry: Any = None,
    name: str | None = None,
    repeat: int = 1,
    max_concurrency: int | None = None,
    workers: int = 0,
    address: str | None = None,
    deps: Any = None,
    progress: bool = True,
) -> Evaluation:
    """Run `graph` once per case of `dataset` and score each output (see the module docs)."""
    pe: Any = pydantic_evals()
    if not isinstance(dataset, pe.Dataset):
        raise ArgumentError(
            f"lab.evaluate(graph, {dataset!r}): dataset is a pydantic_evals.Dataset "
            "(Dataset(name=..., cases=[Case(inputs=..., expected_output=...)], evaluators=[...]))"
        )
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
        raise ArgumentError(
            f"lab.evaluate(workers={workers!r}): 0 runs the cases here, n >= 1 on n Ray workers"
        )
    extra = list(evaluators)
    wrong = [e for e in extra if not isinstance(e, pe.evaluators.Evaluator)]
    if wrong:
        raise ArgumentError(
            f"lab.evaluate(evaluators={wrong!r}): each is a pydantic_evals.evaluators.Evaluator instance"
        )
    extra_reports = list(report_evaluators)
    wrong = [e for e in extra_reports if not isinstance(e, pe.evaluators.ReportEvaluator)]
    if wrong:
        raise ArgumentError(
            f"lab.evaluate(report_evaluators={wrong!r}): each is a pydantic_evals.evaluators.ReportEvaluator "
            "instance (ConfusionMatrixEvaluator(), your own ReportEvaluator subclass)"
        )
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise ArgumentError(
            f"lab.evaluate(repeat={repeat!r}): repeat is how many runs each case gets, an int >= 1"
        )
    _check_concurrency(max_concurrency)
    if not dataset.cases:
        raise ArgumentError(
            f"lab.evaluate: data set {dataset.name!r} has no cases; add Case(inputs=...) to it"
        )
    build = getattr(graph, "build", None)
    if not callable(build) or getattr(graph, "lab", None) is not lab:
        raise ArgumentError(
            f"lab.evaluate({graph!r}, ...): pass a graph of this lab (lab.graph, lab.adopt, lab.subroutine, lab.workflow)"
        )
    revision = build().revision
    names = [name for _, name, _ in _tasks(dataset.cases, repeat)]
    evaluation_id = name or f"{dataset.name}/{graph.name}@{revision}"
    if not isinstance(evaluation_id, str) or not evaluation_id:
        raise ArgumentError(f"lab.evaluate(name={name!r}): an evaluation's name is a non-empty str")
    spec = {
        "cases": names,
        "evaluators": [e.get_serialization_name() for e in [*dataset.evaluators, *extra]],
        "report_evaluators": [
            e.get_serialization_name() for e in [*dataset.report_evaluators, *extra_reports]
        ],
        "repeat": repeat,
    }
    rec, created = lab.store.add_evaluation(  # type: ignore[attr-defined]
        evaluation_id,
        dataset=dataset.name,
        graph_key=graph.name,
        revision=revision,
        cases=len(names),
        spec=spec,
    )
    if not created and (rec.graph_key, rec.revision, (rec.spec or {}).get("cases")) != (
        graph.name,
        revision,
        names,
    ):
        raise EvaluationError(
            f"evaluation {evaluation_id!r} in the store is of graph {rec.graph_key!r} revision {rec.revision} with "
            f"{rec.cases} cases; this call evaluates {graph.name!r} revision {revision} with {len(names)} cases "
            f"{names[:3]}...: pass another name= for a new evaluation"
        )
    ev = Evaluation(
        lab, rec, graph=graph, dataset=dataset, evaluators=extra, report_evaluators=extra_reports, entry=entry
    )
    return ev.run(
        workers=workers, address=address, deps=deps, progress=progress, max_concurrency=max_concurrency
    )


def _check_concurrency(max_concurrency: Any) -> None:
    if max_concurrency is not None and (
        not isinstance(max_concurrency, int) or isinstance(max_concurrency, bool) or max_concurrency < 1
    ):
        raise ArgumentError(
            f"lab.evaluate(max_concurrency={max_concurrency!r}): at most how many cases run at once, "
            "an int >= 1 (None: as many as workers=)"
        )


def open_evaluation(lab: Lab, evaluation_id: str) -> Evaluation:
    """An evaluation as the store holds it, to show and compare (continue it with `lab.evaluate`)."""
    if not isinstance(evaluation_id, str) or not evaluation_id:
        raise ArgumentError(
            f"lab.evaluation({evaluation_id!r}): an evaluation id is a str like 'docs/classify@3'"
        )
    rec = lab.store.evaluation(evaluation_id)  # type: ignore[attr-defined]
    if rec is None:
        known = [e.evaluation_id for e in lab.store.evaluations()]  # type: ignore[attr-defined]
        raise ArgumentError(
            f"lab.evaluation({evaluation_id!r}): no evaluation of that id in the store; it has {known}"
        )
    return Evaluation(lab, rec)


class Evaluation:
    """An evaluation of one graph revision over one data set: `rows()`, `report()`, `averages()`,
    `run(case)` to open a case's run; displays as a table with a plot of the score distribution."""

    def __init__(
        self,
        lab: Lab,
        record: EvaluationRecord,
        *,
        graph: Any = None,
        dataset: Any = None,
        evaluators: Sequence[Any] = (),
        report_evaluators: Sequence[Any] = (),
        entry: Any = None,
    ):
        self.lab = lab
        self.record = record
        self.id = record.evaluation_id
        self.graph = graph
        self.dataset = dataset
        self.evaluators = list(evaluators)
        self.report_evaluators = list(report_evaluators)
        self.entry = entry
        self.repeat = int((record.spec or {}).get("repeat", 1))
        """How many runs each case of the data set gets (`lab.evaluate(repeat=)`)."""
        self.seconds: float | None = None
        """Wall time of the last `run()` (runs and scoring)."""
        self._trees: dict[str, Any] = {}
        """Span trees captured live, by run id, until their case is scored (spans.py)."""

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        *,
        workers: int = 0,
        address: str | None = None,
        deps: Any = None,
        progress: bool = True,
        max_concurrency: int | None = None,
    ) -> Evaluation:
        """Drive the cases' unfinished runs (`workers=0`: here; `workers=n`: on Ray) and score the
        cases whose runs ended, then run the report evaluators over them. Call again after
        approving waiting cases (or after a restart). `max_concurrency`: at most that many cases
        run at once, as in `Dataset.evaluate` (here they run one after another anyway; on Ray it
        caps the workers)."""
        import time

        _check_concurrency(max_concurrency)
        if max_concurrency is not None and workers:
            workers = min(workers, max_concurrency)
        if self.graph is None or self.dataset is None:
            raise EvaluationError(
                f"evaluation {self.id!r} was opened from the store: continue it with "
                f"lab.evaluate(graph, dataset, name={self.id!r}) (re-run the cells that declare both first)"
            )
        started = time.perf_counter()
        run_ids = self._runs()
        batch = Batch(self.lab, self.graph, self.id, [run_ids[i] for i in range(len(run_ids))], None)
        index = {run_id: i for i, run_id in run_ids.items()}
        stopped: list[int] = []
        chunk = max(1, min(SCORE_CHUNK, len(run_ids) // 8))

        def on_run(run_id: str) -> None:
            """Score as runs stop, a chunk at a time (`SCORE_CHUNK`)."""
            stopped.append(index[run_id])
            if len(stopped) >= chunk:
                self._score(run_ids, stopped)
                stopped.clear()

        batch.run(
            workers=workers,
            address=address,
            deps=deps,
            progress=progress,
            on_run=on_run,
            around_run=capture(self._trees.__setitem__),
        )
        self._score(run_ids, range(len(run_ids)))
        run_report_evaluators(self, [*self.dataset.report_evaluators, *self.report_evaluators])
        self.seconds = time.perf_counter() - started
        return self

    def _runs(self) -> dict[int, str]:
        """Each case's run: the stored one, or a new one for a case that has none yet."""
        runs = batch_runs(self.lab, self.id)
        for i, (at, _, _) in enumerate(_tasks(self.dataset.cases, self.repeat)):
            case = self.dataset.cases[at]
            if i not in runs:
                tags = {"batch": self.id, "index": i, "evaluation": self.id}
                # a copy: a run changes its state in place, and the case's inputs stay as the data set says
                runs[i] = start_input(
                    self.graph, copy.deepcopy(case.inputs), i, entry=self.entry, tags=tags
                ).id
        return runs

    def _score(self, run_ids: dict[int, str], indices: Iterable[int]) -> None:
        """Record cases `indices` whose runs stopped since they were last recorded (scored if done)."""
        store = self.lab.store
        recorded = {c.case_index: c for c in store.eval_cases(self.id)}  # type: ignore[attr-defined]
        codec = self.graph.build().codec
        evaluators = [*self.dataset.evaluators, *self.evaluators]
        tasks = _tasks(self.dataset.cases, self.repeat)
        done: list[tuple[EvalCaseRecord, list[EvalScoreRecord]]] = []
        for i in indices:
            case, run_id = self.dataset.cases[tasks[i][0]], run_ids[i]
            old = recorded.get(i)
            if old is not None and old.status in SETTLED and old.run_id == run_id:
                continue
            rec = store.get_run(run_id)
            status = {"done": "scored", "failed": "failed", "cancelled": "failed", "waiting": "waiting"}.get(
                rec.status, "pending"
            )
            if old is not None and old.status == status and old.run_id == run_id:
                continue  # still waiting (or pending): nothing new to record
            scores: list[EvalScoreRecord] = []
            duration = usage = error = None
            if status in SETTLED:
                events = store.events(run_id)
                duration = run_duration(events)
                usage = run_usage(store.jobs(run_id=run_id)) if callable(getattr(store, "jobs", None)) else {}
            if status == "scored":
                output = codec.decode_output(rec.output, run_id=run_id)
                scores = score_case(
                    evaluators,
                    case,
                    output,
                    duration=duration or 0.0,
                    usage=usage or {},
                    evaluation_id=self.id,
                    index=i,
                    span_tree=self._tree_of(rec, events),
                )
            elif status == "failed" and rec.error:
                error = f"{str(rec.error.get('type', '')).rsplit('.', 1)[-1]}: {rec.error.get('message', '')}"
            elif status == "failed":
                error = f"the run was {rec.status}"
            expected = to_jsonable_python(case.expected_output, fallback=str)
            row = EvalCaseRecord(
                self.id, i, tasks[i][1], run_id, status, rec.output, expected, duration, usage, error, None
            )
            done.append((row, scores))
        store.record_eval_cases(done)  # type: ignore[attr-defined]  # one transaction for the chunk

    def _tree_of(self, rec: Any, events: Any) -> Any:
        """What makes a case's span tree: the one captured live, else one rebuilt from the store (spans.py)."""
        live = self._trees.pop(rec.run_id, None)
        return (lambda: live) if live is not None else functools.partial(rebuilt_tree, self.lab, rec, events)

    # -- reading ---------------------------------------------------------------------------

    def rows(self) -> list[CaseRow]:
        """Every recorded case, by index (a case not recorded yet is not listed)."""
        return [_row(c) for c in self.lab.store.eval_cases(self.id)]  # type: ignore[attr-defined]

    def counts(self) -> dict[str, int]:
        """How many cases are in each status: `scored`, `failed`, `waiting`, `pending`."""
        return dict(Counter(r.status for r in self.rows()))

    def open(self, case: int | str) -> Any:
        """The run of `case` (its index or name), to display, step, rewind or fork (`lab.resume`)."""
        rows = self.rows()
        found = [r for r in rows if case in (r.index, r.name)]
        if not found or found[0].run_id is None:
            raise ArgumentError(
                f"evaluation {self.id!r} has no case {case!r}; its cases are {[r.name for r in rows]}"
            )
        return self.lab.resume(found[0].run_id)

    def case_sources(self) -> dict[int, tuple[Any, Any]]:
        """Each case index's inputs and metadata, from the data set (empty when opened from the store)."""
        if self.dataset is None:
            return {}
        cases = self.dataset.cases
        return {
            i: (cases[at].inputs, cases[at].metadata)
            for i, (at, _, _) in enumerate(_tasks(cases, self.repeat))
        }

    def source_names(self) -> dict[int, str]:
        """With `repeat > 1`: each case index's data set case name (`hi` for `hi [2/3]`)."""
        names = (self.record.spec or {}).get("cases") or []
        if self.repeat == 1:
            return {}
        return {i: name.rsplit(" [", 1)[0] for i, name in enumerate(names)}

    def report(self) -> Any:
        """The evaluation as a `pydantic_evals.reporting.EvaluationReport` (scored cases; failed ones
        as failures; waiting and pending cases are in neither), with the report evaluators'
        `analyses`: `.print()`, `.averages()` work as usual."""
        from .analyses import stored_analyses
        from .report import build_report

        report = build_report(self)
        report.analyses, report.report_evaluator_failures = stored_analyses(self)
        return report

    def averages(self) -> Any:
        """pydantic-evals' `ReportCaseAggregate` of the scored cases: average scores, labels,
        metrics (tokens) and durations, and the assertions' pass rate."""
        from pydantic_evals.reporting import ReportCaseAggregate

        return ReportCaseAggregate.average(self.report().cases)

    def plot(self) -> Any:
        """The distribution of each score (a histogram) and each assertion's pass rate, as SVG."""
        from .plot import evaluation_plot

        return evaluation_plot(self)

    def __repr__(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts().items()))
        return f"<Evaluation {self.id} of {self.record.graph_key} r{self.record.revision}: {self.record.cases} cases ({counts})>"

    def _repr_html_(self) -> str:
        from .analyses import analyses_html
        from .report import evaluation_html

        return evaluation_html(self, analyses_html(self))

    def export_html(self, path: Any) -> Any:
        """Write the table and plot this evaluation displays as one self-contained HTML file."""
        from .page import write_page

        title = f"Evaluation {self.id} of {self.record.graph_key} r{self.record.revision}"
        return write_page(path, title, self._repr_html_(), what="evaluation")
