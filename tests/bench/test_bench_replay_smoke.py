"""Smoke test of `python -m lab.bench.replay` (lab/bench/replay.py): its runs happen and report; timing is never asserted.

Scenarios: one process's rounds time every variant once a round, pair `lab` with `lab_recorded` each round and
the adjacent stations of each `mixed` run; the report survives the worker's JSON round trip and prints a
verdict, yes or no, from wall clock."""

from __future__ import annotations

import dataclasses
import json

from lab.bench.replay import (
    VARIANTS,
    ProcessTimes,
    ReplayBenchReport,
    adjacent_ratios,
    replay_markdown,
    time_process,
)


def test_one_process_times_every_variant_and_the_mixed_runs_stations() -> None:
    t = time_process(visits=6, repeat=2, warmup=0, seed=0)
    assert all(len(t.times[v]) == 2 and all(s > 0 for s in t.times[v]) for v in VARIANTS)
    assert len(t.pairs) == len(t.cpu_pairs) == 2
    assert (
        len(t.stations) == 2 * 2
    )  # 6 stations: 5 timed (the last has no next start), pairs (0, 1) and (2, 3)
    back = ProcessTimes(**json.loads(json.dumps(dataclasses.asdict(t))))  # what a worker process prints
    report = ReplayBenchReport(6, [back, back])
    text = replay_markdown(report)
    assert all(f"| {v} |" in text for v in VARIANTS)
    assert report.recording_cost == t.cost
    verdict = text.splitlines()[-1]
    assert verdict.startswith("recording's cost on wall clock") and verdict.endswith(("yes)", "no)"))


def test_adjacent_stations_pair_the_recorded_one_with_its_plain_neighbour() -> None:
    starts = [0.0, 2.0, 3.0, 5.0, 6.0, 9.0]  # stations took 2, 1, 2, 1, 3 (the last start has no end)
    assert adjacent_ratios(starts, recorded_first=True) == [
        1.0,
        1.0,
    ]  # 2 / 1 - 1 twice; the fifth has no neighbour
    assert adjacent_ratios(starts, recorded_first=False) == [-0.5, -0.5]
