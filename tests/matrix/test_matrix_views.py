"""Every kind × the views column (issue 26, done-when 4): the run widget, the drawing, `%lab`.

For each kind in `cases.KINDS` (node classes, steps, adopted, parallel map+join, the super-step
model, a subroutine, a workflow, a delegated agent), the same code checks:

- the run widget of a plain run shows the graph laid out by the real Graphviz `dot`, with the
  stations the run goes to next lit; its Step button takes the run to its end, one boundary a
  click, and the drawing follows every step; a gate run parks with the consent panel shown and
  the gate drawn as parked, and the panel's Approve takes the run on to its end;
- the graph draws: DOT that the real `dot` lays out (every node and edge of the drawing),
  the SVG the notebook shows, and Mermaid text with an edge line for every edge;
- the magics, in a real IPython `InteractiveShell` in this process: `%lab start GRAPH, ...`
  starts the kind's graph through its handle's own `start` with the case's standard input,
  `%lab step` and `%lab run` take it to its end, and `%lab approve` answers a gate.

The run widget and the magics drive the same runs a cell would (tests/unit/test_widgets.py and
tests/unit/test_kernel_ext.py test each view in depth on node classes).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

import lab.lab as lab_module
from lab import Lab, Run, current_run
from lab.render import END, START, run_dot, spec_for
from lab.widgets import RunWidget

from .cases import KINDS, case_named

IPython = pytest.importorskip("IPython")
from IPython.testing import globalipapp  # noqa: E402

pytestmark = pytest.mark.parametrize("kind", KINDS)

MOST_STEPS = 60
"""More boundaries than any plain or gate run of a case takes (a kind looping forever fails)."""


@pytest.fixture(scope="module", autouse=True)
def real_dot() -> None:
    assert shutil.which("dot"), "the views column draws with the real Graphviz `dot`; install graphviz"


@pytest.fixture
def lab() -> Iterator[Lab]:
    lab = Lab(":memory:")
    yield lab
    if not lab.store.closed:
        lab.close()


def lit(svg: str) -> set[str]:
    """The stations drawn lit as where the run goes next."""
    return set(re.findall(r'<g class="node [^"]*gl-current[^"]*" data-station="([^"]*)"', svg))


def parked(svg: str) -> set[str]:
    return set(re.findall(r'<g class="node [^"]*gl-parked[^"]*" data-station="([^"]*)"', svg))


def laid_out_by_dot(svg: str) -> bool:
    """SVG as Graphviz `dot` writes it: a scaled `graph` group with a viewBox (not a fallback table)."""
    return "<svg " in svg and "viewBox=" in svg and re.search(r'<g [^>]*class="graph"', svg) is not None


def next_lit(run: Run) -> set[str]:
    """What the widget should light after a step: the next stations, or End once the run is done."""
    return {"__end__"} if run.status == "done" else set(run.next_stations)


# -- (a) the run widget ---------------------------------------------------------------------


def test_run_widget_steps_a_plain_run_to_done(lab, kind):
    """The widget draws the graph with dot, lights the next station, and its Step button ends the run."""
    case = case_named(kind)
    run = case.start(case.build(lab, "plain"))
    w = RunWidget(run)
    assert laid_out_by_dot(w.graph.value), (kind, w.graph.value[:300])
    assert run.next_stations and lit(w.graph.value) == set(run.next_stations), (kind, run.next_stations)
    clicks = 0
    while run.status != "done":
        assert not w.step_btn.disabled, (kind, run.status, w.step_btn.tooltip, run.error)
        w.step_btn.click()
        assert w.wait(30), (kind, "the Step did not end")
        clicks += 1
        assert clicks <= MOST_STEPS and run.status in ("running", "created", "done"), (
            kind,
            run.status,
            run.error,
        )
        assert lit(w.graph.value) == next_lit(run), (kind, clicks, run.next_stations, lit(w.graph.value))
        assert w.slider.max == len(run.history()) - 1
    assert clicks >= 2 and run.output == case.expected("plain"), (kind, clicks, run.output)
    assert w.step_btn.disabled and "the run is done" in w.step_btn.tooltip


def test_run_widget_consent_panel_approves_a_gate(lab, kind):
    """A gate run parks with the consent panel shown and the gate drawn parked; Approve ends it."""
    case = case_named(kind)
    run = case.start(case.build(lab, "gate"))
    w = RunWidget(run)
    assert w.consent.layout.display == "none"
    w.run_btn.click()
    assert w.wait(30), (kind, "the Run did not end")
    assert run.status == "waiting" and run.wait.kind == "consent", (kind, run.status, run.error)
    gate = run.wait.node_id
    assert w.consent.layout.display is None and w.approve_btn.layout.display != "none"
    assert parked(w.graph.value) == {gate}, (kind, gate, parked(w.graph.value))
    assert w.step_btn.disabled and "Approve or Deny" in w.step_btn.tooltip
    w.note.value = "looks right"
    w.approve_btn.click()
    assert w.wait(30), (kind, "the Run after Approve did not end")
    assert (run.status, run.output) == ("done", case.expected("gate")), (kind, run.status, run.error)
    assert w.consent.layout.display == "none" and lit(w.graph.value) == {"__end__"}
    verdicts = [e for e in run.events("verdict") if e.node_id == gate]
    assert [(e.payload.get("approved"), e.payload.get("note")) for e in verdicts] == [
        (True, "looks right")
    ], kind


# -- (b) the drawing ------------------------------------------------------------------------


def test_graph_draws_as_dot_svg_and_mermaid(lab, kind):
    """DOT laid out by the real `dot` has every drawn node and edge; so do the SVG and Mermaid."""
    case = case_named(kind)
    g = case.build(lab, "plain")
    spec = spec_for(g)
    assert not spec.caption, (kind, spec.caption)  # drawn from the pinned revision, not a fallback
    stations = spec.station_ids
    assert len(stations) >= 2, (kind, stations)
    dot_svg = run_dot(g.render())
    assert laid_out_by_dot(dot_svg)
    assert dot_svg.count('class="node"') == len(spec.nodes) and dot_svg.count('class="edge"') == len(
        spec.edges
    )
    shown = g.svg()
    assert laid_out_by_dot(shown)
    assert set(re.findall(r'data-station="([^"]*)"', shown)) >= set(stations), kind
    mermaid = g.mermaid()
    assert mermaid.startswith("stateDiagram-v2\n") and "[*] --> " in mermaid and "--> [*]" in mermaid
    drawn_edges = [e for e in spec.edges if (e.src, e.dst) != (START, END)]
    assert len(re.findall(r"^  \S+ --> \S+", mermaid, re.M)) == len(drawn_edges), (kind, mermaid)
    for station in stations:
        assert station in mermaid or re.fullmatch(r"[A-Za-z_]\w*", station) is None, (kind, station)


# -- (c) the magics -------------------------------------------------------------------------


@pytest.fixture
def ip(lab) -> Iterator[Any]:
    """IPython's shared test shell with the extension loaded; `lab` is the current lab."""
    globalipapp.start_ipython()
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "kernel_ext")
    assert lab_module.current_lab() is lab
    yield shell
    shell.run_line_magic("unload_ext", "kernel_ext")
    for name in ("G", "CALL"):
        shell.user_ns.pop(name, None)


