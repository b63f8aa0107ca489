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
