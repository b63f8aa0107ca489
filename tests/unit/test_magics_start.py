"""`%lab start` for every kind of graph, and what it refuses (issue 26, done-when 4: "`%lab start`").

Scenarios, on a real IPython test shell in this process:
- a subroutine starts from a positional input through its handle, and bare on the current graph;
  a workflow starts from its keywords on the current graph
- refused on one line naming the graph's own `start` signature: keywords its `start` does not
  take (also ones it passes on to a `start` further down), a station of a subroutine given as
  the node to start at, a graph handle of another lab, a positional value for a graph that
  starts from its inputs
(tests/matrix/test_matrix_views.py starts, steps and runs every kind through the magics.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import lab.lab as lab_module
from lab import Lab, Run, current_run
from tests.matrix.cases import case_named

IPython = pytest.importorskip("IPython")
from IPython.core.error import UsageError  # noqa: E402
from IPython.testing import globalipapp  # noqa: E402


@pytest.fixture
def lab() -> Iterator[Lab]:
    lab = Lab(":memory:")
    yield lab
    if not lab.store.closed:
        lab.close()


@pytest.fixture
def ip(lab: Lab) -> Iterator[Any]:
    globalipapp.start_ipython()
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "kernel_ext")
    assert lab_module.current_lab() is lab
    yield shell
    shell.run_line_magic("unload_ext", "kernel_ext")
    for name in ("sub", "wf", "other", "station", "g"):
        shell.user_ns.pop(name, None)


def magic(ip: Any, line: str) -> Any:
    return ip.run_line_magic("lab", line)


def test_a_subroutine_starts_from_its_input(lab: Lab, ip: Any) -> None:
    """Issue 26 item "`%lab start` cannot start ... a subroutine": its handle, then its input."""
    sub = case_named("subroutine").build(lab, "plain")
    ip.user_ns["sub"] = sub
    run = magic(ip, "start sub, 1")
    assert isinstance(run, Run) and run.graph is sub and current_run() is run
    assert magic(ip, "run").output == 21
    # bare: the current graph (the one just started) as sub.start(), which refuses a missing int
    with pytest.raises(UsageError, match=r"%lab start: node add field 'payload' does not validate"):
        magic(ip, "start")
    assert current_run() is run


def test_a_workflow_starts_from_keywords_on_the_current_graph(lab: Lab, ip: Any) -> None:
    """Issue 26 item "`%lab start` cannot start a workflow": `%lab graph NAME`, then its keywords."""
    case = case_named("workflow")
    wf = case.build(lab, "plain")
    magic(ip, f"graph {wf.name}")
    run = magic(ip, "start variables={'total': 0}")
    assert run.graph is wf and current_run() is run
    assert magic(ip, "run").output == case.expected("plain")


def test_arguments_a_start_cannot_take_are_refused_with_its_signature(lab: Lab, ip: Any) -> None:
    sub = case_named("subroutine").build(lab, "plain")
    wf = case_named("workflow").build(lab, "plain")
    ip.user_ns.update(sub=sub, wf=wf)
    with pytest.raises(
        UsageError, match=r"graph 'subroutine_plain' cannot take these arguments .*start\(input=None"
    ):
        magic(ip, "start sub, 1, 2")
    # wf.start passes **options on to LabGraph.start, which refuses `colour`
    with pytest.raises(UsageError, match=r"graph 'workflow_plain' cannot take these arguments \(.*'colour'"):
        magic(ip, "start wf, colour='red'")
    assert current_run() is None or current_run().graph not in (sub, wf)


def test_a_subroutine_station_is_not_a_node_to_start_at(lab: Lab, ip: Any) -> None:
    sub = case_named("subroutine").build(lab, "plain")
    ip.user_ns["station"] = next(iter(sub.nodes.values()))
    with pytest.raises(
        UsageError, match=r"graph 'subroutine_plain' does not start at a node; start it through its handle"
    ):
        magic(ip, "start station(payload=1)")


def test_a_graph_of_another_lab_is_refused(lab: Lab, ip: Any) -> None:
    ip.user_ns["other"] = case_named("subroutine").build(lab, "plain")
    here = Lab(":memory:")  # now the current lab: `other` belongs to the one before
    try:
        with pytest.raises(UsageError, match=r"graph 'subroutine_plain' is not a graph of the current lab"):
            magic(ip, "start other, 1")
    finally:
        here.close()


def test_a_graph_that_starts_from_inputs_takes_no_positional_value(lab: Lab, ip: Any) -> None:
    g = case_named("steps").build(lab, "plain")
    magic(ip, f"graph {g.name}")
    with pytest.raises(UsageError, match=r"starts from its inputs: `%lab start inputs=...`"):
        magic(ip, "start 4")
