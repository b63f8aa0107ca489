"""Smoke test of `python -m lab.bench.render`: every measure runs and reports; timing is never asserted."""

from __future__ import annotations

from lab.bench import render as bench_render


def test_render_benchmark_reports_every_measure(capsys):
    assert bench_render.main(["--stations", "8", "--steps", "5", "--layouts", "1", "--width", "4"]) == 0
    out = capsys.readouterr().out
    for name in (
        "first layout (dot)",
        "restyle + push one step (GraphView)",
        "RunWidget.refresh() after a step",
        "restyle + push one super-step (map of 4)",
        "RunWidget.refresh() after a super-step (map of 4, context)",
    ):
        assert f"| {name}" in out, out
    assert out.startswith("8 stations;")
