"""Smoke test of the parallel table of `python -m lab.bench`: it runs and reports; timing is never asserted."""

from __future__ import annotations

import os

from lab.bench import cli
from lab.bench.parallel import TARGET, WIDTH, parallel_markdown, run_parallel_benchmark


def test_parallel_benchmark_reports_both_variants(tmp_path):
    report = run_parallel_benchmark(repeat=1, warmup=0, workdir=os.fspath(tmp_path))
    assert report.error is None
    assert report.width == WIDTH == 16
    assert len(report.native) == len(report.lab) == 1
    assert report.ratio is not None and report.ratio > 0
    assert report.met in (True, False)
    table = parallel_markdown(report)
    assert "16-wide map + join" in table and f"≤ {TARGET:g}x" in table


def test_main_prints_the_parallel_table(capsys):
    assert cli.main(["--repeat", "1", "--warmup", "0", "--only", "parallel"]) == 0
    out = capsys.readouterr().out
    assert "16-wide map + join" in out and "| variant |" in out
