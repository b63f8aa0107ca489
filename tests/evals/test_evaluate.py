"""`lab.evaluate` in this process (workers=0) on a real DuckDB file.

Scenarios:
- every case becomes one run, tagged with the evaluation; the data set's evaluators and the
  caller's score each output; scores, assertions, labels, durations and evaluator failures are in
  the store (`eval_cases`, `eval_scores`, queryable with `lab.sql`) and linked to the case's run,
  which opens, rewinds and forks like any run
- the averages are pydantic-evals' own: the same data set evaluated by `Dataset.evaluate` on the
  same outputs gives the same scores, pass rate and labels
- a failing run is a failed case (its error shown), a run parked at a gate is waiting, not failed;
  approved, `evaluation.run()` scores it
- the same call again continues: nothing is run or scored twice; a changed graph is a new
  evaluation (new revision), and `lab.compare_evaluations` names the cases that got worse
- the evaluation and the comparison display as a table with an inline SVG plot
- bad input is refused with a clear error, and nothing is stored
"""

from __future__ import annotations

import asyncio
import linecache
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected, EvaluationReason, Evaluator, EvaluatorContext
from pydantic_graph import BaseNode, End, GraphRunContext  # noqa: F401 - End: the cells use it

from lab import ArgumentError, Gate, Lab, Verdict
from lab.evaluate import EvaluationError


@dataclass
class Ask:
    text: str = ""
    shout: bool = False


@dataclass
class Closeness(Evaluator):
    """A deterministic score: 1 for the expected answer, less the further its length is."""

    def evaluate(self, ctx: EvaluatorContext) -> dict[str, float | str | EvaluationReason]:
        diff = abs(len(ctx.output) - len(ctx.expected_output or ""))
        return {
            "closeness": EvaluationReason(1.0 / (1 + diff), reason=f"{diff} characters apart"),
            "tone": "loud" if ctx.output.isupper() else "calm",
        }


@dataclass
class Broken(Evaluator):
    def evaluate(self, ctx: EvaluatorContext) -> bool:
        raise ValueError("this evaluator is broken on purpose")


ANSWER = """
@g.node
@dataclass
class Answer(BaseNode[Ask, None, str]):
    async def run(self, ctx: GraphRunContext[Ask, None]) -> End[str]:
        return End(ctx.state.text.upper() if ctx.state.shout else ctx.state.text)
"""
ANSWER_SHOUTS_LONGER = """
@g.node
@dataclass
class Answer(BaseNode[Ask, None, str]):
    async def run(self, ctx: GraphRunContext[Ask, None]) -> End[str]:
        shout = ctx.state.shout or len(ctx.state.text) > 3  # the change: longer answers shout
        return End(ctx.state.text.upper() if shout else ctx.state.text)
"""
_cells = iter(range(10**6))


def cell(source: str, g) -> None:
    """Run `source` as a notebook cell does: its lines live only in linecache (the node's revision is its source)."""
    filename = f"<evaluate-cell-{next(_cells)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    scope = globals()  # a notebook's cells share one namespace: Clean returns the Answer defined here
    scope["g"] = g
    exec(compile(source, filename, "exec"), scope)


def declare(lab: Lab, *, shout_all: bool = False):
    g = lab.graph("echo", state_type=Ask, output_type=str)

    @g.node
    @dataclass
    class Clean(BaseNode[Ask, None, str]):
        async def run(self, ctx: GraphRunContext[Ask, None]) -> "Answer | Check":  # noqa: F821, UP037
            if ctx.state.text == "boom":
                raise RuntimeError("no answer for boom")
            ctx.state.text = ctx.state.text.strip()
            return Check() if ctx.state.text.startswith("?") else Answer()  # noqa: F821 - the cell's

    @g.node
    @dataclass
    class Check(Gate[Ask]):
        prompt = "answer a question?"

        async def decide(self, ctx: GraphRunContext[Ask, None], verdict: Verdict) -> "Answer":  # noqa: F821, UP037
            return Answer()  # noqa: F821

    cell(ANSWER_SHOUTS_LONGER if shout_all else ANSWER, g)
    return g, Clean


