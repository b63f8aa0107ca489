"""Smoke test of `python -m lab.bench.agents`: it runs every variant and reports; timing is never asserted."""

from __future__ import annotations

from lab.bench.agents import agents_markdown, run_agent_benchmark


def test_agent_benchmark_reports_the_agent_and_the_station():
    report = run_agent_benchmark(repeat=1, warmup=0, subprocess_repeat=0)
    assert len(report.times["agent"]) == len(report.times["station_task"]) == 1
    assert report.ratio("station_task") > 0
    table = agents_markdown(report)
    assert "| station_task | 1 |" in table and "station_subprocess" not in table
    row = next(line for line in table.splitlines() if line.startswith("| station_task"))
    assert "agent + 10 =" in row and row.rstrip(" |").endswith(("yes", "no"))  # the target, and whether it is met
