"""`python -m lab.bench --postgres URL` measures the lab on PostgreSQL in the same run as the
DuckDB rows (the shape only: timing is never asserted)."""

from __future__ import annotations

import os

from lab.bench import serial as bench


def test_the_postgres_row_is_measured_beside_the_duckdb_rows(pg_url: str, tmp_path) -> None:
    report = bench.run_benchmark(
        visits=20, repeat=1, warmup=0, only=["lab_memory"], workdir=os.fspath(tmp_path), postgres=pg_url
    )
    # the DuckDB step row its target is about is measured in the same rounds, asked for or not
    assert list(report.variants) == ["floor", "lab_memory", "lab_step", "lab_postgres"]
    pg = report.variants["lab_postgres"]
    assert pg.error is None and pg.outputs == [20] and report.ratio("lab_postgres") is not None
    ratio = report.target_ratio("lab_postgres")
    assert ratio == pg.median / report.variants["lab_step"].median
    assert report.met("lab_postgres") is (ratio <= 3.0)
    text = bench.to_markdown(report)
    assert "postgresql://" in text
    assert f"`lab_postgres`: {ratio:.2f}x a `lab_step` station" in text
    assert f"target ≤ 3x: {'yes' if ratio <= 3.0 else 'no'}." in text
    # the CPU line: this process's for both rows, and the server's (the test cluster runs on this machine)
    assert len(pg.cpu) == len(pg.server_cpu) == 1 and pg.server_cpu[0] > 0
    assert "CPU per station (medians): `lab_step`" in text and "in its server processes" in text