def dataset() -> Dataset:
    cases = [
        Case(name="hi", inputs=Ask(" hi "), expected_output="hi"),
        Case(name="hello", inputs=Ask("hello"), expected_output="hello"),
        Case(name="loud", inputs=Ask("hey", shout=True), expected_output="hey"),
        Case(name="longer", inputs=Ask("good morning"), expected_output="good morning"),
        Case(name="boom", inputs=Ask("boom"), expected_output="boom"),
        Case(name="question", inputs=Ask("?why"), expected_output="?why"),
    ]
    return Dataset(name="echoes", cases=cases, evaluators=[EqualsExpected()])


@pytest.fixture
def lab(tmp_path: Path):
    lab = Lab(str(tmp_path / "lab.duckdb"))
    yield lab
    lab.close()


def test_each_case_is_a_run_scored_and_stored(lab: Lab) -> None:
    g, Clean = declare(lab)
    ds = dataset()
    ev = lab.evaluate(g, ds, evaluators=[Closeness(), Broken()], entry=Clean(), progress=False)
    rows = {r.name: r for r in ev.rows()}
    assert ds.cases[0].inputs == Ask(" hi ")  # each run starts from a copy: the data set is as it was
    assert ev.counts() == {"scored": 4, "failed": 1, "waiting": 1}
    assert rows["hi"].output == "hi" and rows["hi"].assertions == {"EqualsExpected": True}
    assert rows["loud"].assertions == {"EqualsExpected": False} and rows["loud"].labels == {"tone": "loud"}
    assert (
        rows["loud"].scores == {"closeness": 1.0} and rows["hi"].reasons["closeness"] == "0 characters apart"
    )
    assert rows["hi"].failures == {"Broken": "ValueError: this evaluator is broken on purpose"}
    assert (
        rows["boom"].status == "failed"
        and "no answer for boom" in rows["boom"].error
        and not rows["boom"].scores
    )
    assert rows["question"].status == "waiting" and rows["question"].scores == {}
    assert all(r.duration is not None and r.duration > 0 for r in rows.values() if r.status == "scored")
    # each case's run is a run like any: tagged, opened, rewound and forked
    run = ev.open("hello")
    assert run.id == rows["hello"].run_id and run.status == "done" and run.output == "hello"
    started = [e for e in run.events() if e.kind == "started"][0]
    assert started.payload["tags"] == {"batch": ev.id, "index": 1, "evaluation": ev.id}
    fork = run.fork(0, state=Ask("forked"))
    fork.run()
    assert fork.output == "forked"
    run.rewind(0)  # a new branch of the case's own run, from its first checkpoint
    run.run()
    assert (run.status, run.output, len(run.history()), len(lab.store.seqs(run.id))) == (
        "done",
        "hello",
        3,
        5,
    )
    # and the store answers SQL over the scores
    q = (
        "select c.case_name, s.kind, s.value from eval_scores s join eval_cases c using (evaluation_id, case_index) "
        "where s.name = 'EqualsExpected' and evaluation_id = ? order by c.case_index"
    )
    got = [(n, k, v) for n, k, v in lab.sql(q, [ev.id]).fetchall()]
    assert [(n, v) for n, _, v in got] == [
        ("hi", "true"),
        ("hello", "true"),
        ("loud", "false"),
        ("longer", "true"),
    ]


def test_averages_are_pydantic_evals_own(lab: Lab) -> None:
    """The same outputs evaluated by `Dataset.evaluate` give the same report numbers."""
    g, Clean = declare(lab)
    ds = dataset()
    ds.cases[:] = [c for c in ds.cases if c.name not in ("boom", "question")]
    ev = lab.evaluate(g, ds, evaluators=[Closeness()], entry=Clean(), progress=False)
    outputs = {r.name: r.output for r in ev.rows()}

    async def task(inputs: Ask) -> str:
        return next(outputs[c.name] for c in ds.cases if c.inputs is inputs)

    ds.add_evaluator(Closeness())
    theirs = asyncio.run(ds.evaluate(task, progress=False)).averages()  # evaluate_sync leaves its loop open
    ours = ev.averages()
    assert ours.scores == pytest.approx(theirs.scores) and ours.assertions == theirs.assertions == 0.75
    assert ours.labels == theirs.labels == {"tone": {"calm": 0.75, "loud": 0.25}}
    assert ev.report().cases[0].attributes["run_id"] == ev.rows()[0].run_id


