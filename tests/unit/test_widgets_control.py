"""The run widget shows run control (issue 13 requirement 8): the step limit and timeout in the
status line, each failed try of a retry policy in the event log with its try number, progress."""

from __future__ import annotations

from lab import Lab, Retry
from lab.widgets import RunWidget
from tests.integration.control_graphs import Laps, Prep, Script, Working, flaky


def test_status_line_shows_the_bounds_and_the_log_shows_tries_and_progress() -> None:
    lab = Lab(":memory:")
    run = flaky(lab, retry=Retry(max_attempts=2)).start(Prep(), state=Laps(), deps=Script([ValueError("flaky")]), timeout=5)
    w = RunWidget(run)
    assert "step limit 100 · timeout 5 s" in w.header.value
    run.run()
    w.refresh()
    assert "try 1 of 2 failed: builtins.ValueError: flaky" in w.events_panel.value
    g = lab.graph("working", state_type=Laps, output_type=int)
    g.node(Working)
    other = g.start(Working(), state=Laps(), step_limit=None)
    other.run()
    w2 = RunWidget(other)
    assert "step limit none" in w2.header.value and "progress 0.5" in w2.events_panel.value
    lab.close()


def test_a_subgraphs_child_is_nested_in_the_parents_view_collapsed_until_opened() -> None:
    """Issue 13 requirement 6: "The run view shows the child nested (expand/collapse)." The child's
    view is built when it is opened, and shows the child run itself."""
    from tests.integration.control_graphs import CHILD, Prepare, child_graph, parent_graph

    lab = Lab(":memory:")
    CHILD["graph"] = child_graph(lab)
    parent = parent_graph(lab).start(Prepare(), state=Laps())
    w = RunWidget(parent)
    assert w.subgraph_views.layout.display == "none" and not w.subgraph_views.children
    parent.run()  # the child parks on its interrupt, and the parent with it
    w.refresh()
    (child_id,) = [e.payload["child_run"] for e in parent.events("subgraph")]
    (box,) = w.subgraph_views.children
    assert w.subgraph_views.layout.display is None and w.subgraph_views.selected_index is None
    assert child_id in w.subgraph_views.get_title(0) and "Delegate" in w.subgraph_views.get_title(0)
    assert not box.children  # collapsed: nothing built yet
    w.subgraph_views.selected_index = 0
    (inner,) = box.children
    assert isinstance(inner, RunWidget) and inner.run.id == child_id and inner.run.status == "waiting"
    assert RunWidget(parent).subgraph_views.get_title(0) == w.subgraph_views.get_title(0)  # a reopened view finds it
    lab.close()