def start_line(ip: Any, case: Any, graph: Any) -> str:
    """`%lab start G, **CALL` with the kind's handle and its standard input in the notebook.

    The protocol has no separate start arguments; `subgraph_call` is the keyword form of what
    `case.start` passes to the graph's `start`.
    """
    ip.user_ns["G"] = graph
    ip.user_ns["CALL"] = dict(case.subgraph_call(graph))
    return "start G, **CALL"


def test_magics_start_step_and_run(lab, ip, kind):
    """`%lab start GRAPH, ...` starts the kind's graph; `%lab step` and `%lab run` end the run.

    Issue 26 (done-when 4, the `%lab start` cell): `%lab start` could not start a workflow or a
    subroutine, and took no graph handle for any kind.
    """
    case = case_named(kind)
    g = case.build(lab, "plain")
    run = ip.run_line_magic("lab", start_line(ip, case, g))
    assert isinstance(run, Run) and current_run() is run and run.graph is g, kind
    steps = ip.run_line_magic("lab", "step")
    assert len(steps) == 1 and run.head is not None and run.head >= 1, (kind, run.status, run.error)
    assert run.status != "done", kind
    done = ip.run_line_magic("lab", "run")
    assert done is run and (run.status, run.output) == ("done", case.expected("plain")), (kind, run.error)
    assert ip.run_line_magic("lab", "graph").spec.name == g.name  # the started graph is current


def test_magics_start_the_current_graph(lab, ip, kind):
    """`%lab graph NAME` then `%lab start KEYWORDS...` starts that graph with its own start's keywords.

    Issue 26 (done-when 4, the `%lab start` cell): a workflow or a subroutine could not be started.
    """
    case = case_named(kind)
    g = case.build(lab, "plain")
    start_line(ip, case, g)
    ip.run_line_magic("lab", f"graph {g.name}")
    run = ip.run_line_magic("lab", "start **CALL")
    assert isinstance(run, Run) and current_run() is run and run.graph is g, kind
    ip.run_line_magic("lab", "step 2")
    assert run.head is not None and run.head >= 2, (kind, run.status, run.error)
    ip.run_line_magic("lab", "run")
    assert (run.status, run.output) == ("done", case.expected("plain")), (kind, run.error)


def test_magics_approve_a_parked_gate(lab, ip, kind):
    """`%lab run` parks a gate run; `%lab approve` answers it and `%lab run` ends it."""
    case = case_named(kind)
    g = case.build(lab, "gate")
    run = ip.run_line_magic("lab", start_line(ip, case, g))
    ip.run_line_magic("lab", "run")
    assert run.status == "waiting" and run.wait.kind == "consent", (kind, run.status, run.error)
    ip.run_line_magic("lab", "approve fine")
    ip.run_line_magic("lab", "run")
    assert (run.status, run.output) == ("done", case.expected("gate")), (kind, run.status, run.error)
