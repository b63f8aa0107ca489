"""Smoke test of `python -m lab.bench`: the variants run and report; timing is never asserted."""

from __future__ import annotations

import os

from lab.bench import cli, serial
from lab.bench.profile import profile_lab_step


def test_benchmark_reports_every_variant(tmp_path):
    report = serial.run_benchmark(visits=50, repeat=1, warmup=0, workdir=os.fspath(tmp_path))

    assert list(report.variants) == [v.key for v in serial.VARIANTS]
    for key, v in report.variants.items():
        assert v.error is None, f"{key}: {v.error}"
        assert len(v.seconds) == 1, key
        assert all(s > 0 for s in v.seconds), key
        assert v.outputs == [50], key
        assert v.median is not None and v.median > 0
        assert v.minimum is not None and v.minimum > 0
        assert report.ratio(key) is not None
    for key in ("lab_step", "lab_batch", "lab_memory", "lab_step_async", "lab_step_fsync"):
        assert report.variants[key].target is not None
        assert report.met(key) in (True, False)
        assert len(report.variants[key].folded) == 1
    assert report.ratio("floor") == 1.0
    assert report.sync_us is not None and report.sync_us > 0
    assert set(report.machine) >= {"platform", "cpus", "python", "pydantic-graph", "duckdb"}

    table = serial.to_markdown(report)
    assert table.count("\n| ") == len(serial.VARIANTS) + 1  # header row and one row per variant
    for v in serial.VARIANTS:
        assert v.label in table


def test_only_keeps_the_floor(tmp_path):
    report = serial.run_benchmark(
        visits=10, repeat=1, warmup=0, only=["lab_batch"], workdir=os.fspath(tmp_path)
    )
    assert list(report.variants) == ["floor", "lab_batch"]
    assert report.variants["lab_batch"].outputs == [10]


def test_main_exits_zero(capsys):
    assert cli.main(["--visits", "10", "--repeat", "1", "--warmup", "0", "--only", "lab_memory"]) == 0
    out = capsys.readouterr().out
    assert "| variant |" in out and "Machine:" in out


def test_profile_names_lab_code():
    text = profile_lab_step(visits=20, runs=1, top=5)
    assert "functions in" in text and "lab/run.py" in text


def test_profile_sees_the_engine_and_the_store():
    """issue 26 (benchmarks package): the drive runs on the lab's loop thread, so the profile is
    taken there; profiled from the caller's thread it saw only the hand-over, never the engine."""
    text = profile_lab_step(visits=20, runs=1, top=200)
    lab_rows = text.split("== functions in", 1)[1]
    assert "lab/engine/" in lab_rows and "lab/store/" in lab_rows
    assert "lab/bench/" not in lab_rows


def test_targets_are_the_issue_27_numbers_and_a_miss_prints_no():
    """issue 27 item 2: the target column carries the product's targets (step 1.25x, batch 1.15x,
    fsync 2.5x the floor), and a row over its target prints "no" (one under it, "yes")."""
    targets = {v.key: v.target for v in serial.VARIANTS}
    assert targets["lab_step"] == 1.25 and targets["lab_memory"] == 1.25 and targets["lab_step_async"] == 1.25
    assert targets["lab_batch"] == 1.15
    assert targets["lab_step_fsync"] == 2.5

    def result(key: str, us: float) -> serial.VariantResult:
        v = next(v for v in serial.VARIANTS if v.key == key)
        return serial.VariantResult(key, v.label, 1000, v.target, seconds=[us * 1000 / 1e6], outputs=[1000])

    report = serial.BenchReport(
        visits=1000,
        repeat=1,
        warmup=0,
        variants={
            "floor": result("floor", 100.0),
            "lab_step": result("lab_step", 126.0),  # 1.26x: over 1.25x
            "lab_batch": result("lab_batch", 114.0),  # 1.14x: under 1.15x
            "lab_step_fsync": result("lab_step_fsync", 251.0),  # 2.51x: over 2.5x
        },
        machine=serial.machine_info(),
    )
    rows = {line.split(" | ")[0].lstrip("| "): line for line in serial.to_markdown(report).splitlines() if line.startswith("| lab")}
    step, batch, fsync = (rows[report.variants[k].label] for k in ("lab_step", "lab_batch", "lab_step_fsync"))
    assert "| ≤ 1.25x | **no** |" in step and "1.26x" in step
    assert "| ≤ 1.15x | yes |" in batch and "1.14x" in batch
    assert "| ≤ 2.5x | **no** |" in fsync and "2.51x" in fsync
