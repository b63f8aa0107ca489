"""Smoke test of `python -m lab.bench.evaluate` (it needs the evals extra, so it lives here): every row
runs and reports, the Ray one on the session's Ray; timing is never asserted."""

from __future__ import annotations

from lab.bench import evaluate as bench_evaluate


def test_evaluate_benchmark_reports_every_row(capsys, ray_session: str) -> None:
    assert bench_evaluate.main(["--cases", "6", "--stations", "3"]) == 0
    out = capsys.readouterr().out
    for name in ("raw", "lab_here", "lab_ray_2"):
        assert f"| {name} |" in out and "failed:" not in out, out
    assert "Target: Ray with 2 workers beats one process" in out and out.rstrip().endswith((": yes", ": no"))
