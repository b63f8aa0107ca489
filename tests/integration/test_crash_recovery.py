"""Crash recovery with real SIGKILLs of real worker processes on a real DuckDB file.

Scenarios (durability="step"; the journal `<db>.journal` in front of DuckDB):
- 12+ SIGKILLs at seeded random points, chained across resumes (a run started and killed, a
  resumed run killed again, a resume killed while it opens the store): after every kill the store
  opens, every committed boundary is there (an independent oracle reads DuckDB and the
  journal's complete transactions without the lab), checkpoints decode and form a gapless
  chain, events are gapless, a station in flight is marked `interrupted` and nothing else is
  invented; resuming until done gives the uninterrupted output and history, and each
  interrupted station is entered again after a `resumed` event
- a torn journal tail (partial line, unended transaction, garbage) is dropped on open and
  every complete boundary survives; the dropped transaction leaves no trace
- a kill inside a fold (before COMMIT, and after COMMIT before the journal is truncated) loses
  nothing and replays idempotently
- the same SIGKILLs with `fsync=True` (the journal written in place, zeros after its data): the
  zeros are no torn tail, every committed boundary survives, the run resumes to the same output
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from lab import Lab
from lab.store.boundary import expand
from lab.store.schema import TABLES
from tests.integration.graphs_for_tests import State, declare, entry, worker_command

pytestmark = pytest.mark.slow

KILLS = 12
"""At least this many SIGKILLs in the random-kill test (each costs a worker process, ~2 s on a
quiet machine; the test asserts the kills cover every way a worker is killed)."""
MAX_KILLS_PER_RUN = 7
"""After this many kills of one run, its next resume is left to finish."""
SETTLEMENTS = ("settled", "failed", "interrupted", "cancelled")


# -- the uninterrupted reference ---------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    output: Any
    history: list[tuple[Any, ...]]
    stations: list[tuple[str, int]]
    """(node id, checkpoint seq) of every settled station, in order."""


def _cp_key(cp: Any) -> tuple[Any, ...]:
    return (cp.seq, cp.parent_seq, cp.status, cp.state, [p.to_json() for p in cp.next], cp.output)


@pytest.fixture(scope="module")
def reference() -> Reference:
    lab = Lab(":memory:")
    try:
        run = declare(lab).start(entry(), state=State()).run()
        assert run.status == "done"
        return Reference(
            output=run.output,
            history=[_cp_key(c) for c in run.history()],
            stations=[(e.node_id, e.checkpoint_seq) for e in run.events("settled")],
        )
    finally:
        lab.close()


# -- an oracle that reads the files without the lab -------------------------------------------


def journal_path(db: Path) -> Path:
    return db.with_name(db.name + ".journal")


def complete_journal_rows(path: Path) -> list[dict[str, Any]]:
    """The journal's rows up to its last complete transaction (a line with `"end": true`), a boundary row
    (lab/store/boundary.py) as the checkpoint and events it stands for."""
    if not path.exists():
        return []
    data = path.read_bytes()
    rows: list[dict[str, Any]] = []
    kept = 0
    for raw in data.split(b"\n")[:-1]:  # the piece after the last newline is never complete
        try:
            row = json.loads(raw)
        except ValueError:
            break
        rows.append(row)
        if row.get("end"):
            kept = len(rows)
    return expand(rows[:kept])


@dataclass
class RawStore:
    events: dict[tuple[str, int], tuple[Any, ...]] = field(default_factory=dict)
    checkpoints: dict[tuple[str, int], tuple[Any, ...]] = field(default_factory=dict)

    def run_events(self, run_id: str) -> list[tuple[Any, ...]]:
        return [(seq, *self.events[(r, seq)]) for r, seq in sorted(self.events) if r == run_id]

    def run_checkpoints(self, run_id: str) -> list[tuple[Any, ...]]:
        return [(seq, *self.checkpoints[(r, seq)]) for r, seq in sorted(self.checkpoints) if r == run_id]


def _put(table: dict, key: tuple[str, int], value: tuple[Any, ...]) -> None:
    if key in table:  # a line already folded (a kill after COMMIT) must agree with the table
        assert table[key] == value, f"journal disagrees with DuckDB at {key}: {value} vs {table[key]}"
    table[key] = value


def raw_store(db: Path) -> RawStore:
    """Every committed boundary: DuckDB's tables plus the journal's complete transactions."""
    raw = RawStore()
    con = duckdb.connect(os.fspath(db), read_only=True)
    try:
        for run_id, seq, kind, node_id, attempt, cseq in con.execute(
            "SELECT run_id, seq, kind, node_id, attempt, checkpoint_seq FROM events"
        ).fetchall():
            raw.events[(run_id, seq)] = (kind, node_id, attempt, cseq)
        for run_id, seq, parent, status, state, nxt in con.execute(
            "SELECT run_id, seq, parent_seq, status, state, next FROM checkpoints"
        ).fetchall():
            raw.checkpoints[(run_id, seq)] = (parent, status, json.loads(state), json.loads(nxt))
    finally:
        con.close()
    for row in complete_journal_rows(journal_path(db)):
        key = (row.get("run_id"), row.get("seq"))
        if row["t"] == "ev":
            _put(raw.events, key, (row["kind"], row["node_id"], row["attempt"], row["checkpoint_seq"]))
        elif row["t"] == "cp":
            _put(raw.checkpoints, key, (row["parent_seq"], row["status"], row["state"], row["next"]))
    return raw


def open_attempt(events: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """The `entered` event (seq, kind, node, attempt, cseq) with no settlement, if any."""
    open_: dict[int, tuple[Any, ...]] = {}
    for ev in events:
        _, kind, _, attempt, _ = ev
        if kind == "entered":
            open_[attempt] = ev
        elif kind in SETTLEMENTS and attempt is not None:
            open_.pop(attempt, None)
    assert len(open_) <= 1, f"more than one station in flight: {open_}"
    return next(iter(open_.values()), None)


def status_from_events(events: list[tuple[Any, ...]]) -> str:
    """The run status the event log implies (the runs row must agree with it)."""
    status = "created"
    for _, kind, *_ in events:
        if kind in ("entered", "settled", "retry"):
            status = "running"
        elif kind in ("done", "interrupted", "failed", "cancelled"):
            status = kind
        elif kind == "resumed" and status == "interrupted":
            status = "running"
    return status


# -- checking a store after a kill -------------------------------------------------------------


def check_run_integrity(lab: Lab, run_id: str) -> None:
    """Checkpoints 0..n-1 chained by parent_seq and decodable; events 0..m-1; head is the last."""
    built = lab.graphs["counter"].build()
    rec = lab.run(run_id)
    cps = lab.store.checkpoints(run_id)
    assert [c.seq for c in cps] == list(range(len(cps))), "checkpoint seqs have gaps or duplicates"
    assert [c.parent_seq for c in cps] == [None, *range(len(cps) - 1)]
    for cp in cps:
        state = built.codec.decode_state(cp.state, run_id=run_id, seq=cp.seq)
        assert isinstance(state, State)
        for station in cp.next:
            built.codec.decode_node(station, run_id=run_id, seq=cp.seq)
    assert rec.head_seq == cps[-1].seq
    events = lab.events(run_id)
    assert [e.seq for e in events] == list(range(len(events))), "event seqs have gaps or duplicates"


@dataclass
class Kill:
    run_id: str
    mid_station: bool
    status_after_open: str


def inspect_after_kill(db: Path, run_id: str, *, resume_here: bool, fsync: bool = False) -> Kill:
    """Open the killed store in this process, check it, optionally resume, and close it."""
    raw = raw_store(db)
    raw_events = raw.run_events(run_id)
    assert [e[0] for e in raw_events] == list(range(len(raw_events))), "committed events have a gap"
    in_flight = open_attempt(raw_events)

    lab = Lab(os.fspath(db), fsync=fsync)
    try:
        declare(lab)
        check_run_integrity(lab, run_id)
        rec = lab.run(run_id)
        events = lab.events(run_id)
        # every committed event is there, unchanged; the only addition is the interruption
        seen = [(e.seq, e.kind, e.node_id, e.attempt, e.checkpoint_seq) for e in events]
        assert seen[: len(raw_events)] == raw_events
        extra = seen[len(raw_events) :]
        if in_flight is not None:
            _, _, node_id, attempt, cseq = in_flight
            assert extra == [(len(raw_events), "interrupted", node_id, attempt, cseq)]
            assert rec.head_seq == cseq
        else:
            assert extra == []
        assert rec.status == status_from_events(seen)
        # every committed checkpoint is there, unchanged, and nothing uncommitted
        cps = [(c.seq, c.parent_seq, c.status, c.state, [p.to_json() for p in c.next]) for c in lab.store.checkpoints(run_id)]
        assert cps == raw.run_checkpoints(run_id)
        if resume_here and rec.status != "done":
            run = lab.resume(run_id)  # decodes the head; records `resumed`; nothing runs
            head = lab.store.checkpoint(run_id, rec.head_seq)
            assert run.state == State(**head.state)
            assert run.next_stations == tuple(p.node_id for p in head.next)
            assert run.status in ("created", "running")
        return Kill(run_id, in_flight is not None, rec.status)
    finally:
        lab.close()


# -- driving workers ---------------------------------------------------------------------------


@dataclass
class WorkerResult:
    killed: bool
    first_line: str
    stdout: str
    stderr: str

    @property
    def output(self) -> Any:
        lines = [ln for ln in self.stdout.splitlines() if ln.startswith("OUTPUT ")]
        assert lines, f"worker printed no output:\n{self.stdout}\n{self.stderr}"
        return json.loads(lines[-1][len("OUTPUT ") :])


def run_worker(db: Path, *args: str, kill_after: float | None, from_spawn: bool = False, env: dict | None = None) -> WorkerResult:
    """Run a worker; SIGKILL it `kill_after` seconds after its first line (or after spawning)."""
    # stderr goes to a file and stdout is read through its buffer only: mixing readline() with
    # communicate() loses what readline() had already buffered (communicate reads the raw pipe).
    with tempfile.TemporaryFile(mode="w+") as errfile, subprocess.Popen(
        worker_command(db, *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=errfile,
        text=True,
        env={**os.environ, **(env or {})},
    ) as proc:
        first = ""
        if not from_spawn:
            first = proc.stdout.readline().strip()
        if kill_after is not None:
            time.sleep(kill_after)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        killer = threading.Timer(60, proc.kill)  # a hung worker is killed, then reported below
        killer.start()
        try:
            out = proc.stdout.read()
            proc.wait()
        finally:
            hung = not killer.is_alive()
            killer.cancel()
        errfile.seek(0)
        err = errfile.read()
        if hung:
            pytest.fail(f"worker {args} hung:\n{out}\n{err}")
    if from_spawn:
        first, _, out = out.partition("\n")
        first = first.strip()
    killed = proc.returncode == -signal.SIGKILL
    if not killed:
        assert proc.returncode == 0, f"worker {args} failed ({proc.returncode}):\n{out}\n{err}"
    return WorkerResult(killed, first, out, err)


def check_finished_run(db: Path, run_id: str, reference: Reference, kills: list[Kill], *, fsync: bool = False) -> None:
    """The run that survived its kills equals the uninterrupted run, and says what happened."""
    lab = Lab(os.fspath(db), fsync=fsync)
    try:
        declare(lab)
        check_run_integrity(lab, run_id)
        rec = lab.run(run_id)
        assert rec.status == "done" and rec.output == reference.output
        assert [_cp_key(c) for c in lab.store.checkpoints(run_id)] == reference.history
        events = lab.events(run_id)
        settled = [e for e in events if e.kind == "settled"]
        assert [(e.node_id, e.checkpoint_seq) for e in settled] == reference.stations, "a station settled twice or never"
        assert [e.kind for e in events].count("done") == 1
        entered = {e.attempt: e for e in events if e.kind == "entered"}
        settlements = [e.attempt for e in events if e.kind in SETTLEMENTS]
        assert sorted(settlements) == sorted(entered), "an attempt was settled twice or never"
        interrupted = [e for e in events if e.kind == "interrupted"]
        assert len(interrupted) == sum(k.mid_station for k in kills)
        for ev in interrupted:
            first_try = entered[ev.attempt]
            assert (first_try.node_id, first_try.checkpoint_seq) == (ev.node_id, ev.checkpoint_seq)
            after = [e for e in events if e.seq > ev.seq]
            again = next(e for e in after if e.kind == "entered")
            between = [e for e in after if e.seq < again.seq]
            assert any(e.kind == "resumed" for e in between), f"no resumed event between {ev} and {again}"
            resumed = next(e for e in between if e.kind == "resumed")
            assert resumed.payload.get("status_before") == "interrupted"
            assert (again.node_id, again.checkpoint_seq) == (ev.node_id, ev.checkpoint_seq)
            assert again.attempt != ev.attempt
    finally:
        lab.close()


# -- the tests ---------------------------------------------------------------------------------


def test_sigkill_at_random_points_loses_no_committed_boundary(tmp_path, reference):
    rng = random.Random(20240611)
    db = tmp_path / "crash.duckdb"
    all_kills: list[Kill] = []
    finished: list[str] = []
    ways: set[str] = set()  # how the killed workers were killed: "start", "resume", "opening"
    while len(all_kills) < KILLS:
        res, way = run_worker(db, "start", kill_after=rng.uniform(0.0, 0.35)), "start"
        run_id = res.first_line
        assert run_id.startswith("run-"), res
        kills: list[Kill] = []
        while res.killed:
            ways.add(way)
            kills.append(inspect_after_kill(db, run_id, resume_here=len(all_kills + kills) % 2 == 0))
            if len(kills) >= MAX_KILLS_PER_RUN:
                res = run_worker(db, "resume", run_id, kill_after=None)
            elif len(all_kills + kills) == 1 or rng.random() < 0.2:  # the second kill, then now and then:
                # kill it while it opens the store and resumes
                res, way = run_worker(db, "resume", run_id, kill_after=rng.uniform(0.2, 0.7), from_spawn=True), "opening"
            else:
                res, way = run_worker(db, "resume", run_id, kill_after=rng.uniform(0.0, 0.35)), "resume"
            if res.first_line:
                assert res.first_line == run_id
        assert res.output == reference.output
        check_finished_run(db, run_id, reference, kills)
        all_kills += kills
        finished.append(run_id)

    assert len(all_kills) >= KILLS
    assert any(k.mid_station for k in all_kills), "no kill landed while a station was in flight"
    assert ways == {"start", "resume", "opening"}, f"the seeded kills missed a way to kill a worker: {ways}"
    # earlier runs in the same file were not disturbed by later crashes
    lab = Lab(os.fspath(db))
    try:
        declare(lab)
        assert {r.run_id: (r.status, r.output) for r in lab.runs()} == {r: ("done", reference.output) for r in finished}
        for run_id in finished:
            check_run_integrity(lab, run_id)
    finally:
        lab.close()


def test_sigkill_of_an_in_place_journal_loses_no_committed_boundary(tmp_path, reference, caplog):
    """`fsync=True` workers killed while they step (then while a resume steps): the journal is data,
    then zeros; it reopens (in place here too) with every committed boundary and no warning."""
    db = tmp_path / "in_place.duckdb"
    env = {"GRAPHLAB_TEST_FSYNC": "1"}
    res = run_worker(db, "start", kill_after=0.15, env=env)
    run_id = res.first_line
    kills: list[Kill] = []
    for after in (0.1, None):
        if not res.killed:
            break
        data = journal_path(db).read_bytes()
        assert complete_journal_rows(journal_path(db)), "expected the killed run's boundaries in the journal"
        assert data.endswith(b"\0") and len(data.rstrip(b"\0")) < len(data), "the in-place journal has no zeros"
        with caplog.at_level(logging.WARNING, logger="lab"):
            kills.append(inspect_after_kill(db, run_id, resume_here=False, fsync=True))
        # a kill inside a write may tear it (a few KB at most); the zeros (about 1 MiB) are no tail
        torn = [int(m.group(1)) for r in caplog.records if (m := re.search(r"torn tail of (\d+) bytes", r.getMessage()))]
        assert all(n < 65536 for n in torn), f"the zeros were taken for a torn tail: {torn}"
        caplog.clear()
        res = run_worker(db, "resume", run_id, kill_after=after, env=env)
    assert not res.killed and res.output == reference.output
    check_finished_run(db, run_id, reference, kills, fsync=True)


# -- torn tails ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def killed_store(tmp_path_factory) -> tuple[Path, str]:
    """A store whose worker was SIGKILLed mid-run, everything since its open still in the journal."""
    db = tmp_path_factory.mktemp("killed") / "killed.duckdb"
    res = run_worker(db, "start", kill_after=0.3)
    assert res.killed, "the run finished before it could be killed"
    assert complete_journal_rows(journal_path(db)), "expected the killed run's boundaries in the journal"
    return db, res.first_line


def _copy_store(src: Path, dst_dir: Path) -> Path:
    for f in src.parent.iterdir():
        if f.name.startswith(src.name):
            shutil.copy2(f, dst_dir / f.name)
    return dst_dir / src.name


def _fake_settlement(run_id: str, raw: RawStore, j: int) -> list[bytes]:
    """Lines of a settled transaction for the next checkpoint, as the dead process would write."""
    cps = raw.run_checkpoints(run_id)
    events = raw.run_events(run_id)
    seq = len(cps)
    cp = {
        "t": "cp", "run_id": run_id, "seq": seq, "parent_seq": seq - 1, "status": "running",
        "state": {"count": 999}, "next": [{"node_id": "Check", "fields": {}}], "output": None,
        "created_at": "2026-01-01T00:00:00", "j": j,
    }
    ev = {
        "t": "ev", "run_id": run_id, "seq": len(events), "kind": "settled", "node_id": "Inc",
        "attempt": len(events) - 1, "checkpoint_seq": seq, "payload": {}, "created_at": "2026-01-01T00:00:00",
        "j": j + 1, "end": True,
    }
    return [json.dumps(cp).encode() + b"\n", json.dumps(ev).encode() + b"\n"]


TORN_TAILS = {
    "partial-line": lambda lines: lines[0][:37],
    "unended-transaction": lambda lines: lines[0],
    "complete-line-then-partial-line": lambda lines: lines[0] + lines[1][: len(lines[1]) // 2],
    "end-line-without-newline": lambda lines: lines[0] + lines[1].rstrip(b"\n"),
    "garbage-bytes": lambda lines: b"\x00\xff\xfe not json at all \x00\n{\"t\": \n",
    "truncated-utf8": lambda lines: lines[0] + '{"t":"ev","kind":"entered","x":"\u00e9'.encode()[:-1],
}


@pytest.mark.parametrize("tail", list(TORN_TAILS))
def test_torn_journal_tail_is_dropped_and_complete_boundaries_survive(tmp_path, killed_store, reference, tail, caplog):
    src, run_id = killed_store
    db = _copy_store(src, tmp_path)
    raw_before = raw_store(db)
    events_before = raw_before.run_events(run_id)
    cps_before = raw_before.run_checkpoints(run_id)
    last_j = max(r["j"] for r in complete_journal_rows(journal_path(db)))
    good_size = journal_path(db).stat().st_size
    with open(journal_path(db), "ab") as f:
        f.write(TORN_TAILS[tail](_fake_settlement(run_id, raw_before, last_j + 1)))

    with caplog.at_level(logging.WARNING, logger="lab"):
        lab = Lab(os.fspath(db))
    try:
        assert any("torn tail" in r.getMessage() for r in caplog.records), "the dropped tail was not reported"
        assert journal_path(db).stat().st_size <= good_size
        declare(lab)
        check_run_integrity(lab, run_id)
        cps = [(c.seq, c.parent_seq, c.status, c.state, [p.to_json() for p in c.next]) for c in lab.store.checkpoints(run_id)]
        assert cps == cps_before, "a checkpoint of the torn transaction survived, or a complete one was lost"
        events = [(e.seq, e.kind, e.node_id, e.attempt, e.checkpoint_seq) for e in lab.events(run_id)]
        assert events[: len(events_before)] == events_before
        assert [e[1] for e in events[len(events_before) :]] in ([], ["interrupted"])
        assert all(c.state["count"] != 999 for c in lab.store.checkpoints(run_id))
    finally:
        lab.close()
    assert journal_path(db).stat().st_size == 0, "close() should fold and empty the journal"

    res = run_worker(db, "resume", run_id, kill_after=None)
    assert res.output == reference.output
    check_finished_run(db, run_id, reference, kills=[Kill(run_id, open_attempt(events_before) is not None, "")])


def test_torn_tail_alone_in_an_emptied_journal(tmp_path, killed_store):
    """After a clean close the journal is empty; a lone torn write is dropped, nothing else moves."""
    src, run_id = killed_store
    db = _copy_store(src, tmp_path)
    Lab(os.fspath(db)).close()
    snapshot_lab = Lab(os.fspath(db))
    before = snapshot_lab.store.table_snapshot()
    snapshot_lab.close()
    assert journal_path(db).stat().st_size == 0
    journal_path(db).write_bytes(b'{"t":"ev","run_id":"' + run_id.encode() + b'","seq":')
    lab = Lab(os.fspath(db))
    try:
        assert lab.store.table_snapshot() == before
        assert journal_path(db).stat().st_size == 0
    finally:
        lab.close()


# -- kills inside a fold ------------------------------------------------------------------------


def raw_snapshot(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    con = duckdb.connect(os.fspath(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}
    finally:
        con.close()


@pytest.mark.parametrize(
    ("die_in_fold", "fold_every"),
    [
        pytest.param("1:after", None, id="after-commit-at-close"),
        pytest.param("3:after", "7", id="after-commit-mid-run"),
        pytest.param("1:mid", None, id="before-commit-at-close"),
        pytest.param("3:mid", "7", id="before-commit-mid-run"),
    ],
)
def test_kill_during_fold(tmp_path, reference, die_in_fold, fold_every):
    """SIGKILL inside `fold()`: the worker kills itself at a fixed point of the K-th fold.

    `mid`: after the first INSERT of the fold's DuckDB transaction, before COMMIT — DuckDB must
    roll it back and the journal (not yet truncated) replays everything. `after`: after COMMIT,
    before the journal is truncated — the next open replays lines already folded, which must
    change nothing (the fold is idempotent).
    """
    db = tmp_path / "fold.duckdb"
    env = {"GRAPHLAB_TEST_DIE_IN_FOLD": die_in_fold}
    if fold_every:
        env["GRAPHLAB_TEST_FOLD_EVERY"] = fold_every
    res = run_worker(db, "start", kill_after=None, env=env)
    assert res.killed, f"the worker did not die in its fold:\n{res.stdout}\n{res.stderr}"
    run_id = res.first_line
    at_close = fold_every is None
    if at_close:
        assert "OUTPUT" in res.stdout  # it finished the run and died closing the lab
    pending = complete_journal_rows(journal_path(db))
    assert pending, "the journal should still hold the lines of the interrupted fold"

    before = raw_snapshot(db)
    raw = raw_store(db)
    lab = Lab(os.fspath(db))
    try:
        declare(lab)
        check_run_integrity(lab, run_id)
        after = lab.store.table_snapshot()
        if die_in_fold.endswith(":after") and at_close:
            assert after == before, "replaying lines already folded changed the tables"
        cps = [(c.seq, c.parent_seq, c.status, c.state, [p.to_json() for p in c.next]) for c in lab.store.checkpoints(run_id)]
        assert cps == raw.run_checkpoints(run_id)
        events = [(e.seq, e.kind, e.node_id, e.attempt, e.checkpoint_seq) for e in lab.events(run_id)]
        raw_events = raw.run_events(run_id)
        assert events[: len(raw_events)] == raw_events
        assert [e[1] for e in events[len(raw_events) :]] in ([], ["interrupted"])
        rec = lab.run(run_id)
        if at_close:
            assert rec.status == "done" and rec.output == reference.output
    finally:
        lab.close()
    again = Lab(os.fspath(db))
    try:
        assert again.store.table_snapshot() == after, "reopening a cleanly closed store changed it"
    finally:
        again.close()

    if not at_close:
        res = run_worker(db, "resume", run_id, kill_after=None)
        assert res.output == reference.output
    check_finished_run(db, run_id, reference, kills=[Kill(run_id, open_attempt(raw.run_events(run_id)) is not None, "")])

