"""Smoke test of `python -m lab.bench.share`: every measure runs and reports; timing is never asserted.

The size is a property of the file, not a timing: a page of a short run must stay inside the
issue's budget per checkpoint (20 MB for 10,000 checkpoints: 2 kB each).
"""

from __future__ import annotations

import re

from lab.bench import share as bench_share


def test_share_benchmark_reports_every_measure(capsys):
    assert bench_share.main(["--checkpoints", "301", "--repeat", "1", "--parallel-rounds", "20"]) == 0
    out = capsys.readouterr().out
    assert "failed" not in out, out
    for name in ("run.export_html (301 checkpoints)", "its file size", "lab.compare(run, fork)", "lab.export_html([run, fork])"):
        assert f"| {name}" in out, out
    assert "| run.export_html (parallel: 43 super-steps, a map of 8 in a loop)" in out, out
    size_mb = float(re.search(r"\| its file size \| ([\d.]+) MB", out).group(1))
    assert size_mb < 20 * 301 / 10_000, out


def test_share_benchmark_reports_each_parallel_size(capsys):
    """`--parallel-rounds 10 20`: one row per size (the growth of a looping parallel run's export)."""
    assert bench_share.main(["--checkpoints", "101", "--repeat", "1", "--parallel-rounds", "10", "20"]) == 0
    out = capsys.readouterr().out
    assert "failed" not in out, out
    for steps in (23, 43):
        assert f"| run.export_html (parallel: {steps} super-steps, a map of 8 in a loop)" in out, out
        assert f"| of which: reading its {steps} checkpoints (`history`)" in out, out
    # the stored `next` a checkpoint (bytes, not time): the same largest checkpoint at 10 and 20 rounds
    largest = [int(m.replace(",", "")) for m in re.findall(r"\| stored `next` a checkpoint, mean / largest \| [\d,]+ / ([\d,]+) bytes", out)]
    assert len(largest) == 2 and largest[1] <= largest[0] + 16, out
