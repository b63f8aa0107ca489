"""Smoke test of the reader row of `python -m lab.bench` (issue 14): it runs and reports; timing is never asserted."""

from __future__ import annotations

import os

from lab.bench import readers as bench_readers


def test_a_reader_in_a_second_process_reports_while_the_first_steps(tmp_path):
    report = bench_readers.run_reader_benchmark(checkpoints=200, reads=3, workdir=os.fspath(tmp_path))
    assert report.error is None, report.error
    assert len(report.runs_ms) == len(report.state_ms) == len(report.pair_ms) == 3
    assert all(ms > 0 for ms in report.pair_ms)
    assert report.writer_stations > 0  # the first process stepped meanwhile
    table = bench_readers.readers_markdown(report)
    assert "reader in a second process" in table and "run of 200 checkpoints" in table
    assert table.startswith("| reader") and table.count("\n| ") == 3  # `lab.runs()`, `state_at`, both
