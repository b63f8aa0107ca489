"""The kernel extension on a real test IPython shell.

Scenarios: load twice / unload removes magics, hooks and formatters; escaped HTML and
plain-text display of runs, graphs, checkpoints, histories and run lists; `%lab` driving a
run (start, step, history, rewind, diff, fork, events, runs) mixed with Python calls; `%lab
open`; `%%lab_sql` with `$run`; the bad inputs (unknown subcommand, missing run, a magic before
any lab, an SQL error, wrong arguments, a node renamed in a re-run cell).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

import lab.lab as lab_module
from lab import Lab, LabGraph, Run, current_run
from lab.errors import LabError

IPython = pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402
from IPython.testing import globalipapp  # noqa: E402

import kernel_ext  # noqa: E402
from kernel_ext.display import EventList, RunList, SqlResult, StepList, graph_html, run_html  # noqa: E402


@dataclass
class Text:
    value: str = "<img src=x onerror=alert(1)>"


@dataclass
class Say(BaseNode[Text, None, str]):
    async def run(self, ctx: GraphRunContext[Text, None]) -> End[str]:
        return End(ctx.state.value)


COUNTER_CELLS = [
    """
from dataclasses import dataclass
from pydantic_graph import BaseNode, End, GraphRunContext
from lab import Lab

lab = Lab(':memory:')

@dataclass
class State:
    count: int = 0

g = lab.graph("counter", state_type=State, output_type=int)
""",
    """
@g.node
@dataclass
class Inc(BaseNode[State, None, int]):
    by: int = 1

    async def run(self, ctx: GraphRunContext[State, None]) -> "Check":
        ctx.state.count += self.by
        return Check()
""",
    """
@g.node
@dataclass
class Check(BaseNode[State, None, int]):
    async def run(self, ctx: GraphRunContext[State, None]) -> Inc | End[int]:
        return End(ctx.state.count) if ctx.state.count >= 6 else Inc(by=2)
""",
]


def get_ipython() -> Any:
    """IPython's shared test shell (a real InteractiveShell), started on first use."""
    globalipapp.start_ipython()
    return globalipapp.get_ipython()


@pytest.fixture
def ip() -> Iterator[Any]:
    shell = get_ipython()
    shell.run_line_magic("load_ext", "kernel_ext")
    html = shell.display_formatter.formatters["text/html"]
    enabled = html.enabled
    html.enabled = True  # a terminal test shell has HTML output switched off
    yield shell
    html.enabled = enabled
    shell.run_line_magic("unload_ext", "kernel_ext")
    lab = shell.user_ns.get("lab")
    if isinstance(lab, Lab) and not lab.store.closed:
        lab.close()
    for name in ("lab", "g", "run", "State", "Inc", "Check", "Increment"):
        shell.user_ns.pop(name, None)


def run_cells(ip: Any, cells: list[str], prefix: str = "cell") -> None:
    for i, source in enumerate(cells):
        result = ip.run_cell(source, cell_id=f"{prefix}-{i}")
        assert result.success, result.error_in_exec or result.error_before_exec


def lab_magic(ip: Any, line: str) -> Any:
    return ip.run_line_magic("lab", line)


def html_of(ip: Any, obj: Any) -> str:
    return ip.display_formatter.format(obj)[0].get("text/html", "")


def text_of(ip: Any, obj: Any) -> str:
    return ip.display_formatter.format(obj)[0]["text/plain"]


# -- load, display, unload -----------------------------------------------------------------


