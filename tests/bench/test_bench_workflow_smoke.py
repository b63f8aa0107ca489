"""Smoke test of `python -m lab.bench.workflow`: every loop length runs and is judged; timing is never asserted."""

from __future__ import annotations

import re

from lab.bench import workflow as bench_workflow


def test_workflow_benchmark_reports_every_loop_length(capsys):
    assert bench_workflow.main(["--loops", "3", "12", "--runs", "1"]) == 0
    out = capsys.readouterr().out
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\| ([\d,]+) \|.*$", out, re.M)}
    assert set(rows) == {3, 12}, out
    assert rows[3].rstrip().endswith("|  |")  # the shortest loop is the reference, not judged
    assert re.search(r"\| (yes|\*\*no\*\*) \|$", rows[12]), rows[12]
