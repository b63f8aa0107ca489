"""`%lab` and `%%lab_sql`: short commands on the current lab and run (see docs/magics.md).

The magics are a thin layer: each subcommand parses its words, asks the `Session` for the lab,
graph or run it acts on, calls the same Python API a cell would, and returns a value that
displays well. Wrong words and refused actions are `UsageError`s: one line, no traceback.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from textwrap import dedent
from typing import Any

import duckdb
from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.utils._process_common import arg_split
from pydantic_graph import BaseNode

from lab import LabGraph, Run
from lab.errors import LabError, RunNotFoundError

from .display import EventList, RunList, SqlResult, StepList
from .session import Session
from .start import (
    INPUT_KEYWORDS,
    NODE_KEYWORDS,
    how_to_start,
    is_graph_handle,
    node_instance,
    start_at_first_node,
    start_graph,
    starts_at_node,
    starts_from_inputs,
)

__all__ = ("LabMagics", "USAGE", "SUBCOMMANDS", "strip_comment")

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "open": ("[PATH]", "open (or create) a lab store and make it current; default .graphlab/lab.duckdb"),
    "graph": ("[NAME]", "show the current graph (NAME makes that graph current)"),
    "runs": ("[GRAPH]", "list the stored runs of the current lab, oldest first"),
    "start": (
        "[NODE_EXPR | GRAPH][, ARGS]",
        "start a run (at a node, or GRAPH.start(ARGS) for any kind); Python evaluated in the notebook",
    ),
    "step": ("[N]", "run N stations (default 1), stopping early at End, a failure or a wait"),
    "run": ("[MAX_STEPS]", "run until End, a failure, a wait, or MAX_STEPS stations"),
    "rewind": ("SEQ", "move the run's head back to checkpoint SEQ (nothing is deleted)"),
    "fork": (
        "[SEQ] [--current]",
        "a new run from checkpoint SEQ (default: head); --current: onto the graph as defined now",
    ),
    "approve": ("[NOTE]", "approve the gate the run is parked at, with an optional note"),
    "deny": ("[NOTE]", "deny the gate the run is parked at, with an optional note"),
    "answer": ("EXPR", "answer the interrupt() the run is parked at with a Python value (run.resume_with)"),
    "grant": ("CAPABILITY [EXPR]", "grant the capability the run waits for, with an optional Python value"),
    "retry": ("", "attempt the failed station again (run.retry())"),
    "cancel": ("", "cancel the run (run.cancel())"),
    "history": ("[--all]", "the run's checkpoints, root to head (--all: every branch)"),
    "diff": ("A B", "state difference of checkpoints A and B (SEQ, or RUN_ID@SEQ for another run)"),
    "events": ("[KIND]", "the run's events in order (KIND filters, e.g. failed)"),
    "export": ("[PATH]", "write the run as one self-contained HTML file (default RUN_ID.html; docs/share.md)"),
    "compare": (
        "A B",
        "two runs or branches side by side (RUN_ID, RUN_ID@SEQ, or SEQ of the current run; docs/share.md)",
    ),
}

USAGE = (
    dedent(
        """\
    %lab SUBCOMMAND [ARGS] [--run ID]

    Acts on the current lab (the one `%lab open` opened, else the last Lab created in this
    kernel) and the current run (the last started, forked or resumed here, in Python or by a
    magic). `--run ID` acts on another run for one command.

    """
    )
    + "\n".join(f"  {name} {args}\n      {text}" for name, (args, text) in SUBCOMMANDS.items())
    + dedent(
        """

    Examples:
      %lab open
      %lab start Inc(by=2), state=State(count=1)
      %lab start wf, user_request="fix the build"
      %lab step 3
      %lab rewind 1
      %lab diff 1 3
      %lab fork 2 --current
      %lab export review.html
      %lab compare run-0192a3b4c5d6-1a2b3c run-0192a3b4c5d7-4d5e6f

    %%lab_sql [--run ID]
      Read-only SQL over the tables graphs, runs, checkpoints, events; `$run` stands for the
      current run's id.
    """
    )
)

_RUN_OPTION = re.compile(r"(?:^|\s)--run(?:=|\s+)(\S+)")
_RUN_REF = re.compile(r"^(?P<run>[^@\s]+)@(?P<seq>-?\d+)$")


def strip_comment(line: str) -> str:
    """`line` without a trailing `# comment`, as Python reads one: a `#` inside quotes is text.

    Users copy lines with their comments (`%lab step 2  # two stations`); IPython hands the
    comment to the magic, so the magic drops it. A quote left open keeps the rest as it is.
    """
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch == "#":
            return line[:i].rstrip()
        elif ch in "'\"":
            quote = ch * 3 if line.startswith(ch * 3, i) else ch
            i += len(quote) - 1
        i += 1
    return line


def _pop_run_option(line: str) -> tuple[str, str | None]:
    found = _RUN_OPTION.findall(line)
    if len(found) > 1:
        raise UsageError("--run is given more than once; name one run")
    if line.rstrip().endswith("--run"):
        raise UsageError("--run needs a run id, e.g. --run run-0192a3b4c5d6-1a2b3c (`%lab runs` lists them)")
    return _RUN_OPTION.sub(" ", line).strip(), (found[0] if found else None)


def _int(word: str, what: str, sub: str) -> int:
    try:
        return int(word)
    except ValueError:
        raise UsageError(f"%lab {sub}: {what} must be a whole number, got {word!r}") from None


def _words(rest: str, sub: str, *, at_most: int, at_least: int = 0) -> list[str]:
    try:
        words = arg_split(rest, posix=True) if rest else []
    except ValueError as exc:  # an unbalanced quote
        raise UsageError(f"%lab {sub}: cannot read {rest!r} ({exc})") from None
    args, usage = SUBCOMMANDS[sub][0], f"%lab {sub} {SUBCOMMANDS[sub][0]}".rstrip()
    if len(words) > at_most:
        raise UsageError(
            f"%lab {sub} takes {'no arguments' if not args else args}, got {' '.join(words)!r}; usage: {usage}"
        )
    if len(words) < at_least:
        raise UsageError(f"%lab {sub} needs {args}; usage: {usage}")
    return words


def _note(rest: str) -> str | None:
    note = rest.strip()
    if len(note) >= 2 and note[0] == note[-1] and note[0] in "'\"":
        note = note[1:-1]
    return note or None


def _collect_args(*args: Any, **kwargs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return args, kwargs


@magics_class
class LabMagics(Magics):
    """`%lab ...` and `%%lab_sql`, bound to one shell and one `Session`."""

    def __init__(self, shell: Any, session: Session):
        super().__init__(shell)
        self.session = session
        self._handlers: dict[str, Callable[[str, str | None], Any]] = {
            name: getattr(self, f"_do_{name}") for name in SUBCOMMANDS
        }

    # -- the magics -------------------------------------------------------------------------

    @line_magic("lab")
    def lab(self, line: str) -> Any:
        """Drive the current lab and run: `%lab --help` lists the subcommands."""
        sub, _, rest = strip_comment(line).strip().partition(" ")
        if sub in ("", "-h", "--help", "help"):
            print(USAGE)
            return None
        if sub not in self._handlers:
            close = difflib.get_close_matches(sub, SUBCOMMANDS, n=1)
            hint = f"did you mean `%lab {close[0]}`? " if close else ""
            raise UsageError(
                f"unknown %lab subcommand {sub!r}; {hint}subcommands: {', '.join(SUBCOMMANDS)} (`%lab --help`)"
            )
        if rest.strip() in ("-h", "--help"):
            args, text = SUBCOMMANDS[sub]
            print(f"%lab {sub} {args}  [--run ID]\n    {text}")
            return None
        rest, run_id = _pop_run_option(rest)
        try:
            return self._handlers[sub](rest, run_id)
        except LabError as exc:
            raise UsageError(f"%lab {sub}: {exc}") from None

    @cell_magic("lab_sql")
    def lab_sql(self, line: str, cell: str) -> SqlResult:
        """Read-only SQL over the current lab; `$run` is the current run's id."""
        rest, run_id = _pop_run_option(strip_comment(line))
        if rest:
            raise UsageError(
                f"%%lab_sql takes only --run ID on its first line, got {rest!r}; the SQL goes in the cell"
            )
        lab = self.session.lab()
        params = None
        if re.search(r"\$run\b", cell):
            params = {"run": self.session.run(run_id).id}
        try:
            return SqlResult(lab.sql(cell, params))  # type: ignore[arg-type]  # named parameters
        except LabError as exc:
            raise UsageError(str(exc)) from None
        except duckdb.Error as exc:  # raised while fetching rows (a failed cast, say)
            raise UsageError(f"SQL error: {str(exc).strip()}") from None

    # -- subcommands ------------------------------------------------------------------------

    def _do_open(self, rest: str, run_id: str | None) -> Any:
        words = _words(rest, "open", at_most=1)
        opened = self.session.open(words[0] if words else None)
        print(f"lab {opened.path}: {len(opened.runs())} stored run(s)")
        return None

    def _do_graph(self, rest: str, run_id: str | None) -> Any:
        words = _words(rest, "graph", at_most=1)
        if run_id is not None and not words:
            g = self.session.run(run_id).graph
        else:
            g = self.session.graph(words[0] if words else None)
        if words:
            self.session.graph_name = g.name
        return _graph_view(g)

    def _do_runs(self, rest: str, run_id: str | None) -> RunList:
        words = _words(rest, "runs", at_most=1)
        return self.session.lab().runs(graph=words[0] if words else None)

    def _do_start(self, rest: str, run_id: str | None) -> Run:
        if run_id is not None:
            raise UsageError("%lab start begins a new run; --run does not apply")
        self.session.lab()  # no lab, no start: say so before evaluating anything
        if not rest:
            g = self.session.graph()
            return start_at_first_node(g) if starts_at_node(g) else g.start()
        if rest.lstrip().startswith("inputs="):
            g = self.session.graph()
            if starts_at_node(g):
                raise UsageError(
                    f"inputs= starts an adopted native graph; graph {g.name!r} is declared with @g.node, so "
                    "start it at a node: `%lab start Inc(by=2), state=State()`"
                )
        args, kwargs = self._eval_args("start", rest, "`%lab start Inc(by=2), state=State()`")
        if args and is_graph_handle(args[0]):  # `%lab start wf, user_request='...'`: any kind
            return self._start_handle(args[0], args[1:], kwargs)
        node = node_instance(args[0]) if args else None
        if isinstance(node, BaseNode):
            g = self._graph_for(node)
            if not starts_at_node(g) and not starts_from_inputs(g):
                raise UsageError(f"graph {g.name!r} does not start at a node; {how_to_start(g)}")
            return self._start_at_node(g, args, kwargs)
        g = self.session.graph()
        if starts_at_node(g):
            return self._start_at_node(g, args, kwargs)  # refuses what is not a node, saying so
        if starts_from_inputs(g):
            if args:
                raise UsageError(f"graph {g.name!r} starts from its inputs: `%lab start inputs=...`")
            return self._start_adopted(g, kwargs)
        return start_graph(g, args, kwargs)  # a workflow, a subroutine, any other kind

    def _start_handle(self, g: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Run:
        """`%lab start GRAPH, ...`: the handle's own start with the rest; GRAPH becomes current."""
        lab = self.session.lab()
        if lab.graphs.get(g.name) is not g:
            raise UsageError(
                f"graph {g.name!r} is not a graph of the current lab {lab.path} "
                f"(graphs: {sorted(lab.graphs) or 'none'}); `%lab open PATH` opens its lab"
            )
        self.session.graph_name = g.name
        return start_graph(g, args, kwargs)

    def _start_at_node(self, g: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Run:
        """`%lab start NODE, state=..., ...` (or `node=NODE`, as `g.start` names it) on the node's graph."""
        if not args and "node" in kwargs:
            kwargs = dict(kwargs)
            args = (kwargs.pop("node"),)
        if len(args) != 1:
            raise UsageError(
                f"%lab start takes one node, then keywords (state=, deps=); got {len(args)} positional value(s). "
                "Example: `%lab start Inc(by=2), state=State()`"
            )
        unknown = sorted(set(kwargs) - set(NODE_KEYWORDS))
        if unknown:
            raise UsageError(f"%lab start accepts the keywords state=, deps=, durability=; not {unknown}")
        node = node_instance(args[0])
        if not isinstance(node, BaseNode):
            raise UsageError(f"%lab start needs a node instance such as `Inc()`, got {node!r}")
        return g.start(node, **kwargs)

    def _start_adopted(self, g: Any, kwargs: dict[str, Any]) -> Run:
        """Start a graph that begins at its start node: adopted, or declared with steps and edges."""
        unknown = sorted(set(kwargs) - set(INPUT_KEYWORDS))
        if unknown:
            raise UsageError(f"%lab start accepts inputs=, state=, deps=, durability=; not {unknown}")
        return g.start(**kwargs)

    def _eval_args(self, sub: str, expr: str, example: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """`expr` as the arguments of a call, evaluated in the notebook's namespace."""
        code = f"__graphlab_args__({expr})"
        try:
            compiled = compile(code, f"<%lab {sub}>", "eval")
        except SyntaxError as exc:
            raise UsageError(
                f"%lab {sub} {expr!r} is not valid Python ({exc.msg}); write it as in a call: {example}"
            ) from None
        try:
            return eval(compiled, self.shell.user_ns, {"__graphlab_args__": _collect_args})  # noqa: S307 - the user's own cell text
        except Exception as exc:
            raise UsageError(f"%lab {sub}: evaluating {expr!r} raised {type(exc).__name__}: {exc}") from None

    def _one_value(self, sub: str, expr: str, example: str) -> Any:
        args, kwargs = self._eval_args(sub, expr, example)
        if len(args) != 1 or kwargs:
            raise UsageError(f"%lab {sub} takes one Python value, e.g. {example}; got {expr!r}")
        return args[0]

    def _graph_for(self, node: BaseNode[Any, Any, Any]) -> LabGraph:
        node_id = type(node).get_node_id()
        lab = self.session.lab()
        graphs = [g for g in lab.graphs.values() if node_id in g.nodes]
        if not graphs:
            declared = [g for g in lab.graphs.values() if isinstance(g, LabGraph)]
            how = (
                " or ".join(g.decorator.split(" (")[0] for g in declared)
                or '@g.node (g = lab.graph("name", ...))'
            )
            raise UsageError(
                f"{node_id} is not declared in any graph of lab {lab.path}; decorate its class with {how} "
                f"(graphs: {sorted(lab.graphs) or 'none'})"
            )
        exact = [g for g in graphs if g.nodes[node_id] is type(node)]
        preferred = [g for g in (exact or graphs) if g.name == self.session.graph_name]
        return (preferred or exact or graphs)[0]

    def _do_step(self, rest: str, run_id: str | None) -> StepList:
        words = _words(rest, "step", at_most=1)
        n = _int(words[0], "N", "step") if words else 1
        if n < 1:
            raise UsageError(f"%lab step N needs N >= 1, got {n}")
        run = self.session.run(run_id)
        steps = []
        for _ in range(n):
            result = run.step()
            steps.append(result)
            if result.outcome != "settled":
                break
        return StepList(steps, run)

    def _do_run(self, rest: str, run_id: str | None) -> Run:
        words = _words(rest, "run", at_most=1)
        max_steps = _int(words[0], "MAX_STEPS", "run") if words else None
        return self.session.run(run_id).run(max_steps=max_steps)

    def _do_rewind(self, rest: str, run_id: str | None) -> Any:
        (word,) = _words(rest, "rewind", at_most=1, at_least=1)
        seq = _int(word, "SEQ", "rewind")
        run = self.session.run(run_id)
        run.rewind(seq)
        print(f"run {run.id}: head is checkpoint {seq}; the next step starts a new branch from it")
        return run.checkpoint(seq)

    def _do_fork(self, rest: str, run_id: str | None) -> Run:
        words = _words(rest, "fork", at_most=2)
        current = "--current" in words
        words = [w for w in words if w != "--current"]
        if len(words) > 1:
            raise UsageError(f"%lab fork takes [SEQ] [--current], got {rest!r}")
        seq = _int(words[0], "SEQ", "fork") if words else None
        parent = self.session.run(run_id)
        child = parent.fork(seq, revision="current" if current else None)
        at = parent.head if seq is None else seq
        print(
            f"forked {child.id} from {parent.id}@{at} onto revision {child.revision}; it is the current run"
        )
        return child

    def _verdict(self, verb: str, rest: str, run_id: str | None) -> Any:
        run = self.session.run(run_id)
        act = getattr(run, verb, None)
        if act is None:
            raise UsageError(f"%lab {verb}: this version of lab has no gates yet (Run.{verb} is missing)")
        note = _note(rest)
        wait = act(note=note)  # refusals (not waiting, another kind of wait) are the run's own errors
        where = f" the {getattr(wait, 'kind', 'consent')} gate at {getattr(wait, 'node_id', '?')}"
        said = f" with note {note!r}" if note else ""
        print(
            f"run {run.id}: {'approved' if verb == 'approve' else 'denied'}{where}{said}; `%lab run` (or `%lab step`) continues it"
        )
        return None

    def _do_approve(self, rest: str, run_id: str | None) -> Any:
        return self._verdict("approve", rest, run_id)

    def _do_deny(self, rest: str, run_id: str | None) -> Any:
        return self._verdict("deny", rest, run_id)

    def _do_answer(self, rest: str, run_id: str | None) -> Any:
        if not rest:
            raise UsageError("%lab answer needs the answer, as Python: `%lab answer 'eu'`")
        value = self._one_value("answer", rest, "`%lab answer 'eu'`")
        run = self.session.run(run_id)
        wait = run.resume_with(value)
        print(
            f"run {run.id}: answered the interrupt at {wait.node_id} with {value!r}; `%lab run` continues it"
        )
        return None

    def _do_grant(self, rest: str, run_id: str | None) -> Any:
        name, _, expr = rest.partition(" ")
        if not name:
            raise UsageError(
                "%lab grant needs the capability's name: `%lab grant gpu` or `%lab grant gpu {'id': 0}`"
            )
        value = self._one_value("grant", expr, "`%lab grant gpu {'id': 0}`") if expr.strip() else None
        run = self.session.run(run_id)
        wait = run.grant(name, value)
        print(f"run {run.id}: granted {name!r} at {wait.node_id}; `%lab run` continues it")
        return None

    def _do_retry(self, rest: str, run_id: str | None) -> StepList:
        _words(rest, "retry", at_most=0)
        run = self.session.run(run_id)
        return StepList([run.retry()], run)

    def _do_cancel(self, rest: str, run_id: str | None) -> Any:
        _words(rest, "cancel", at_most=0)
        run = self.session.run(run_id)
        run.cancel()
        print(f"run {run.id}: {run.status}")
        return None

    def _do_history(self, rest: str, run_id: str | None) -> Any:
        words = _words(rest, "history", at_most=1)
        if words and words != ["--all"]:
            raise UsageError(f"%lab history takes [--all], got {rest!r}")
        return self.session.run(run_id).history(all_branches=bool(words))

    def _do_diff(self, rest: str, run_id: str | None) -> Any:
        a, b = _words(rest, "diff", at_most=2, at_least=2)
        left, right = self._checkpoint_ref(a), self._checkpoint_ref(b)
        if left[0] is None and right[0] is None:
            return self.session.run(run_id).diff(left[1], right[1])
        current = lambda: self.session.run(run_id).id  # noqa: E731
        return self.session.lab().diff((left[0] or current(), left[1]), (right[0] or current(), right[1]))

    def _checkpoint_ref(self, word: str) -> tuple[str | None, int]:
        m = _RUN_REF.match(word)
        if m:
            return m["run"], _int(m["seq"], "SEQ", "diff")
        return None, _int(word, "each side (SEQ or RUN_ID@SEQ)", "diff")

    def _do_events(self, rest: str, run_id: str | None) -> EventList:
        words = _words(rest, "events", at_most=1)
        run = self.session.run(run_id)
        return EventList(run.events(kind=words[0] if words else None), run.id)

    def _do_export(self, rest: str, run_id: str | None) -> Any:
        words = _words(rest, "export", at_most=1)
        run = self.session.run(run_id)
        written = run.export_html(words[0] if words else f"{run.id}.html")
        print(f"wrote {written} ({written.stat().st_size // 1024} KB): one file, opens in any browser, no kernel needed")
        return None

    def _do_compare(self, rest: str, run_id: str | None) -> Any:
        a, b = _words(rest, "compare", at_most=2, at_least=2)
        return self.session.lab().compare(self._branch_ref(a, run_id), self._branch_ref(b, run_id))

    def _branch_ref(self, word: str, run_id: str | None) -> Any:
        """One side of `%lab compare`: a run (its head's branch), or `(run, seq)` for `RUN_ID@SEQ` or `SEQ`."""
        m = _RUN_REF.match(word)
        if m:
            return self._readable(m["run"]), _int(m["seq"], "SEQ", "compare")
        if re.fullmatch(r"-?\d+", word):
            return self.session.run(run_id), int(word)
        if "@" in word:
            raise UsageError(f"%lab compare: {word!r} is not RUN_ID@SEQ (SEQ a whole number), a run id, or a SEQ")
        return self._readable(word)

    def _readable(self, run_id: str) -> Any:
        """The run this kernel holds (its graph's edge labels draw too), else the stored run read alone."""
        lab = self.session.lab()
        live = lab.store.live_runs.get(run_id)
        if live is not None:
            return live
        try:
            return lab.read(run_id)
        except RunNotFoundError:
            raise UsageError(f"%lab compare: no run {run_id!r} in lab {lab.path}; `%lab runs` lists the stored runs") from None


def _graph_view(g: LabGraph) -> Any:
    """The live graph widget when `lab.widgets` provides one, else the graph (SVG or a table)."""
    try:
        from lab.widgets import GraphView  # type: ignore[attr-defined]
    except ImportError:
        return g
    return GraphView(g)
