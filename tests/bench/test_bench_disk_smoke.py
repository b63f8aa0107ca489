"""`python -m lab.bench.disk` (the disk's own cost of a durable record) runs and prints its table; no timing is checked."""

from __future__ import annotations

from lab.bench import disk


def test_disk_prints_each_way_the_floor_and_the_best_ratio(tmp_path, capsys):
    assert disk.main(["--dir", str(tmp_path), "--records", "5", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "| native floor, per station (rounds: " in out
    for row in (
        "append + fdatasync", "in place + fdatasync", "in place, O_DSYNC", "in place, fstat first", "in place, statx first"
    ):
        assert f"| {row} |" in out
    assert "station can be under" in out and "p10" in out
    assert list(tmp_path.iterdir()) == [], "the probe file was left behind"