def test_waiting_cases_continue_and_nothing_runs_twice(lab: Lab) -> None:
    g, Clean = declare(lab)
    ev = lab.evaluate(g, dataset(), entry=Clean(), progress=False)
    before = {r.name: r for r in ev.rows()}
    q = "select count(*) from events where kind = 'entered'"
    entered = lab.sql(q).fetchall()
    again = lab.evaluate(g, dataset(), entry=Clean(), progress=False)  # the same cell run again
    assert again.id == ev.id and lab.sql(q).fetchall() == entered  # no station ran again
    assert {r.name: (r.run_id, r.status) for r in again.rows()} == {
        n: (r.run_id, r.status) for n, r in before.items()
    }
    ev.open("question").approve(note="fine")
    ev.run(progress=False)
    row = {r.name: r for r in ev.rows()}["question"]
    assert (row.status, row.output, row.assertions) == ("scored", "?why", {"EqualsExpected": True})
    assert row.run_id == before["question"].run_id


def test_a_changed_node_is_a_new_evaluation_and_compares(lab: Lab) -> None:
    g, Clean = declare(lab)
    first = lab.evaluate(g, dataset(), evaluators=[Closeness()], entry=Clean(), progress=False)
    g2, Clean2 = declare(lab, shout_all=True)  # a later cell redefines the answer: a new revision
    second = lab.evaluate(g2, dataset(), evaluators=[Closeness()], entry=Clean2(), progress=False)
    assert second.id != first.id and second.record.revision == first.record.revision + 1
    cmp = lab.compare_evaluations(first, second.id)
    assert cmp.worse() == ["hello", "longer"]  # their assertion held before and fails now
    by = {c.name: c for c in cmp.rows()}
    assert by["hello"].delta("assertions passed") == -1 and by["hi"].delta("closeness") == 0
    assert cmp.averages()["assertions"] == (0.75, 0.25)
    page = cmp._repr_html_()
    assert "<table>" in page and "<svg" in page and "<b>worse</b> hello" in page
    with pytest.raises(ArgumentError, match="same data set"):
        other = Dataset(name="other", cases=[Case(name="x", inputs=Ask("x"), expected_output="x")])
        lab.compare_evaluations(first, lab.evaluate(g2, other, entry=Clean2(), progress=False))


def test_the_evaluation_displays_as_a_table_and_a_plot(lab: Lab) -> None:
    g, Clean = declare(lab)
    ev = lab.evaluate(g, dataset(), evaluators=[Closeness()], entry=Clean(), progress=False)
    page = ev._repr_html_()
    assert page.count("<tr>") == 1 + 6 + 1  # the head, a row per case, the averages
    assert "<b>Averages</b>" in page and "<b>75.0%</b>" in page and "wait at a gate" in page
    svg = ev.plot().data
    assert svg.startswith("<svg") and "closeness" in svg and "assertions passed" in svg
    assert "<script" not in page  # nothing to load: renders offline
    opened = lab.evaluation(ev.id)
    assert opened.rows() == ev.rows() and repr(opened).startswith(f"<Evaluation {ev.id}")
    with pytest.raises(EvaluationError, match="continue it with"):
        opened.run()


def test_bad_input_is_refused_and_nothing_is_stored(lab: Lab) -> None:
    g, Clean = declare(lab)
    with pytest.raises(ArgumentError, match="pydantic_evals.Dataset"):
        lab.evaluate(g, [Case(inputs=Ask("x"))])
    with pytest.raises(ArgumentError, match="Evaluator instance"):
        lab.evaluate(g, dataset(), evaluators=[lambda ctx: True])
    with pytest.raises(ArgumentError, match="no cases"):
        lab.evaluate(g, Dataset(name="empty", cases=[]))
    with pytest.raises(ArgumentError, match="graph of this lab"):
        lab.evaluate(g.build().native, dataset())
    with pytest.raises(ArgumentError, match="0 runs the cases here"):
        lab.evaluate(g, dataset(), workers=-1)
    with pytest.raises(ArgumentError, match="no evaluation of that id"):
        lab.evaluation("nope")
    assert lab.store.evaluations() == [] and lab.runs() == []
    lab.evaluate(g, dataset(), entry=Clean(), name="fixed", progress=False)
    fewer = Dataset(name="echoes", cases=dataset().cases[:2])
    with pytest.raises(EvaluationError, match="pass another name="):
        lab.evaluate(g, fewer, entry=Clean(), name="fixed", progress=False)
