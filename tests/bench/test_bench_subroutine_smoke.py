"""Smoke test of `python -m lab.bench.subroutine`: every row runs and reports; timing is never asserted."""

from __future__ import annotations

from lab.bench import subroutine as bench_subroutine


def test_subroutine_benchmark_reports_every_row(capsys):
    assert bench_subroutine.main(["--visits", "4", "--runs", "2", "--workflow", "1"]) == 0
    out = capsys.readouterr().out
    for name in (
        "raw pydantic-graph (per station)",
        "lab graph (@g.node), DuckDB file (per station)",
        "subroutine, DuckDB file (per station)",
        "in-process Subroutine call (per call)",
        "Workflow call (child process) (per call)",
    ):
        assert f"| {name}" in out, out