def test_load_format_unload() -> None:
    ip = get_ipython()
    ip.run_line_magic("load_ext", "kernel_ext")
    kernel_ext.load_ipython_extension(ip)  # twice is harmless, also called directly
    state = kernel_ext.loaded_on(ip)
    assert state is not None
    callbacks = ip.events.callbacks["post_run_cell"]
    assert callbacks.count(state.watcher.post_run_cell) == 1
    lab = Lab(":memory:")
    html_formatter = ip.display_formatter.formatters["text/html"]
    enabled, html_formatter.enabled = html_formatter.enabled, True
    try:
        g = lab.graph("say", state_type=Text, output_type=str)
        g.node(Say)
        run = g.start(Say(), state=Text()).run()
        # runs and graphs: the compact HTML fallback, unless they display themselves (widget, SVG)
        html = run_html(run)
        assert "done" in html and "&lt;img src=x onerror=alert(1)&gt;" in html and "<img" not in html
        ghtml = graph_html(g)
        assert "Say" in ghtml and "__end__" in ghtml
        for cls, attr, obj, expected in (
            (Run, "_ipython_display_", run, html),
            (LabGraph, "_repr_mimebundle_", g, ghtml),
        ):
            registered = any(c is cls for _, c, _ in state.formatters)
            assert registered is not hasattr(cls, attr)
            if registered:
                assert html_formatter(obj) == expected
        assert run.id in ip.display_formatter.formatters["text/plain"](run)
        cp = run.checkpoint(1)
        cp_html = html_formatter(cp)
        assert "&lt;img" in cp_html and "<img" not in cp_html and f"{run.id}@1" in cp_html
        assert "status" in text_of(ip, cp) and "&lt;" not in text_of(ip, cp)
        hist_html = html_formatter(run.history())
        assert "2 checkpoints" in hist_html and "<img" not in hist_html
        assert "history of" in text_of(ip, run.history())
        assert run.id in html_formatter(lab.runs()[0])
        assert "line magics" not in str(ip.magics_manager.magics["line"].get("lab"))
        assert "lab" in ip.magics_manager.magics["line"] and "lab_sql" in ip.magics_manager.magics["cell"]
    finally:
        lab.close()
        ip.run_line_magic("unload_ext", "kernel_ext")
        html_formatter.enabled = enabled
    assert kernel_ext.loaded_on(ip) is None
    html_formatter.enabled = True
    try:
        assert html_formatter(run) is None and html_formatter(cp) is None
    finally:
        html_formatter.enabled = enabled
    assert "lab" not in ip.magics_manager.magics["line"]
    assert "lab_sql" not in ip.magics_manager.magics["cell"]
    assert state.watcher.post_run_cell not in ip.events.callbacks["post_run_cell"]
    assert state.watcher.pre_run_cell not in ip.events.callbacks["pre_run_cell"]
    ip.run_line_magic("load_ext", "kernel_ext")  # and it loads again after an unload
    try:
        assert "lab" in ip.magics_manager.magics["line"]
    finally:
        ip.run_line_magic("unload_ext", "kernel_ext")


def test_result_tables_escape_and_have_text(ip: Any) -> None:
    run_cells(ip, COUNTER_CELLS)
    run = ip.user_ns["g"].start(ip.user_ns["Inc"](), state=ip.user_ns["State"]())
    steps = lab_magic(ip, "step 2")
    assert isinstance(steps, StepList) and [s.node_id for s in steps] == ["Inc", "Check"]
    assert "<td" in html_of(ip, steps) and "settled" in repr(steps)
    events = lab_magic(ip, "events")
    assert isinstance(events, EventList) and events[0].kind == "started"
    assert "started" in html_of(ip, events) and "entered" in repr(events)
    runs = lab_magic(ip, "runs")
    assert isinstance(runs, RunList) and runs[-1].run_id == run.id
    assert run.id in html_of(ip, runs) and "counter@" in repr(runs)


# -- driving runs --------------------------------------------------------------------------


def test_magics_drive_a_run_mixed_with_python(ip: Any) -> None:
    run_cells(ip, COUNTER_CELLS)
    run = lab_magic(ip, "start Inc(by=2), state=State(count=1)")
    assert isinstance(run, Run) and run.state.count == 1 and current_run() is run
    assert run.next_stations == ("Inc",)
    assert [s.seq for s in lab_magic(ip, "step 2")] == [1, 2]
    # a Python call in between: the magics act on the same run
    ip.run_cell("run = lab.resume(lab.runs()[-1].run_id); run.step()", cell_id="py")
    assert ip.user_ns["run"] is run and run.head == 3
    history = lab_magic(ip, "history")
    assert list(history.seqs) == [0, 1, 2, 3]
    cp = lab_magic(ip, "rewind 1")
    assert cp.seq == 1 and run.head == 1 and cp.next_stations == ("Check",)
    lab_magic(ip, "step")
    assert run.head == 4 and lab_magic(ip, "history").seqs == (0, 1, 4)
    assert len(lab_magic(ip, "history --all")) == 5
    diff = lab_magic(ip, "diff 0 3")
    assert [(c.path, c.old, c.new) for c in diff.changes] == [("count", 1, 5)]
    child = lab_magic(ip, "fork 1")
    assert child is current_run() and child.id != run.id and child.head == 0
    across = lab_magic(ip, f"diff {run.id}@3 0")
    assert across.left == f"{run.id}@3" and across.right == f"{child.id}@0"
    done = lab_magic(ip, "run")
    assert done is child and child.status == "done" and child.output == 7
    assert run.status == "running"  # the parent was not touched
    assert [e.kind for e in lab_magic(ip, f"events done --run {child.id}")] == ["done"]
    # --run acts on another run for one command; the current run stays
    assert lab_magic(ip, f"history --run {run.id}").run_id == run.id
    assert current_run() is child
    lab_magic(ip, f"run --run {run.id}")
    assert run.status == "done" and current_run() is child


