"""The boundary row (`t = 'b'`, lab/store/boundary.py): one journal row for a settlement and the next `entered`.

Scenarios:
- a journal an older lab wrote (a checkpoint, its `settled` event and the next `entered` as three rows) folds
  as it did: the events, checkpoints and run a reader sees;
- a run written today (boundary rows with and without an `entered`, an `entered` alone, the settlement at
  End) folds into exactly the tables that the same journal written as three rows folds into: the DuckDB
  fold's SQL expansion and `expand` (PostgreSQL's write) agree with each other and with the old rows;
- a reader that does not fold (`read_only=True`, the CLI on a store whose writer is gone) sees the
  checkpoints and events of boundary rows still in a journal (it used to see none of them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab
from lab.store.boundary import expand
from lab.store.duckdb_store import open_store

OLD_JOURNAL = [
    '{"t":"run","run_id":"run-01a24ba28deb-bfd801","graph_key":"tally","revision":1,"digest":"9acf617f368546133371ffb526e5fe9f","status":"created","head_seq":0,"durability":"step","output":null,"error":null,"created_at":1796565274.091402,"updated_at":1796565274.091407,"parent_run_id":null,"parent_seq":null,"breakpoints":null,"j":0,"tx":0}',
    '{"t":"cp","run_id":"run-01a24ba28deb-bfd801","seq":0,"parent_seq":null,"status":"created","state":{"count":0},"next":[{"node_id":"Visit","fields":{}}],"output":null,"created_at":1796565274.09143,"counters":null,"j":1,"tx":0}',
    '{"t":"ev","run_id":"run-01a24ba28deb-bfd801","seq":0,"kind":"started","node_id":"Visit","attempt":null,"checkpoint_seq":0,"payload":{"entry":"Visit","revision":1,"durability":"step"},"created_at":1796565274.091439,"j":2,"tx":0}',
    '{"t":"own","run_id":"run-01a24ba28deb-bfd801","pid":21598,"host":"vm","started":1796565271.62,"claimed_at":1796565274.0914724,"j":3,"tx":0,"end":true}',
    '{"t":"ev","run_id":"run-01a24ba28deb-bfd801","seq":1,"kind":"entered","node_id":"Visit","attempt":1,"checkpoint_seq":0,"payload":{},"created_at":1796565274.108848,"j":4,"tx":4}',
    '{"t":"upd","run_id":"run-01a24ba28deb-bfd801","status":"running","head_seq":0,"output":null,"error":null,"updated_at":1796565274.108865,"j":5,"tx":4,"end":true}',
    '{"t":"cp","run_id":"run-01a24ba28deb-bfd801","seq":1,"parent_seq":0,"status":"running","state":{"count":1},"next":[{"node_id":"Visit","fields":{}}],"created_at":1796565274.1095166,"j":6,"tx":6}',
    '{"t":"ev","run_id":"run-01a24ba28deb-bfd801","seq":2,"kind":"settled","node_id":"Visit","attempt":1,"checkpoint_seq":1,"payload":{"ms":0.589,"next":["Visit"]},"created_at":1796565274.1095166,"j":7,"tx":6,"end":true}',
    '{"t":"ev","run_id":"run-01a24ba28deb-bfd801","seq":3,"kind":"entered","node_id":"Visit","attempt":3,"checkpoint_seq":1,"payload":{},"created_at":1796565274.1100292,"j":8,"tx":8,"end":true}',
    '{"t":"cp","run_id":"run-01a24ba28deb-bfd801","seq":2,"parent_seq":1,"status":"running","state":{"count":2},"next":[{"node_id":"Visit","fields":{}}],"created_at":1796565274.1102946,"j":9,"tx":9}',
    '{"t":"ev","run_id":"run-01a24ba28deb-bfd801","seq":4,"kind":"settled","node_id":"Visit","attempt":3,"checkpoint_seq":2,"payload":{"ms":0.249,"next":["Visit"]},"created_at":1796565274.1102946,"j":10,"tx":9}',
    '{"t":"ev","run_id":"run-01a24ba28deb-bfd801","seq":5,"kind":"entered","node_id":"Visit","attempt":5,"checkpoint_seq":2,"payload":{},"created_at":1796565274.1103072,"j":11,"tx":9,"end":true}',
    '{"t":"cp","run_id":"run-01a24ba28deb-bfd801","seq":3,"parent_seq":2,"status":"done","state":{"count":3},"next":[],"created_at":1796565274.1107385,"output":3,"j":12,"tx":12}',
    '{"t":"ev","run_id":"run-01a24ba28deb-bfd801","seq":6,"kind":"settled","node_id":"Visit","attempt":5,"checkpoint_seq":3,"payload":{"ms":0.416,"next":[]},"created_at":1796565274.1107385,"j":13,"tx":12}',
    '{"t":"ev","run_id":"run-01a24ba28deb-bfd801","seq":7,"kind":"done","node_id":"Visit","attempt":null,"checkpoint_seq":3,"payload":{"output":3},"created_at":1796565274.1107442,"j":14,"tx":12,"end":true}',
]
"""A three-station run as the lab before boundary rows wrote it (`run.step()`, then `run.run()`)."""

TABLES = {
    "runs": "SELECT * FROM runs ORDER BY run_id",
    "checkpoints": "SELECT * FROM checkpoints ORDER BY run_id, seq",
    "events": "SELECT * FROM events ORDER BY run_id, seq",
}


@dataclass
class Tally:
    count: int = 0


@dataclass
class Visit(BaseNode[Tally, None, int]):
    async def run(self, ctx: GraphRunContext[Tally, None]) -> Visit | End[int]:
        ctx.state.count += 1
        return End(ctx.state.count) if ctx.state.count >= 3 else Visit()


def _fold(directory: Path, journal: bytes) -> dict[str, list[tuple]]:
    """The tables a fresh store holds once it replayed `journal` (all it holds)."""
    directory.mkdir()
    db = directory / "lab.duckdb"
    Path(f"{db}.journal").write_bytes(journal)
    store = open_store(str(db))
    try:
        return {name: store.sql(query).fetchall() for name, query in TABLES.items()}
    finally:
        store.close()


def _three_rows(journal: bytes) -> bytes:
    """`journal` with every boundary row written as its three rows, numbered as a journal numbers its lines."""
    out, tx, starts = [], 0, True
    for j, row in enumerate(expand([json.loads(line) for line in journal.splitlines()])):
        if starts:  # the first row of a transaction
            tx = j
        end = row.pop("end", False)
        out.append(json.dumps(row | {"j": j, "tx": tx} | ({"end": True} if end else {})))
        starts = end
    return ("\n".join(out) + "\n").encode()


def test_a_journal_of_an_older_lab_folds_as_before(tmp_path):
    tables = _fold(tmp_path / "old", ("\n".join(OLD_JOURNAL) + "\n").encode())
    events = [(seq, kind, node, attempt, cp) for _, seq, kind, node, attempt, cp, *_ in tables["events"]]
    assert events == [
        (0, "started", "Visit", None, 0),
        (1, "entered", "Visit", 1, 0),
        (2, "settled", "Visit", 1, 1),
        (3, "entered", "Visit", 3, 1),
        (4, "settled", "Visit", 3, 2),
        (5, "entered", "Visit", 5, 2),
        (6, "settled", "Visit", 5, 3),
        (7, "done", "Visit", None, 3),
    ]
    assert [
        (seq, parent, status, json.loads(state))
        for _, seq, parent, status, state, *_ in tables["checkpoints"]
    ] == [
        (0, None, "created", {"count": 0}),
        (1, 0, "running", {"count": 1}),
        (2, 1, "running", {"count": 2}),
        (3, 2, "done", {"count": 3}),
    ]
    (run,) = tables["runs"]
    assert run[4:6] == ("done", 3)  # status, head


def _journal_of_a_run(tmp_path: Path, *, step_first: bool) -> bytes:
    """The whole unfolded journal of a three-station tally run (`run.step()` first when `step_first`)."""
    lab = Lab(tmp_path / "lab.duckdb", durability="step")
    lab.store.fold_every = 1_000_000  # the whole run stays in the journal
    try:
        g = lab.graph("tally", state_type=Tally, output_type=int)
        g.node(Visit)
        run = g.start(Visit(), state=Tally())
        if step_first:
            run.step()  # its settlement written alone when the call returns: a boundary row without `entered`
        run.run()  # a boundary row with the next `entered`, then the settlement at End as three rows
        assert run.output == 3
        return Path(f"{tmp_path / 'lab.duckdb'}.journal").read_bytes()
    finally:
        lab.close()


def test_a_boundary_row_folds_into_exactly_what_its_three_rows_fold_into(tmp_path):
    journal = _journal_of_a_run(tmp_path, step_first=True)
    rows = [json.loads(line) for line in journal.splitlines()]
    boundaries = [r for r in rows if r["t"] == "b"]
    assert [("entered" in r, r["seq"], r["ev"]) for r in boundaries] == [(False, 1, 2), (True, 2, 4)]
    assert len(rows) == len(OLD_JOURNAL) - 3  # two rows fewer for the first boundary, one for the second
    new, old = _fold(tmp_path / "new", journal), _fold(tmp_path / "three", _three_rows(journal))
    assert new == old
    assert [e[2] for e in new["events"]] == [
        "started",
        "entered",
        "settled",
        "entered",
        "settled",
        "entered",
        "settled",
        "done",
    ]
    assert [c[1] for c in new["checkpoints"]] == [0, 1, 2, 3]


def test_a_reader_that_does_not_fold_sees_the_boundaries_of_an_unfolded_journal(tmp_path):
    """Found by rec28f: the read-only snapshot ran the fold's statements without expanding `b` rows, so a
    run driven by `run.run()` showed its first and last checkpoints only, and none of its stations' events."""
    journal = _journal_of_a_run(tmp_path, step_first=False)
    assert any(json.loads(line)["t"] == "b" for line in journal.splitlines())
    other = tmp_path / "copy"
    other.mkdir()
    open_store(str(other / "lab.duckdb")).close()  # an empty store: the run is only in the journal below
    Path(f"{other / 'lab.duckdb'}.journal").write_bytes(journal)
    store = open_store(str(other / "lab.duckdb"), read_only=True)  # reads the journal without folding it
    try:
        kinds = [r[0] for r in store.sql("SELECT kind FROM events ORDER BY seq").fetchall()]
        seqs = [r[0] for r in store.sql("SELECT seq FROM checkpoints ORDER BY seq").fetchall()]
        status = store.sql("SELECT status FROM runs").fetchall()
    finally:
        store.close()
    assert kinds == ["started", "entered", "settled", "entered", "settled", "entered", "settled", "done"]
    assert seqs == [0, 1, 2, 3] and status == [("done",)]
    assert Path(f"{other / 'lab.duckdb'}.journal").read_bytes() == journal  # nothing was folded
