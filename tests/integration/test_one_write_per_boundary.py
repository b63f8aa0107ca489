"""Step durability writes one journal transaction batch per boundary (issue 27 item 1).

A station's settlement rides with the next station's `entered` in one `os.write`, which returns
before that station's code runs; a stop writes it alone before the caller hears of the step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab
from lab.store.boundary import expand
from lab.store.journal import Journal

SEEN: list[tuple[int, list[dict]]] = []
"""What each station found in the journal when its code ran: (its count, the journal's rows)."""
JOURNAL: list[Path] = []


@dataclass
class Tally:
    count: int = 0
    limit: int = 5
    notes: list[str] = field(default_factory=list)


@dataclass
class Visit(BaseNode[Tally, None, int]):
    async def run(self, ctx: GraphRunContext[Tally, None]) -> Visit | End[int]:
        if JOURNAL:
            SEEN.append((ctx.state.count, _rows(JOURNAL[0])))
        ctx.state.count += 1
        if ctx.state.count >= ctx.state.limit:
            return End(ctx.state.count)
        return Visit()


def _rows(path: Path) -> list[dict]:
    """The journal's rows, a boundary row (lab/store/boundary.py) as the checkpoint and events it stands for."""
    return expand([json.loads(line) for line in path.read_bytes().splitlines() if line.strip()])


def _lab(tmp_path: Path) -> tuple[Lab, Any]:
    lab = Lab(tmp_path / "lab.duckdb", durability="step")
    lab.store.fold_every = 1_000_000  # keep every row in the journal, where the test reads it
    g = lab.graph("tally", state_type=Tally, output_type=int)
    g.node(Visit)
    return lab, g


def test_a_step_run_makes_one_journal_write_per_boundary(tmp_path, monkeypatch):
    """issue 27 item 1: N stations cost about N journal writes, not 2N (entered + settlement)."""
    writes: list[int] = []
    real = Journal.write

    def counting(self, blob, lines, **kwargs):
        writes.append(lines)
        return real(self, blob, lines, **kwargs)

    lab, g = _lab(tmp_path)
    try:
        run = g.start(Visit(), state=Tally(limit=40))
        monkeypatch.setattr(Journal, "write", counting)
        run.run()
        monkeypatch.undo()
        assert (run.status, run.output) == ("done", 40)
        assert len(writes) <= 40 + 2, f"{len(writes)} journal writes for 40 stations"
        events = lab.events(run.id)
        kinds = [e.kind for e in events]
        assert kinds.count("entered") == kinds.count("settled") == 40
        assert [e.seq for e in events] == list(range(len(events)))
        assert [c.seq for c in run.history()] == list(range(41))
    finally:
        lab.close()


def test_a_station_runs_only_after_its_entered_and_the_previous_settlement_are_written(tmp_path):
    """issue 27 item 1: the piggybacked `entered` is in the journal before the station's code runs,
    and so is the settlement of the station before it (nothing settled is held across user code)."""
    lab, g = _lab(tmp_path)
    SEEN.clear()
    JOURNAL[:] = [Path(str(tmp_path / "lab.duckdb") + ".journal")]
    try:
        run = g.start(Visit(), state=Tally(limit=6)).run()
        assert run.output == 6 and len(SEEN) == 6
        for count, rows in SEEN:
            events = [r for r in rows if r.get("t") == "ev" and r["run_id"] == run.id]
            assert events[-1]["kind"] == "entered"  # its own attempt, already written
            cps = [r["seq"] for r in rows if r.get("t") == "cp" and r["run_id"] == run.id]
            assert max(cps) == count  # the checkpoint its state comes from is written
            settled = [e for e in events if e["kind"] == "settled"]
            assert len(settled) == count
            assert rows[-1].get("end") is True  # the journal ends with a complete transaction
    finally:
        JOURNAL.clear()
        lab.close()


def test_a_step_returns_with_its_settlement_written(tmp_path):
    """issue 27 item 1: a settlement held for the next `entered` is written when the engine stops."""
    lab, g = _lab(tmp_path)
    journal = Path(str(tmp_path / "lab.duckdb") + ".journal")
    try:
        run = g.start(Visit(), state=Tally(limit=5))
        for expected in range(1, 4):
            result = run.step()
            assert result.seq == expected
            rows = _rows(journal)
            assert max(r["seq"] for r in rows if r.get("t") == "cp" and r["run_id"] == run.id) == expected
            kinds = [r["kind"] for r in rows if r.get("t") == "ev" and r["run_id"] == run.id]
            assert kinds[-1] == "settled" and kinds.count("entered") == kinds.count("settled") == expected
    finally:
        lab.close()
