"""How often the journal file is checked (an `fstat`) inside a running drive, and what that guarantees.

Scenarios (`run.run()` drives 20 stations; `_monotonic`, the journal's clock, stands still or moves
a second a read):
- with no time passing, a drive checks the file at its first write and its last only: its
  boundaries (`hot` writes) are checked once `check_every` passed since the last check;
- with the clock moving, every boundary is checked, as every write was before;
- a station that deletes the journal: the call raises `StoreError` naming the deletion, refused
  by the call's last write at the latest (clock still) or by the boundary right after the
  deleting station (clock moving); either way the head the run reports is the head the store
  holds when opened again (what went to the deleted file before the refusal is folded on close).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, StoreError
from lab.store import journal as journal_module

DOOMED: list[Path] = []
"""The journal the station at `delete_at` deletes."""


@dataclass
class Count:
    n: int = 0
    limit: int = 20
    delete_at: int = 5


@dataclass
class Tick(BaseNode[Count, None, int]):
    async def run(self, ctx: GraphRunContext[Count, None]) -> Tick | End[int]:
        ctx.state.n += 1
        if ctx.state.n == ctx.state.delete_at and DOOMED:
            DOOMED.pop().unlink()
        return End(ctx.state.n) if ctx.state.n >= ctx.state.limit else Tick()


def _drive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: Any, *, delete: bool) -> tuple[Any, int, int]:
    """Run 20 stations on `clock`, the 5th deleting the journal if `delete`: (run, head stored, `fstat` calls)."""
    db = tmp_path / "lab.duckdb"
    lab = Lab(db)
    g = lab.graph("tick", state_type=Count, output_type=int)
    g.node(Tick)
    run = g.start(Tick(), state=Count())
    checks: list[int] = []
    fstat = os.fstat

    def counting(fd: int) -> os.stat_result:
        checks.append(fd)
        return fstat(fd)

    monkeypatch.setattr(journal_module, "_monotonic", clock)
    monkeypatch.setattr(os, "fstat", counting)
    DOOMED[:] = [db.with_name(db.name + ".journal")] if delete else []
    try:
        if delete:
            with pytest.raises(StoreError, match="was deleted while the store was open"):
                run.run()
        else:
            run.run()
    finally:
        monkeypatch.undo()
        DOOMED.clear()
    lab.close()  # folds what a deleted file still holds
    with Lab(db) as again:
        stored = again.run(run.id).head_seq
    return run, stored, len(checks)


def _still() -> float:
    return 100.0


def _moving() -> Any:
    ticks = iter(range(1_000_000))
    return lambda: float(next(ticks))


def test_with_no_time_passing_a_drive_checks_only_its_first_and_last_write(tmp_path, monkeypatch):
    run, stored, checks = _drive(tmp_path, monkeypatch, _still, delete=False)
    assert (run.status, run.output, stored) == ("done", 20, 20)
    assert checks == 2, f"{checks} checks of the journal file in a 20-station drive with the clock standing still"


def test_once_check_every_passed_every_boundary_is_checked(tmp_path, monkeypatch):
    run, stored, checks = _drive(tmp_path, monkeypatch, _moving(), delete=False)
    assert (run.status, stored) == ("done", 20)
    assert checks >= 20


def test_a_deletion_in_a_drive_is_refused_by_its_last_write_at_the_latest(tmp_path, monkeypatch):
    run, stored, _ = _drive(tmp_path, monkeypatch, _still, delete=True)
    assert run.status == "failed"
    assert run.head == stored == 19  # the last station's settlement, the call's last write, was refused


def test_a_deletion_is_refused_by_the_next_boundary_once_check_every_passed(tmp_path, monkeypatch):
    run, stored, _ = _drive(tmp_path, monkeypatch, _moving(), delete=True)
    assert run.status == "failed"
    assert run.head == stored == 4  # the deleting station's settlement, the next write, was refused
