"""Store faults and bad input, against real DuckDB files and real second processes.

Scenarios (each: a clear lab error that names the thing and what to do, and nothing stored is
lost or changed — proved by comparing every table, or the file's bytes, before and after):
- a store held open by a process that is not a Graph Lab of this version (a plain duckdb
  connection in a worker): `StoreLockedError` naming the file and the holder's PID; once the
  holder exits the store opens with everything in it. (A Graph Lab in another process holds
  nothing between operations: tests/integration/test_many_processes.py.)
- checkpoints hand-edited with duckdb after the lab closed — state that no longer validates,
  a pending station with an unknown node id or a missing field, truncated JSON — give a
  `CheckpointError` naming run and seq when that run is resumed or that checkpoint is read,
  while the other runs in the same file stay readable and resumable
- a store whose `schema_version` is newer than this Graph Lab: `StoreSchemaError`, file
  byte-for-byte unchanged
- a file that is not a DuckDB database (text, random bytes, empty, a truncated store):
  `StoreError`, file unchanged
- a store with a table dropped by hand: `StoreError` on open, not a raw DuckDB error
- a run whose head checkpoint row is gone: `CheckpointError`; `lab.fork` from an earlier one works
- a complete journal line that cannot be folded (edited by hand): `StoreError` saying to move the
  journal aside; database and journal unchanged
- a run started in a worker process (finished there, or SIGKILLed a few stations in), resumed
  in this one onto a changed graph: `RevisionMismatchError` saying what changed and how to
  fork; the store unchanged; `lab.fork(run_id, seq, revision="current")` (no run handle needed)
  runs the edited code
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from lab import (
    CheckpointError,
    Lab,
    RevisionMismatchError,
    StoreError,
    StoreLockedError,
    StoreSchemaError,
)
from lab.store.schema import SCHEMA_VERSION
from tests.conftest import Counter, Inc, declare_counter
from tests.integration import graphs_for_tests
from tests.integration.graphs_for_tests import worker_command

pytestmark = pytest.mark.slow

# -- reading and editing the file without the lab -----------------------------------------------


def raw_snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (meta included), read with duckdb directly (read-only)."""
    con = duckdb.connect(os.fspath(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}
    finally:
        con.close()


def tamper(db: Path, *statements: tuple[str, list[Any]] | str) -> None:
    """Edit a closed store by hand, as a person with the duckdb CLI would."""
    con = duckdb.connect(os.fspath(db))
    try:
        for stmt in statements:
            sql, params = (stmt, []) if isinstance(stmt, str) else stmt
            con.execute(sql, params)
    finally:
        con.close()


def files_digest(directory: Path) -> dict[str, str]:
    """sha-256 of every file in the store's directory (the database, its journal, any WAL)."""
    return {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(directory.iterdir()) if f.is_file()
    }


@contextmanager
def opened(db: Path) -> Iterator[Lab]:
    lab = Lab(os.fspath(db))
    try:
        yield lab
    finally:
        lab.close()


# -- a store with several runs, closed ------------------------------------------------------------


@dataclass(frozen=True)
class Runs:
    victim: str
    """Stepped to checkpoint 3 (running); the one the tests damage."""
    other: str
    """Stepped to checkpoint 3 (running); must stay resumable."""
    done: str
    """Finished (output 6); must stay readable."""


def build_store(db: Path) -> Runs:
    with opened(db) as lab:
        g = declare_counter(lab)
        victim = g.start(Inc(by=2), state=Counter()).run(max_steps=3)
        other = g.start(Inc(by=2), state=Counter()).run(max_steps=3)
        done = g.start(Inc(by=2), state=Counter()).run()
        assert (victim.head, other.head, done.status) == (3, 3, "done")
        return Runs(victim.id, other.id, done.id)


@pytest.fixture
def store(tmp_path) -> tuple[Path, Runs]:
    db = tmp_path / "lab.duckdb"
    return db, build_store(db)


def assert_others_intact(db: Path, runs: Runs) -> None:
    """The runs nobody damaged: readable, decodable, and the running one resumes to the end."""
    with opened(db) as lab:
        declare_counter(lab)
        assert {r.run_id for r in lab.runs()} == {runs.victim, runs.other, runs.done}
        done = lab.resume(runs.done)
        assert done.status == "done" and done.output == 6
        assert [done.state_at(c.seq).count for c in done.history()] == [0, 2, 2, 4, 4, 6, 6]
        other = lab.resume(runs.other)
        assert other.head == 3 and other.state == Counter(count=4, seen=["inc2", "inc2"])
        other.run()
        assert other.status == "done" and other.output == 6


# -- 1. a store held by another process ------------------------------------------------------------


def test_a_store_held_by_another_process_is_refused_clearly_and_opens_after(store):
    db, runs = store
    before = raw_snapshot(db)
    with subprocess.Popen(
        worker_command(db, "hold-raw"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout.readline().strip() == "READY", holder.stderr.read()
            with pytest.raises(StoreLockedError) as err:
                Lab(os.fspath(db))
            message = str(err.value)
            assert os.fspath(db) in message
            assert f"PID {holder.pid}" in message
            assert "lab.close()" in message and "different path" in message and "duckdb connection" in message
            assert "Conflicting lock" not in message and "IO Error" not in message  # not DuckDB's words
            assert err.value.__cause__ is None and err.value.__suppress_context__
            # the same refusal from the terminal entry point, as a message and exit status 2
            cli = subprocess.run(
                [*worker_command(db, "hold")[:1], "-m", "lab", "runs", "--store", os.fspath(db)],
                capture_output=True,
                text=True,
                cwd=Path(__file__).parents[2],
            )
            assert (
                cli.returncode == 2
                and "open in another process" in cli.stderr
                and "Traceback" not in cli.stderr
            )
        finally:
            holder.stdin.close()
            assert holder.wait(timeout=30) == 0, holder.stderr.read()
    assert raw_snapshot(db) == before
    with opened(db) as lab:
        snapshot = lab.store.table_snapshot()
        assert snapshot == {t: before[t] for t in snapshot}
    assert_others_intact(db, runs)


# -- 2. hand-edited checkpoints ----------------------------------------------------------------------


def _set_state(text: str) -> Callable[[Path, str, int], None]:
    def edit(db: Path, run_id: str, seq: int) -> None:
        tamper(db, ("UPDATE checkpoints SET state = ? WHERE run_id = ? AND seq = ?", [text, run_id, seq]))

    return edit


def _set_next(stations: list[dict[str, Any]]) -> Callable[[Path, str, int], None]:
    def edit(db: Path, run_id: str, seq: int) -> None:
        tamper(
            db,
            (
                "UPDATE checkpoints SET next = ? WHERE run_id = ? AND seq = ?",
                [json.dumps(stations), run_id, seq],
            ),
        )

    return edit


def _truncate_state(db: Path, run_id: str, seq: int) -> None:
    """A JSON column holds only valid JSON, so do what a careless tool would: retype, then cut."""
    tamper(
        db,
        "ALTER TABLE checkpoints ALTER state TYPE VARCHAR",
        (
            "UPDATE checkpoints SET state = left(state, length(state) - 9) WHERE run_id = ? AND seq = ?",
            [run_id, seq],
        ),
    )


@dataclass(frozen=True)
class Damage:
    edit: Callable[[Path, str, int], None]
    message: str
    """What the CheckpointError says about the damage (a regex)."""
    state_damaged: bool
    """True when `state_at` of the damaged checkpoint fails too (not only a full decode)."""


DAMAGES = {
    "state-no-longer-validates": Damage(
        _set_state('{"count": "lots", "seen": []}'), r"state no longer validates as Counter: count", True
    ),
    "state-wrong-shape": Damage(_set_state("[1, 2, 3]"), r"state no longer validates as Counter", True),
    "unknown-node-id": Damage(
        _set_next([{"node_id": "Gone", "fields": {}}]),
        r"unknown node id 'Gone'; the graph declares \['Check', 'Inc'\]",
        False,
    ),
    "missing-node-field": Damage(
        _set_next([{"node_id": "Inc", "fields": {}}]), r"node Inc: missing field\(s\) \['by'\]", False
    ),
    "truncated-json": Damage(_truncate_state, r"stored JSON is damaged", True),
}


def _checkpoint_error(action: Callable[[], Any], run_id: str, seq: int, damage: Damage) -> str:
    with pytest.raises(CheckpointError) as err:
        action()
    message = str(err.value)
    assert message.startswith(f"run {run_id} checkpoint {seq}: "), message
    assert (err.value.run_id, err.value.seq) == (run_id, seq)
    assert re.search(damage.message, message), message
    assert "other runs" in message.lower() and "lab.fork(run_id, seq)" in message and "backup" in message, (
        message
    )
    return message


@pytest.mark.parametrize("kind", list(DAMAGES))
def test_a_damaged_head_checkpoint_refuses_resume_and_leaves_the_store_as_it_was(store, kind):
    db, runs = store
    damage = DAMAGES[kind]
    damage.edit(db, runs.victim, 3)
    before = raw_snapshot(db)
    with opened(db) as lab:
        declare_counter(lab)
        for _ in range(2):  # a refused resume leaves no half-made handle behind: it refuses again
            _checkpoint_error(lambda: lab.resume(runs.victim), runs.victim, 3, damage)
        assert lab.run(runs.victim).head_seq == 3  # the run record still reads
        # the earlier, undamaged checkpoints of the damaged run are still there to fork from
        assert lab.sql("select count(*) from checkpoints where run_id = ?", [runs.victim]).fetchall() == [
            (4,)
        ]
    assert raw_snapshot(db) == before
    assert_others_intact(db, runs)
    # the way forward the message names: fork the damaged run from its last good checkpoint
    with opened(db) as lab:
        declare_counter(lab)
        child = lab.fork(runs.victim, 2)
        assert child.state == Counter(count=2, seen=["inc2"]) and child.next_stations == ("Inc",)
        assert child.run().output == 6
        assert [r.run_id for r in lab.lineage(runs.victim)] == [runs.victim, child.id]


@pytest.mark.parametrize("kind", list(DAMAGES))
def test_a_damaged_earlier_checkpoint_is_an_error_only_where_it_is_read(store, kind):
    db, runs = store
    damage = DAMAGES[kind]
    damage.edit(db, runs.victim, 1)
    before = raw_snapshot(db)
    with opened(db) as lab:
        declare_counter(lab)
        run = lab.resume(runs.victim)  # the head is fine: the run resumes
        after_resume = lab.store.table_snapshot()
        if damage.state_damaged:
            _checkpoint_error(lambda: run.state_at(1), runs.victim, 1, damage)
        else:
            assert run.state_at(1) == Counter(count=2, seen=["inc2"])
        _checkpoint_error(lambda: run.checkpoint(1), runs.victim, 1, damage)
        _checkpoint_error(lambda: run.rewind(1), runs.victim, 1, damage)
        assert lab.store.table_snapshot() == after_resume, "a refused read or rewind changed the store"
        assert run.head == 3 and run.state_at(2) == Counter(count=2, seen=["inc2"])
        run.run()  # the damage is behind the head: the run goes on to the end
        assert run.status == "done" and run.output == 6
    resumed = raw_snapshot(db)
    for table in ("meta", "graphs"):
        assert resumed[table] == before[table]
    damaged_row = [r for r in before["checkpoints"] if r[0] == runs.victim and r[1] == 1]
    assert [r for r in resumed["checkpoints"] if r[0] == runs.victim and r[1] == 1] == damaged_row
    assert_others_intact(db, runs)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param("DELETE FROM checkpoints WHERE run_id = ? AND seq = 3", id="head-row-deleted"),
        pytest.param("UPDATE runs SET head_seq = 42 WHERE run_id = ?", id="head-points-nowhere"),
    ],
)
def test_a_run_whose_head_checkpoint_is_gone_refuses_resume_and_can_be_forked(store, edit):
    db, runs = store
    tamper(db, (edit, [runs.victim]))
    before = raw_snapshot(db)
    head = before["runs"][[r[0] for r in before["runs"]].index(runs.victim)][5]
    with opened(db) as lab:
        declare_counter(lab)
        with pytest.raises(CheckpointError) as err:
            lab.resume(runs.victim)
        message = str(err.value)
        assert message.startswith(
            f"run {runs.victim} checkpoint {head}: the run's head checkpoint is missing"
        )
        assert "lab.fork(run_id, seq)" in message
    assert raw_snapshot(db) == before
    assert_others_intact(db, runs)
    with opened(db) as lab:
        declare_counter(lab)
        assert lab.fork(runs.victim, 2).run().output == 6


# -- 3. a store from a newer schema ------------------------------------------------------------------


def test_a_store_from_a_newer_schema_is_refused_and_left_byte_for_byte(store):
    db, runs = store
    tamper(db, "UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    digest = files_digest(db.parent)
    with pytest.raises(StoreSchemaError) as err:
        Lab(os.fspath(db))
    message = str(err.value)
    assert os.fspath(db) in message
    assert "schema 999" in message and f"up to {SCHEMA_VERSION}" in message and "upgrade graph-lab" in message
    assert files_digest(db.parent) == digest, "opening a newer store wrote to it"
    # nothing half-open is left behind: putting the version back makes it a normal store again
    tamper(db, (f"UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version'", []))
    assert_others_intact(db, runs)



def test_a_store_this_lab_wrote_tells_a_lab_of_schema_8_to_upgrade(store, monkeypatch):
    """Schema 9 changed no table, only what rows hold (folded fork stacks, `b` journal rows): a Graph Lab
    that knows up to 8 must say "upgrade", not read them as damage. Its check is `refuse_newer` with 8."""
    db, runs = store
    digest = files_digest(db.parent)
    monkeypatch.setattr("lab.store.schema.SCHEMA_VERSION", 8)
    with pytest.raises(StoreSchemaError, match=r"newer Graph Lab \(schema 9; this version knows up to 8\); upgrade graph-lab"):
        Lab(os.fspath(db))
    assert files_digest(db.parent) == digest, "a refused open wrote to the store"
    monkeypatch.undo()
    assert_others_intact(db, runs)

# -- 4. not a DuckDB database ------------------------------------------------------------------------


def _real_store_cut(tmp_path: Path) -> bytes:
    src = tmp_path / "src" / "real.duckdb"
    src.parent.mkdir()
    build_store(src)
    data = src.read_bytes()
    return data[: len(data) // 2]


NOT_DUCKDB: dict[str, Callable[[Path], bytes]] = {
    "text": lambda tmp: b"run_id,status\nrun-1,done\n" * 40,
    "random-bytes": lambda tmp: random.Random(7).randbytes(64 * 1024),
    "empty": lambda tmp: b"",
    "truncated-store": _real_store_cut,
}


@pytest.mark.parametrize("kind", list(NOT_DUCKDB))
def test_a_file_that_is_not_a_duckdb_store_is_refused_and_left_alone(tmp_path, kind):
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "lab.duckdb"
    db.write_bytes(NOT_DUCKDB[kind](tmp_path))
    digest = files_digest(folder)
    with pytest.raises(StoreError) as err:
        Lab(os.fspath(db))
    message = str(err.value)
    assert type(err.value) is StoreError  # neither "locked" nor "newer schema": it is not a store
    assert f"cannot open the store {db}" in message and "move the file aside" in message
    assert err.value.__cause__ is None
    assert files_digest(folder) == digest, "a refused open changed or created files"


def test_a_store_with_a_table_dropped_by_hand_is_a_store_error(store):
    db, _ = store
    tamper(db, "DROP TABLE events")
    digest = files_digest(db.parent)
    with pytest.raises(StoreError) as err:
        Lab(os.fspath(db))
    message = str(err.value)
    assert os.fspath(db) in message and "events" in message and "backup" in message
    assert not isinstance(err.value, duckdb.Error)
    assert files_digest(db.parent) == digest


def test_a_journal_line_that_cannot_be_folded_is_refused_and_kept(store):
    """A complete journal transaction whose values do not fit the tables (edited by hand)."""
    db, runs = store
    journal = db.with_name(db.name + ".journal")
    assert journal.stat().st_size == 0  # a clean close folded everything
    line = {
        "t": "ev",
        "run_id": runs.victim,
        "seq": "four",
        "kind": "entered",
        "node_id": "Check",
        "attempt": 9,
        "checkpoint_seq": 3,
        "payload": {},
        "created_at": 1.0e9,
        "j": 0,
        "end": True,
    }
    journal.write_text(json.dumps(line) + "\n")
    before, digest = raw_snapshot(db), files_digest(db.parent)
    for _ in range(2):  # refused the same way each time: nothing was half-folded
        with pytest.raises(StoreError) as err:
            Lab(os.fspath(db))
        message = str(err.value)
        assert f"cannot fold the journal {journal} into {db}" in message
        assert "nothing is lost" in message and f"move {journal} aside" in message
        assert files_digest(db.parent) == digest and raw_snapshot(db) == before
    journal.rename(journal.with_name("set-aside.journal"))  # what the message says to do
    assert_others_intact(db, runs)


# -- 5. a revision mismatch across processes --------------------------------------------------------


def _checkpoints(journal: bytes) -> int:
    """Checkpoint rows in journal bytes: `cp` rows and boundary rows (lab/store/boundary.py), which hold one."""
    return journal.count(b'"t":"cp"') + journal.count(b'"t":"b"')


def _start_in_a_worker(db: Path, *, finish: bool) -> str:
    """Start a counter run in a worker process; let it finish, or SIGKILL it a few stations in."""
    with subprocess.Popen(
        worker_command(db, "start"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        run_id = proc.stdout.readline().decode().strip()
        assert run_id.startswith("run-"), proc.stderr.read()
        if not finish:  # wait until checkpoint 3 is in the journal, then kill it like a dead kernel
            journal = db.with_name(db.name + ".journal")
            deadline = time.monotonic() + 30
            while _checkpoints(journal.read_bytes()) < 4 and time.monotonic() < deadline:
                time.sleep(0.005)
            proc.kill()
        rest, err = proc.communicate(timeout=60)
    if finish:
        assert proc.returncode == 0, err.decode()
    else:
        assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    with opened(db) as lab:  # fold what the worker wrote (and mark a station in flight as interrupted)
        rec = lab.run(run_id)
    assert (rec.status == "done") == finish and rec.head_seq >= 3
    return run_id


@pytest.mark.parametrize("finish", [True, False], ids=["finished-run", "killed-run"])
def test_resuming_onto_a_changed_graph_is_refused_and_fork_onto_current_works(tmp_path, finish):
    db = tmp_path / "lab.duckdb"
    run_id = _start_in_a_worker(db, finish=finish)
    before = raw_snapshot(db)
    with opened(db) as lab:
        g = graphs_for_tests.declare_changed(lab)
        pinned = lab.run(run_id).revision
        assert g.revision == pinned + 1
        with pytest.raises(RevisionMismatchError) as err:
            lab.resume(run_id)
        message = str(err.value)
        assert run_id in message
        assert f"counter@{pinned}" in message and f"counter@{pinned + 1}" in message
        assert "station Inc source changed" in message
        assert "revision='current'" in message and "fork" in message
        after_refusal = lab.store.table_snapshot()

        # the way forward the message names: fork onto the graph as defined now
        child = lab.fork(run_id, 2, revision="current")
        assert child.revision == pinned + 1 and lab.run(child.id).parent_run_id == run_id
        assert child.state == graphs_for_tests.State(count=2) and child.next_stations == ("Inc",)
        step = child.step()  # the station runs the code defined now: the edited Inc adds 10 x by
        assert (step.node_id, step.outcome) == ("Inc", "settled") and child.state == graphs_for_tests.State(
            count=22
        )
        assert [r.run_id for r in lab.lineage(run_id)] == [run_id, child.id]
    # the refusal wrote nothing (building the changed graph registered its manifest, nothing else)
    assert {t: after_refusal[t] for t in ("runs", "checkpoints", "events")} == {
        t: before[t] for t in ("runs", "checkpoints", "events")
    }
    assert after_refusal["graphs"][: len(before["graphs"])] == before["graphs"]
    # the fork added a run and a `fork` event on the parent; the parent's run and checkpoints are untouched
    after = raw_snapshot(db)
    assert [r for r in after["runs"] if r[0] == run_id] == [r for r in before["runs"] if r[0] == run_id]
    assert [r for r in after["checkpoints"] if r[0] == run_id] == before["checkpoints"]
    parent_events = [r for r in after["events"] if r[0] == run_id]
    assert parent_events[: len(before["events"])] == before["events"]
    assert [r[2] for r in parent_events[len(before["events"]) :]] == ["fork"]