def test_start_forms(ip: Any) -> None:
    run_cells(ip, COUNTER_CELLS)
    plain = lab_magic(ip, "start")  # the first declared node with its defaults, default state
    assert plain.next_stations == ("Inc",) and plain.state.count == 0
    by_class = lab_magic(ip, "start Check, state=State(count=9)")
    assert by_class.next_stations == ("Check",)
    assert lab_magic(ip, "step")[0].outcome == "done" and by_class.output == 9
    with pytest.raises(UsageError, match="keywords state=, deps=, durability="):
        lab_magic(ip, "start Inc(), colour='red'")
    with pytest.raises(UsageError, match="one node"):
        lab_magic(ip, "start Inc(), Check()")
    with pytest.raises(UsageError, match="not valid Python"):
        lab_magic(ip, "start Inc(by=")
    with pytest.raises(UsageError, match="NameError: name 'Nope' is not defined"):
        lab_magic(ip, "start Nope()")
    with pytest.raises(UsageError, match="needs a node instance"):
        lab_magic(ip, "start 42")
    with pytest.raises(UsageError, match="does not apply"):
        lab_magic(ip, "start Inc() --run x")


GATE_CELLS = [
    COUNTER_CELLS[0]
    .replace('"counter", state_type=State, output_type=int', '"mail", state_type=Mail, output_type=str')
    .replace("class State:\n    count: int = 0", 'class Mail:\n    draft: str = ""\n    sent: bool = False'),
    """
from lab import Gate, Verdict

@g.node
@dataclass
class Draft(BaseNode[Mail, None, str]):
    async def run(self, ctx: GraphRunContext[Mail, None]) -> "ConfirmSend":
        ctx.state.draft = "Hello <team>"
        return ConfirmSend()

@g.node
@dataclass
class ConfirmSend(Gate[Mail]):
    prompt = "Send the <draft>?"

    async def decide(self, ctx: GraphRunContext[Mail, None], verdict: Verdict) -> "Send | Draft":
        return Send() if verdict.approved else Draft()

@g.node
@dataclass
class Send(BaseNode[Mail, None, str]):
    async def run(self, ctx: GraphRunContext[Mail, None]) -> End[str]:
        ctx.state.sent = True
        return End(ctx.state.draft)
""",
]


def test_approve_and_deny_a_parked_gate(ip: Any) -> None:
    run_cells(ip, GATE_CELLS, prefix="gate")
    run = lab_magic(ip, "start Draft()")
    lab_magic(ip, "run")
    assert run.status == "waiting" and run.wait.kind == "consent" and run.wait.node_id == "ConfirmSend"
    card = run_html(run)
    assert "waiting for" in card and "Send the &lt;draft&gt;?" in card and "<draft>" not in card
    wait_card = html_of(ip, run.wait)
    assert (
        "consent at ConfirmSend" in wait_card
        and "Send the &lt;draft&gt;?" in wait_card
        and "open" in wait_card
    )
    assert "consent at ConfirmSend" in text_of(ip, run.wait)
    lab_magic(ip, 'deny "not yet"')
    assert run.status == "queued"
    with pytest.raises(UsageError, match="already answered"):
        lab_magic(ip, "approve")
    lab_magic(ip, "run")  # denied: back to Draft, which parks at the gate again
    assert run.status == "waiting" and run.output is None
    lab_magic(ip, "approve ship it")
    lab_magic(ip, "run")
    assert run.status == "done", run.error
    assert run.output == "Hello <team>" and run.state.sent
    verdicts = [(e.payload["approved"], e.payload["note"]) for e in lab_magic(ip, "events verdict")]
    assert verdicts == [(False, "not yet"), (True, "ship it")]


