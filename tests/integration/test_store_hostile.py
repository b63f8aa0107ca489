"""The store under hostile input and faults (issue 12): each test failed before its fix.

- lab.sql / %%lab_sql cannot write: data-modifying CTEs, EXPLAIN ANALYZE of a write, the returned
  relation's .query/.create, extension auto-loading; the store is unchanged
- a lone surrogate (an undecodable file name in an exception, or in the state) never makes the
  store unreadable: escaped in errors, refused (naming the field) in state
- a disk that fills mid-write (RLIMIT_FSIZE in a worker) fails that step; the journal stays
  well-formed and every boundary reported settled survives
- damage mid-journal is refused naming the line (the file is kept); `python -m lab salvage`
  keeps the complete transactions on both sides; a genuine torn tail is still dropped
- a journal deleted while the store is open fails the next write clearly
- one close releases a store opened three times; a conflicting fsync is an error
- the CLI reads without writing and shows a dead writer's run as interrupted
- an unclosed Lab(":memory:") leaves no temp directory behind
- fsync=True costs at most one fsync per boundary
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from lab import Lab, StoreError, StoreQueryError
from lab.store.journal import JournalDamagedError, UnstorableValueError, scan
from tests.integration.hostile_worker import Bag, Step, command, declare

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def files_digest(directory: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(directory.iterdir()) if f.is_file()}


def worker(db: Path, scenario: str, *, ok: bool = True) -> dict:
    proc = subprocess.run(command(db, scenario), cwd=ROOT, capture_output=True, text=True, timeout=120)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[0])


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def journal_of(db: Path) -> Path:
    return db.with_name(db.name + ".journal")


# -- 1. lab.sql cannot write --------------------------------------------------------------------


WRITES = [
    "WITH d AS (DELETE FROM checkpoints RETURNING 1) SELECT count(*) FROM d",
    "EXPLAIN ANALYZE DELETE FROM events",
    "WITH u AS (UPDATE meta SET value = 'x' RETURNING 1) SELECT * FROM u",
    "WITH i AS (INSERT INTO runs SELECT * FROM runs RETURNING 1) SELECT count(*) FROM i",
    "SELECT * FROM sqlite_scan('other.db', 't')",
]


@pytest.mark.parametrize("query", WRITES, ids=["cte-delete", "explain-analyze-delete", "cte-update-meta", "cte-insert", "sqlite-scan"])
def test_lab_sql_refuses_every_write_form_and_the_store_is_unchanged(tmp_path, query):
    db = tmp_path / "lab.duckdb"
    with Lab(db) as lab:
        declare(lab).start(Step(), state=Bag()).run()
        before = lab.store.table_snapshot()
        meta = lab.sql("select * from meta").fetchall()
        with pytest.raises(StoreQueryError):
            lab.sql(query).fetchall()
        assert lab.store.table_snapshot() == before
        assert lab.sql("select * from meta").fetchall() == meta
        con = lab.store._con
        loaded = con.execute("select extension_name from duckdb_extensions() where loaded").fetchall()
        assert ("sqlite_scanner",) not in loaded
        settings = "select current_setting('autoinstall_known_extensions'), current_setting('autoload_known_extensions')"
        assert con.execute(settings).fetchall() == [(False, False)]
    with Lab(db) as lab:  # still opens, with everything in it
        assert lab.store.table_snapshot() == before


def test_the_relation_lab_sql_returns_cannot_reach_the_store(tmp_path):
    with Lab(tmp_path / "lab.duckdb") as lab:
        run = declare(lab).start(Step(), state=Bag()).run()
        before = lab.store.table_snapshot()
        rel = lab.sql("select run_id, status from runs")
        assert rel.fetchall() == [(run.id, "done")]
        with pytest.raises(duckdb.Error):
            rel.query("x", "DROP TABLE waits")
        rel.create("copied")  # lands in the relation's private database, not in the store
        with pytest.raises(duckdb.Error):
            rel.query("x", "SELECT * FROM read_csv('/etc/hostname')")
        assert lab.store.table_snapshot() == before
        assert lab.sql("select count(*) from duckdb_tables() where table_name = 'copied'").fetchall() == [(0,)]
        # what reading is for still works: parameters, JSON, EXPLAIN of a SELECT
        assert lab.sql("select state->>'count' from checkpoints where run_id = ? and seq = 6", [run.id]).fetchall() == [("6",)]
        assert lab.sql("explain select * from runs").fetchall()
        # the copy keeps DuckDB's types: sum() is a HUGEINT (a Python int), an ENUM stays one
        rel = lab.sql("select sum(seq) as s, 'a'::ENUM('a', 'b') as e from checkpoints where run_id = ?", [run.id])
        assert rel.fetchall() == [(21, "a")] and [str(t) for t in rel.types] == ["HUGEINT", "ENUM('a', 'b')"]


def test_the_lab_sql_magic_cannot_write(tmp_path):
    from IPython.core.error import UsageError
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "kernel_ext")
    lab = Lab(tmp_path / "lab.duckdb")
    try:
        run = declare(lab).start(Step(), state=Bag()).run()
        before = lab.store.table_snapshot()
        for query in WRITES[:3]:
            with pytest.raises(UsageError, match="read-only"):
                shell.run_cell_magic("lab_sql", "", query)
        assert lab.store.table_snapshot() == before
        result = shell.run_cell_magic("lab_sql", "", "select status from runs where run_id = $run")
        assert result.rows == [("done",)] and run.status == "done"
    finally:
        shell.run_line_magic("unload_ext", "kernel_ext")
        lab.close()


# -- 2. lone surrogates ---------------------------------------------------------------------------


def test_an_undecodable_file_name_in_an_exception_is_stored_escaped_and_the_store_stays_readable(tmp_path):
    db = tmp_path / "lab.duckdb"
    with Lab(db) as lab:
        g = declare(lab)
        finished = g.start(Step(), state=Bag()).run()
        run = g.start(Step(), state=Bag(raise_at=2)).run()
        assert run.status == "failed" and "caf" in run.error["message"]
        [failed] = run.events("failed")
        assert failed.payload["message"] == "caf\\udce9.txt"  # the escape, as text: lossless and readable
    assert cli("runs", "--store", str(db)).returncode == 0
    with Lab(db) as lab:
        assert lab.run(run.id).error["message"] == "caf\\udce9.txt"
        assert lab.run(finished.id).output == 6
        declare(lab)
        again = lab.resume(run.id)
        assert again.status == "failed"


def test_a_lone_surrogate_in_the_state_is_refused_at_that_step_naming_the_field(tmp_path):
    db = tmp_path / "lab.duckdb"
    with Lab(db) as lab:
        g = declare(lab)
        finished = g.start(Step(), state=Bag()).run()
        run = g.start(Step(), state=Bag(bad_name_at=3)).run()
        assert run.status == "failed" and run.head == 2  # stays at its last checkpoint
        assert "UnstorableValueError" in run.error["type"]
        assert "state.name" in run.error["message"] and "lone surrogate" in run.error["message"]
        assert run.state.count == 2 and run.state.name == ""
        with pytest.raises(UnstorableValueError, match="state.name"):
            g.start(Step(), state=Bag(name="\udce9"))
    assert cli("show", run.id, "--store", str(db)).returncode == 0
    with Lab(db) as lab:  # reopens; nothing of the refused state was written
        assert [r.run_id for r in lab.runs()] == [finished.id, run.id]
        assert lab.run(finished.id).output == 6
        assert lab.sql("select count(*) from checkpoints where run_id = ?", [run.id]).fetchall() == [(3,)]


def test_a_line_duckdb_cannot_read_is_salvaged_without_losing_an_unrelated_finished_run(tmp_path):
    """A journal an older Graph Lab wrote with a lone surrogate escaped by the stdlib (DuckDB rejects it)."""
    db = tmp_path / "lab.duckdb"
    left = worker(db, "leave")
    journal = journal_of(db)
    data = journal.read_bytes()
    s = scan(data)
    first_end = s.complete[0][1]  # after the done run's first transaction
    bad = {"t": "ev", "run_id": left["running"], "seq": 999, "kind": "failed", "payload": {"message": "caf\udce9"}}
    bad.update(j=10_000, tx=10_000, end=True, created_at=1.0e9)
    journal.write_bytes(data[:first_end] + json.dumps(bad).encode() + b"\n" + data[first_end:])
    with pytest.raises(StoreError, match="python -m lab salvage"):
        Lab(db)
    done = cli("salvage", "--store", str(db))
    assert done.returncode == 0 and "1 transaction(s) the database cannot fold" in done.stdout, done.stdout
    with Lab(db) as lab:
        declare(lab)
        assert lab.run(left["done"]).output == 6
        assert lab.resume(left["running"]).run().output == 6


# -- 3. disk full ------------------------------------------------------------------------------


def test_a_full_disk_fails_the_step_keeps_the_journal_well_formed_and_loses_nothing_settled(tmp_path):
    db = tmp_path / "lab.duckdb"
    out = worker(db, "diskfull")
    assert "cannot write to the journal" in out["error"] and "File too large" in out["error"]
    assert out["again"], "a write while the disk is still full must fail too"
    assert out["failed_head"] == len(out["settled"])  # the run stayed at its last settled checkpoint
    assert (out["status"], out["output"], out["head"]) == ("done", 40, 40)
    data = journal_of(db).read_bytes()
    s = scan(data)
    assert not s.damaged and s.good_end == len(data)  # no torn line anywhere
    with Lab(db) as lab:
        declare(lab)
        assert lab.run(out["done"]).output == 6
        rec = lab.run(out["run"])
        assert (rec.status, rec.output, rec.head_seq) == ("done", 40, 40)
        seqs = [c.seq for c in lab.resume(out["run"]).history()]
        assert seqs == list(range(41))
        events = lab.events(out["run"])
        assert [e.seq for e in events] == list(range(len(events)))  # nothing written twice, no gap


def test_a_fold_that_fails_after_a_journal_write_does_not_fail_the_write(tmp_path, monkeypatch):
    """The write is durable in the journal; only the bulk fold behind it is postponed (disk full)."""
    from lab.store import DuckDBStore

    lab = Lab(tmp_path / "lab.duckdb")
    try:
        lab.store.fold_every = 5
        real_fold = DuckDBStore.fold
        failures = []

        def full_disk_fold(store, **kwargs):
            if len(failures) < 2:
                failures.append(1)
                raise StoreError("cannot fold: No space left on device")
            real_fold(store, **kwargs)

        monkeypatch.setattr(DuckDBStore, "fold", full_disk_fold)
        run = declare(lab).start(Step(), state=Bag(limit=12)).run()
        assert failures == [1, 1] and (run.status, run.output) == ("done", 12)
        events = lab.events(run.id)
        assert [e.seq for e in events] == list(range(len(events)))
        assert [c.seq for c in run.history()] == list(range(13))
    finally:
        monkeypatch.undo()
        lab.close()


# -- 4. damage mid-journal ------------------------------------------------------------------------


def test_damage_before_complete_transactions_is_refused_naming_the_line_and_salvage_keeps_both_sides(tmp_path):
    db = tmp_path / "lab.duckdb"
    left = worker(db, "leave")
    journal = journal_of(db)
    lines = journal.read_bytes().split(b"\n")
    # damage one byte of the third transaction's first line (the done run's first boundary)
    # (a checkpoint row, or a boundary row that holds the checkpoint: lab/store/boundary.py)
    victim = next(i for i, line in enumerate(lines) if (b'"t":"cp"' in line or b'"t":"b"' in line) and b'"seq":1,' in line)
    lines[victim] = lines[victim].replace(b'"t":"', b'"t":"\xff', 1)
    journal.write_bytes(b"\n".join(lines))
    damaged = journal.read_bytes()
    for _ in range(2):
        with pytest.raises(JournalDamagedError) as err:
            Lab(db)
        assert f"line {victim + 1}" in str(err.value) and "python -m lab salvage" in str(err.value)
        assert journal.read_bytes() == damaged
    assert cli("runs", "--store", str(db)).returncode == 2  # the reader refuses it the same way
    done = cli("salvage", "--store", str(db))
    assert done.returncode == 0 and "kept" in done.stdout
    backups = list(tmp_path.glob("lab.duckdb.journal.damaged-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == b"\n".join(lines)
    with Lab(db) as lab:
        declare(lab)
        # the transaction with the damaged line is gone; both sides of it are kept
        assert {r.run_id for r in lab.runs()} == {left["done"], left["running"]}
        running = lab.resume(left["running"])
        assert running.head == 3 and running.state.count == 3
        assert running.run().output == 6


def test_a_genuine_torn_tail_is_still_dropped(tmp_path):
    db = tmp_path / "lab.duckdb"
    left = worker(db, "leave")
    journal = journal_of(db)
    data = journal.read_bytes()
    journal.write_bytes(data[:-7])  # the last transaction torn mid-line
    with Lab(db) as lab:
        declare(lab)
        assert lab.run(left["done"]).output == 6
        assert lab.run(left["running"]).head_seq == 2  # its last boundary was the torn one


# -- 5. the journal deleted under an open store ------------------------------------------------------


def test_a_journal_deleted_while_a_run_is_open_fails_the_next_write(tmp_path):
    db = tmp_path / "lab.duckdb"
    lab = Lab(db)
    run = declare(lab).start(Step(), state=Bag())
    run.run(max_steps=2)
    journal_of(db).unlink()
    with pytest.raises(StoreError, match="was deleted while the store was open"):
        run.step()
    assert run.head == 2
    with pytest.raises(StoreError, match="was deleted"):  # and every write after it
        run.retry() if run.status == "failed" else run.step()
    lab.close()  # folds what the deleted file still holds
    with Lab(db) as lab:
        assert lab.run(run.id).head_seq == 2


# -- 11. opening one path several times ---------------------------------------------------------------


def test_one_close_releases_a_store_opened_three_times(tmp_path):
    db = tmp_path / "lab.duckdb"
    for _ in range(3):  # a notebook cell run three times
        lab = Lab(db)
    declare(lab).start(Step(), state=Bag()).run()
    lab.close()
    listed = cli("runs", "--store", str(db))
    assert listed.returncode == 0, listed.stderr
    assert "1 run(s)" in listed.stdout


def test_a_conflicting_fsync_is_an_error_naming_how_to_change_it(tmp_path):
    db = tmp_path / "lab.duckdb"
    first = Lab(db)
    try:
        with pytest.raises(StoreError, match=r"fsync=False.*lab.close\(\)"):
            Lab(db, fsync=True)
        assert Lab(db, fsync=False).store is first.store and Lab(db).store is first.store
    finally:
        first.close()
    with Lab(db, fsync=True) as lab:
        assert lab.store.fsync is True and Lab(db).store.fsync is True


# -- 12. the CLI reads without writing -------------------------------------------------------------


def test_the_cli_reads_a_killed_writers_store_without_writing_and_shows_interrupted(tmp_path):
    db = tmp_path / "lab.duckdb"
    left = worker(db, "leave")
    died = worker(db, "die")
    assert journal_of(db).stat().st_size > 0
    digest = files_digest(tmp_path)
    listed = cli("runs", "--store", str(db))
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split()[2] for line in listed.stdout.splitlines() if line.startswith("run-")}
    assert rows == {left["done"]: "done", left["running"]: "interrupted", died["run"]: "interrupted"}
    shown = cli("show", died["run"], "--store", str(db), "--events")
    assert shown.returncode == 0 and "interrupted" in shown.stdout and "entered" in shown.stdout
    assert files_digest(tmp_path) == digest  # nothing folded, truncated or created


# -- 14. Lab(":memory:") ---------------------------------------------------------------------------


def test_unclosed_memory_labs_leave_no_temp_directory(tmp_path):
    code = (
        "import gc\n"
        "from lab import Lab\n"
        "from tests.integration.hostile_worker import Bag, Step, declare\n"
        "labs = [Lab(':memory:') for _ in range(3)]\n"
        "declare(labs[0]).start(Step(), state=Bag()).run()\n"
        "gone = Lab(':memory:')\n"
        "path = gone.store._tmpdir\n"
        "del gone, labs[1]\n"
        "Lab(':memory:')\n"  # the lab the module remembers as current moves on
        "gc.collect()\n"
        "import os\n"
        "print(os.path.exists(path))\n"
    )
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, "TMPDIR": str(tmp)}
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"  # collected: its directory went with it
    assert list(tmp.iterdir()) == []  # and at exit, every other one


# -- 15. fsync ----------------------------------------------------------------------------------------


def test_fsync_true_costs_at_most_one_fsync_per_boundary(tmp_path, monkeypatch):
    calls = []
    lab = Lab(tmp_path / "lab.duckdb", fsync=True)
    try:
        run = declare(lab).start(Step(), state=Bag(limit=30))
        for name in ("fsync", "fdatasync"):
            real = getattr(os, name)
            monkeypatch.setattr(os, name, lambda fd, _real=real, _n=name: (calls.append(_n), _real(fd))[1])
        run.run()
        assert run.status == "done" and run.head == 30
        # one per settled boundary, plus the run's move from created to running; none for `entered`
        assert 30 <= len(calls) <= 31
    finally:
        monkeypatch.undo()
        lab.close()