ASK_CELLS = [
    COUNTER_CELLS[0].replace(
        '"counter", state_type=State, output_type=int', '"ask", state_type=State, output_type=str'
    ),
    """
from lab import CapabilityRequired, granted, interrupt

@g.node
@dataclass
class Ask(BaseNode[State, None, str]):
    async def run(self, ctx: GraphRunContext[State, None]) -> "Use":
        ctx.state.count = interrupt({"question": "how many?"})
        return Use()

@g.node
@dataclass
class Use(BaseNode[State, None, str]):
    async def run(self, ctx: GraphRunContext[State, None]) -> "Boom | End[str]":
        device = granted("gpu")
        if device is None:
            raise CapabilityRequired("gpu")
        if ctx.state.count < 0:
            return Boom()
        return End(f"{ctx.state.count} on {device}")

@g.node
@dataclass
class Boom(BaseNode[State, None, str]):
    async def run(self, ctx: GraphRunContext[State, None]) -> End[str]:
        raise RuntimeError("boom")
""",
]


def test_answer_grant_retry_cancel(ip: Any) -> None:
    run_cells(ip, ASK_CELLS, prefix="ask")
    run = lab_magic(ip, "start Ask()")
    lab_magic(ip, "run")
    assert run.status == "waiting" and run.wait.kind == "interrupt"
    with pytest.raises(UsageError, match=r"approve\(\) does not answer; use run.resume_with"):
        lab_magic(ip, "approve")
    with pytest.raises(UsageError, match="takes one Python value"):
        lab_magic(ip, "answer 1, 2")
    lab_magic(ip, "answer {40 + 2}")  # IPython expands {expression} first; the text is then evaluated
    lab_magic(ip, "run")
    assert run.status == "waiting" and run.wait.kind == "capability" and run.state.count == 42
    lab_magic(ip, "grant gpu 'cuda:0'")
    assert lab_magic(ip, "run").output == "42 on cuda:0"

    bad = lab_magic(ip, "start Ask()")
    lab_magic(ip, "run")
    lab_magic(ip, "answer -1")
    lab_magic(ip, "run")
    lab_magic(ip, "grant gpu 'cuda:1'")
    lab_magic(ip, "run")
    assert bad.status == "failed" and bad.error["node_id"] == "Boom"
    retried = lab_magic(ip, "retry")
    assert [s.outcome for s in retried] == ["failed"] and "RuntimeError: boom" in repr(retried)
    lab_magic(ip, "cancel")
    assert bad.status == "cancelled"
    with pytest.raises(UsageError, match="already cancelled"):
        lab_magic(ip, "cancel")


def test_open_makes_a_lab_current(ip: Any, tmp_path: Any) -> None:
    path = os.fspath(tmp_path / "magic.duckdb")
    assert lab_magic(ip, f"open {path}") is None
    state = kernel_ext.loaded_on(ip)
    assert state is not None and state.session.lab().path == path
    assert lab_magic(ip, "runs") == []
    state.session.lab().close()


def test_lab_sql(ip: Any) -> None:
    run_cells(ip, COUNTER_CELLS)
    run = lab_magic(ip, "start Inc(by=3)")
    run.run()
    result = ip.run_cell_magic(
        "lab_sql",
        "",
        "select seq, (state->>'count')::int as count from checkpoints where run_id = $run order by seq",
    )
    assert isinstance(result, SqlResult) and result.columns == ["seq", "count"]
    assert [r[1] for r in result.rows] == [0, 3, 3, 5, 5, 7, 7]
    assert "<th" in html_of(ip, result) and "7 row(s)" in repr(result)
    escaped = ip.run_cell_magic("lab_sql", "", "select '<b>x</b>' as tag")
    assert "&lt;b&gt;x&lt;/b&gt;" in html_of(ip, escaped) and "<b>x" not in html_of(ip, escaped)


def test_help(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert lab_magic(ip, "--help") is None
    out = capsys.readouterr().out
    for sub in kernel_ext.magics.SUBCOMMANDS:
        assert f"  {sub} " in out
    lab_magic(ip, "rewind --help")
    assert "%lab rewind SEQ" in capsys.readouterr().out


# -- bad input -----------------------------------------------------------------------------


def test_unknown_subcommand(ip: Any) -> None:
    with pytest.raises(UsageError, match=r"unknown %lab subcommand 'stpe'; did you mean `%lab step`\?"):
        lab_magic(ip, "stpe")
    with pytest.raises(UsageError, match="subcommands: open, graph, runs, start"):
        lab_magic(ip, "frobnicate")


def test_missing_run(ip: Any) -> None:
    run_cells(ip, COUNTER_CELLS)
    with pytest.raises(UsageError, match=r"no run 'run-nope' in lab :memory:; `%lab runs` lists"):
        lab_magic(ip, "history --run run-nope")
    with pytest.raises(UsageError, match="--run needs a run id"):
        lab_magic(ip, "history --run")
    lab_module._note_run(None)
    with pytest.raises(UsageError, match="no current run in lab :memory:; start one"):
        lab_magic(ip, "step")


def test_magic_before_any_lab(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lab_module, "_current", None)
    for line in ("runs", "step", "graph", "start Inc()"):
        with pytest.raises(UsageError, match=r"no lab is open in this kernel; run `%lab open`"):
            lab_magic(ip, line)
    with pytest.raises(UsageError, match="no lab is open"):
        ip.run_cell_magic("lab_sql", "", "select 1")


def test_sql_error_shows_duckdb_message_without_traceback(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run_cells(ip, COUNTER_CELLS)
    with pytest.raises(UsageError, match=r'SQL error: Binder Error: Referenced column "nope" not found'):
        ip.run_cell_magic("lab_sql", "", "select nope from runs")
    with pytest.raises(
        UsageError, match=r"SQL error: Conversion Error: Could not convert string 'abc' to INT32"
    ):
        ip.run_cell_magic("lab_sql", "", "select x::int from (values ('1'), ('abc')) t(x)")
    with pytest.raises(UsageError, match="read-only"):
        ip.run_cell_magic("lab_sql", "", "delete from runs")
    # as a cell in the notebook: one line, no traceback
    result = ip.run_cell("%%lab_sql\nselect nope from runs\n", cell_id="sql")
    assert not result.success
    shown = capsys.readouterr()
    text = shown.out + shown.err
    assert "UsageError: SQL error: Binder Error" in text and "Traceback" not in text


def test_wrong_arguments(ip: Any) -> None:
    run_cells(ip, COUNTER_CELLS)
    lab_magic(ip, "start")
    cases = {
        "rewind": r"%lab rewind needs SEQ",
        "rewind one": r"SEQ must be a whole number, got 'one'",
        "rewind 1 2": r"%lab rewind takes SEQ, got '1 2'",
        "rewind 99": r"no checkpoint 99 in this run",
        "step 0": r"N >= 1",
        "step many": r"N must be a whole number",
        "diff 1": r"%lab diff needs A B",
        "diff a b": r"SEQ or RUN_ID@SEQ",
        "history --everything": r"takes \[--all\]",
        "graph nope": r"no graph 'nope' declared in this kernel; declared: \['counter'\]",
        "fork 1 2": r"takes \[SEQ\] \[--current\]",
        'rewind "1': r"%lab rewind: cannot read",
        "retry": r"not failed or interrupted; retry\(\) follows a failure",
        "cancel now": r"%lab cancel takes no arguments, got 'now'",
        "answer": r"%lab answer needs the answer",
        "answer 'eu'": r"not waiting; there is nothing to resume_with",
        "grant": r"%lab grant needs the capability's name",
        "approve looks good": r"%lab approve: run \S+ is created, not waiting; there is nothing to approve",
        "--run a history --run b": r"unknown %lab subcommand '--run'",
        "history --run a --run b": r"--run is given more than once",
    }
    for line, message in cases.items():
        with pytest.raises(UsageError, match=message):
            lab_magic(ip, line)


def test_renamed_node_is_removed_and_reported(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run_cells(ip, COUNTER_CELLS)
    g = ip.user_ns["g"]
    first = g.revision
    # re-running a cell unchanged replaces its node: same id, no report
    ip.run_cell(COUNTER_CELLS[1], cell_id="cell-1")
    assert list(g.nodes) == ["Inc", "Check"] and "removed" not in capsys.readouterr().err
    renamed = COUNTER_CELLS[1].replace("class Inc(", "class Increment(")
    result = ip.run_cell(renamed, cell_id="cell-1")
    assert result.success
    err = capsys.readouterr().err
    assert "graph 'counter': this cell used to declare Inc and now declares Increment" in err
    assert "so Inc (renamed or deleted here) was removed from the graph" in err
    assert "Check still return(s) Inc in the run() return hint" in err
    assert list(g.nodes) == ["Check", "Increment"]
    with pytest.raises(UsageError, match="Check returns Inc, which is not declared"):
        lab_magic(ip, "start Increment()")
    fixed = (
        COUNTER_CELLS[2]
        .replace("Inc | End[int]", "Increment | End[int]")
        .replace("Inc(by=2)", "Increment(by=2)")
    )
    run_cells(ip, [fixed], prefix="fixed")
    run = lab_magic(ip, "start Increment(by=3)")
    assert run.revision > first and run.run().output == 7
    assert "removed" not in capsys.readouterr().err


def test_graph_view_follows_later_cells(ip: Any) -> None:
    """`%lab graph` shows the live view once; a later cell's node redraws it in place."""
    widgets = pytest.importorskip("lab.widgets")
    run_cells(ip, [COUNTER_CELLS[0], COUNTER_CELLS[1]], prefix="view")
    view = lab_magic(ip, "graph")
    assert isinstance(view, widgets.GraphView)
    before = view.value
    assert "<svg" in before and "Inc" in before
    run_cells(ip, [COUNTER_CELLS[2]], prefix="view-later")
    assert view.value != before and "Check" in view.value
    assert lab_magic(ip, "graph counter").value == view.value
    with pytest.raises(UsageError, match="no graph 'nope'"):
        lab_magic(ip, "graph nope")


def test_forward_reference_is_fine_until_the_graph_runs(ip: Any) -> None:
    run_cells(ip, [COUNTER_CELLS[0], COUNTER_CELLS[1]])  # Inc returns "Check", not defined yet
    g = ip.user_ns["g"]
    assert list(g.nodes) == ["Inc"]
    assert "not buildable yet" in graph_html(g) and "&#x27;Check&#x27;, which is not defined" in graph_html(g)
    with pytest.raises(UsageError, match="'Check', which is not defined"):
        lab_magic(ip, "start Inc()")
    run_cells(ip, [COUNTER_CELLS[2]], prefix="later")
    assert lab_magic(ip, "start Inc()").run().output == 7


def test_magics_on_an_adopted_native_graph(ip: Any) -> None:
    run_cells(
        ip,
        [
            "from lab import Lab\nfrom tests.integration import native_graphs as ng\nlab = Lab(':memory:')",
            "lg = lab.adopt(ng.fives(), name='fives')",
            "x = 1",  # a later cell: the cell hooks must leave adopted graphs alone
        ],
        prefix="adopt",
    )
    lab_magic(ip, "graph fives")
    run = lab_magic(ip, "start inputs=4")
    assert run.next_stations == ("__start__",)
    lab_magic(ip, "step")  # the start routes (not a step), then begin runs (issue 24 item 10)
    assert run.next_stations == ("DivisibleBy5",)
    lab_magic(ip, "run")
    assert run.output == 5
    with pytest.raises(UsageError, match=r"accepts inputs=, state=, deps=, durability=; not \['colour'\]"):
        lab_magic(ip, "start inputs=4, colour='red'")
    with pytest.raises(UsageError, match="starts from inputs of type int"):
        lab_magic(ip, "start")
    for name in ("lg", "ng", "x"):
        ip.user_ns.pop(name, None)


def test_trailing_comments_are_dropped_as_python_would(ip: Any) -> None:
    """Issue 15 item 1: lines copied with their `# comment` work; a `#` inside quotes is text."""
    run_cells(ip, GATE_CELLS, prefix="comment")
    cells = [
        "%lab graph                       # the live drawing",
        "%lab start Draft()               # the rest of the line is Python",
        "%lab run   # parks at the gate",
        "%lab approve \"ship it # today\"   # the note keeps its '#'",
        "%lab run 10#no space needed",
        "%lab history --all  # every checkpoint",
    ]
    for i, cell in enumerate(cells):
        result = ip.run_cell(cell, cell_id=f"comment-line-{i}")
        assert result.success, (cell, result.error_in_exec or result.error_before_exec)
    run = current_run()
    assert run is not None and run.status == "done"
    verdicts = [e.payload["note"] for e in run.events(kind="verdict")]
    assert verdicts == ["ship it # today"]
    sql = ip.run_cell(
        "%%lab_sql   # the verdicts, with their notes\nselect payload->>'note' as note from events "
        "where run_id = $run and kind = 'verdict'",
        cell_id="comment-sql",
    )
    assert sql.success and sql.result.rows == [("ship it # today",)]
    with pytest.raises(UsageError, match=r"%lab step takes \[N\], got '2 3'"):
        lab_magic(ip, "step 2 3  # a comment does not hide a real mistake")


def test_missing_node_hint_names_the_variable(ip: Any) -> None:
    """Issue 15 item 5: the hint says what the user can type (`@mail.node`), not the graph's name."""
    run_cells(ip, [COUNTER_CELLS[0].replace('g = lab.graph("counter"', 'mail = lab.graph("consent"')], "hint")
    ip.run_cell(COUNTER_CELLS[1].replace("@g.node", "@mail.node"), cell_id="hint-inc")
    mail = ip.user_ns["mail"]
    assert mail.decorator == "@mail.node"
    from lab.render.spec import spec_from_declarations

    caption = spec_from_declarations(mail).caption
    assert "declare with @mail.node" in caption and "@consent.node" not in caption
    with pytest.raises(LabError, match=r"declare it with @mail\.node or fix the name"):
        mail.build()
    ip.run_cell(
        "@dataclass\nclass Loose(BaseNode[State, None, int]):\n    async def run(self, ctx) -> End[int]:\n"
        "        return End(0)",
        cell_id="hint-loose",
    )
    with pytest.raises(
        UsageError,
        match=r"Loose is not declared in any graph of lab \S+; decorate its class with @mail\.node",
    ):
        lab_magic(ip, "start Loose()")
    ip.user_ns.pop("mail")
    ip.user_ns.pop("Loose")
    assert mail.decorator == "@g.node (g = lab.graph('consent', ...))"  # no variable: say what g is


def test_a_second_lab_on_the_same_path_keeps_the_graphs(ip: Any, tmp_path: Any) -> None:
    """Issue 15 item 4: `lab = Lab()` again (same path) keeps the graphs the magics act on; a cell
    that makes another lab current says so in one line."""
    path = os.fspath(tmp_path / "lab.duckdb")
    cells = [c.replace("Lab(':memory:')", f"Lab({path!r})") for c in COUNTER_CELLS]
    run_cells(ip, cells, prefix="again")
    first = ip.user_ns["lab"]
    again = ip.run_cell(f"lab = Lab({path!r})", cell_id="again-lab")
    assert again.success
    second = ip.user_ns["lab"]
    assert second.store is first.store and "counter" in second.graphs
    run = lab_magic(ip, "start Inc(by=2), state=State()")  # Inc is still declared
    assert run.graph is first.graphs["counter"]
    other_path = os.fspath(tmp_path / "other.duckdb")
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ip.run_cell(f"other = Lab({other_path!r})", cell_id="again-other")
        ip.run_cell("x = 1", cell_id="again-quiet")  # no change, no line
    lines = out.getvalue().splitlines()
    assert lines == [
        f"%lab now acts on lab {other_path} (graphs: none declared yet); before this cell: {path}"
    ]
    with pytest.raises(UsageError, match="Inc is not declared in any graph"):
        lab_magic(ip, "start Inc()")  # the other lab has no graphs: the message above said so
    ip.user_ns.pop("other").close()
    ip.user_ns.pop("x", None)
    second.close()
