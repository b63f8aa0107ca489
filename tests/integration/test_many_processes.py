"""Many processes, one store (issue 14): real processes on one DuckDB file, at the same time.

- two processes start, step, rewind, fork and answer runs at once; neither gets
  `StoreLockedError`; each sees the other's runs, checkpoints and events in `lab.runs()` and
  `lab.sql(...)` within one second; `python -m lab runs` / `show` read meanwhile and write nothing
- one writer per run: stepping, editing or pruning a run another live process advances is a
  `RunOwnedError` naming its pid and host; answering its wait works once from any process, and
  its writer goes on with that answer; a run whose process died is taken over with `lab.resume`
- two writers SIGKILLed at random, then both resumed, again and again: every settled boundary of
  both is kept, sequence numbers have no gaps, and each history matches an uninterrupted run
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from lab import Lab
from lab.store.holders import StoreLock, journal_slots
from tests.integration.graphs_for_tests import LIMIT, State, declare

REPO = Path(__file__).resolve().parents[2]
HOST = socket.gethostname()


class Peer:
    """A Graph Lab in another process (`peer_worker.py`), driven one line of Python at a time."""

    def __init__(self, db: Path, *, fsync: bool = False):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.peer_worker", os.fspath(db), *(["fsync"] if fsync else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        first = self.proc.stdout.readline()
        assert first, self.proc.stderr.read()
        self.pid = json.loads(first)["ready"]

    def send(self, code: str) -> None:
        self.proc.stdin.write(json.dumps(code) + "\n")
        self.proc.stdin.flush()

    def reply(self) -> dict[str, Any]:
        line = self.proc.stdout.readline()
        assert line, f"peer {self.pid} died:\n{self.proc.stderr.read()}"
        return json.loads(line)

    def do(self, code: str) -> Any:
        self.send(code)
        answer = self.reply()
        assert "error" not in answer, answer.get("trace")
        return answer["out"]

    def fails(self, code: str) -> tuple[str, str]:
        self.send(code)
        answer = self.reply()
        assert "error" in answer, f"expected an error from {code!r}, got {answer}"
        return answer["error"], answer["message"]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.communicate()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def peers(tmp_path):
    made: list[Peer] = []

    def make() -> Peer:
        made.append(Peer(tmp_path / "lab.duckdb"))
        return made[-1]

    yield make
    for p in made:
        if p.proc.poll() is None:
            p.kill()
        else:
            p.close()


def within_a_second(check) -> Any:
    """Poll `check()` until it returns something truthy, for at most one second."""
    deadline = time.monotonic() + 1.0
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO)


def test_two_processes_start_step_rewind_fork_and_answer_at_once(tmp_path, peers):
    db = tmp_path / "lab.duckdb"
    a, b = peers(), peers()
    # both at once: A steps a counter run while B runs a mail run up to its question
    a.send("run = counter.start(Inc(by=2), state=State()); run.run(max_steps=7); out = [run.id, run.head]")
    b.send("m = mail.start(Draft(), state=Mail()); m.run(); out = [m.id, m.status]")
    a_run, a_head = a.reply()["out"]
    b_run, b_status = b.reply()["out"]
    assert a_head == 7 and b_status == "waiting"
    # each sees the other's run, checkpoints and events within a second of their being written
    seen = "out = next((r.{} for r in lab.runs() if r.run_id == {!r}), None)"
    assert within_a_second(lambda: b.do(seen.format("head_seq", a_run)) == 7)
    assert within_a_second(lambda: a.do(seen.format("status", b_run)) == "waiting")
    seen = b.do(f"out = lab.sql(\"select count(*) from checkpoints where run_id = '{a_run}'\").fetchall()[0][0]")
    assert seen == 8
    kinds = a.do(f"out = [e.kind for e in lab.events({b_run!r})]")
    assert kinds[0] == "started" and kinds[-1] == "waiting"
    # rewind, fork, answer and step on, both at once, while a terminal reads
    a.send("run.rewind(3); run.run(max_steps=4); f = run.fork(5); out = [run.head, f.id]")
    b.send("m.resume_with('EU'); m.run(); m.approve(note='ok'); m.run(); out = [m.status, m.output]")
    listed = cli("runs", "--store", os.fspath(db))
    a_head, fork_id = a.reply()["out"]
    assert b.reply()["out"] == ["done", "Hello from EU"]
    assert listed.returncode == 0, listed.stderr
    assert a_run in listed.stdout and b_run in listed.stdout
    assert a_head == 11
    # the terminal sees everything, the fork included, and shows a live writer's run as it is
    shown = cli("show", a_run, "--store", os.fspath(db), "--events")
    assert shown.returncode == 0 and "rewind" in shown.stdout and "fork" in shown.stdout, shown.stderr
    everything = within_a_second(lambda: len(b.do("out = [r.run_id for r in lab.runs()]")) == 3)
    assert everything
    listed = cli("runs", "--store", os.fspath(db))
    assert fork_id in listed.stdout
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(a_run))
    assert " running " in line  # its writer lives: not shown interrupted
    a.close()
    b.close()
    # the terminal never wrote: no journal of its own, and the database says what the labs wrote
    assert len(journal_slots(os.fspath(db))) == 2
    with Lab(db) as lab:
        declare(lab)
        assert {r.run_id for r in lab.runs()} == {a_run, b_run, fork_id}
        assert lab.run(b_run).output == "Hello from EU"


def test_one_writer_per_run_and_an_answer_from_any_process(tmp_path, peers):
    a, b = peers(), peers()
    run_id = a.do("m = mail.start(Draft(), state=Mail()); m.run(); out = m.id")
    # B gets a handle that reads and answers, and refuses to advance or edit, naming A
    writer = b.do(f"r = lab.resume({run_id!r}); out = r.writer")
    assert f"process {a.pid} on host {HOST}" in writer
    for code, verb in (
        ("r.step()", "step"),
        ("r.run()", "step"),
        ("r.rewind(0)", "rewind"),
        ("r.edit_state(draft='x')", "edit the state of"),
        ("r.set_breakpoint('Send')", "change the breakpoints of"),
        ("r.cancel()", "cancel"),
    ):
        kind, message = b.fails(code)
        assert kind == "RunOwnedError", (code, message)
        assert f"cannot {verb} run {run_id}" in message and f"process {a.pid} on host {HOST}" in message
        assert f"lab.resume({run_id!r})" in message
    kind, message = b.fails(f"lab.prune({run_id!r})")
    assert kind in ("RunOwnedError", "RunStateError")
    # the question is answered once: from B; A's own answer is then refused, and A goes on with B's
    b.do("r.resume_with('EU')")
    assert within_a_second(lambda: a.do(f"out = lab.run({run_id!r}).status") == "queued")
    kind, message = a.fails("m.resume_with('US')")
    assert kind == "WaitError" and "already answered" in message
    assert a.do("m.run(); out = [m.status, m.state.region]") == ["waiting", "EU"]
    # the gate is answered from B again (its handle reads A's progress first); A finishes the run
    assert b.do("r.refresh(); out = r.wait.kind") == "consent"
    b.do("r.approve(note='from B')")
    kind, _ = b.fails("r.approve(note='twice')")
    assert kind == "WaitError"
    assert a.do("m.run(); out = [m.status, m.output]") == ["done", "Hello from EU"]
    verdicts = a.do(f"out = [e.payload for e in lab.events({run_id!r}) if e.kind == 'verdict']")
    assert [v.get("answered_elsewhere") for v in verdicts] == [True, True]
    assert verdicts[1]["note"] == "from B"
    events = a.do(f"out = [e.seq for e in lab.events({run_id!r})]")
    assert events == list(range(len(events)))
    # B reads the finished run through its handle
    assert b.do("r.refresh(); out = [r.status, r.output, r.state.sent]") == ["done", "Hello from EU", True]
    # a run B forks from A's run is B's own: B steps it
    assert b.do(f"f = lab.fork({run_id!r}, 0); f.run(); out = f.status") == "waiting"


def test_a_run_whose_process_died_is_taken_over_with_resume(tmp_path, peers):
    a, b = peers(), peers()
    run_id = a.do("run = counter.start(Inc(by=2), state=State()); run.run(max_steps=5); out = run.id")
    b.do(f"r = lab.resume({run_id!r})")
    assert b.fails("r.step()")[0] == "RunOwnedError"
    a.kill()
    kind, message = b.fails("r.step()")
    assert kind == "RunOwnedError" and "has ended" in message and f"lab.resume({run_id!r})" in message
    out = b.do(f"r = lab.resume({run_id!r}); r.run(); out = [r.status, r.output, r.head, r.writer]")
    assert out == ["done", LIMIT, 60, None]
    # now B writes it: a third process gets a reading handle naming B
    c = peers()
    assert f"process {b.pid}" in c.do(f"out = lab.resume({run_id!r}).writer")
    b.close()  # closing the lab lets go of its runs: C may take over at once
    assert c.do(f"r = lab.resume({run_id!r}); out = r.writer") is None


# -- two writers killed at random -----------------------------------------------------------------


def _worker(db: Path, *args: str) -> subprocess.Popen[str]:
    errors = open(db.parent / f"worker-{time.monotonic_ns()}.err", "w+")  # noqa: SIM115 - closed in _finish
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.worker", os.fspath(db), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        cwd=REPO,
    )
    proc.errors = errors  # type: ignore[attr-defined]
    return proc


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Wait for a worker: (exit status, the rest of its stdout, its stderr). stdout is read through
    its buffer (communicate() would lose what readline() had already buffered)."""
    out = proc.stdout.read()
    proc.stdout.close()
    code = proc.wait(timeout=120)
    proc.errors.seek(0)  # type: ignore[attr-defined]
    err = proc.errors.read()  # type: ignore[attr-defined]
    proc.errors.close()  # type: ignore[attr-defined]
    return code, out, err


def _settled(db: Path) -> dict[tuple[str, int], Any]:
    """Every settled boundary on disk: checkpoints in DuckDB and in every journal's complete transactions."""
    out: dict[tuple[str, int], Any] = {}
    lock = StoreLock(os.fspath(db) + ".lock", read_only=True)
    with lock.held(shared=True):  # no fold moves lines from a journal into the tables meanwhile
        con = duckdb.connect(os.fspath(db), read_only=True)
        try:
            for run_id, seq, state in con.execute("SELECT run_id, seq, state FROM checkpoints").fetchall():
                out[(run_id, seq)] = json.loads(state)
        finally:
            con.close()
        _journalled(db, out)
    lock.close()
    return out


def _journalled(db: Path, out: dict[tuple[str, int], Any]) -> None:
    for path in journal_slots(os.fspath(db)):
        data = Path(path).read_bytes()
        rows: list[dict[str, Any]] = []
        for raw in data.split(b"\n"):
            try:
                row = json.loads(raw)
            except ValueError:
                break
            rows.append(row)
            if row.get("end"):
                for r in rows:
                    if r.get("t") in ("cp", "b"):  # a boundary row holds a checkpoint too (lab/store/boundary.py)
                        out[(r["run_id"], r["seq"])] = r["state"]
                rows = []


def test_two_writers_killed_at_random_then_resumed_keep_every_settled_boundary(tmp_path):
    db = tmp_path / "lab.duckdb"
    rng = random.Random(14)
    procs = [_worker(db, "start"), _worker(db, "start")]
    run_ids = [p.stdout.readline().strip() for p in procs]
    assert all(r.startswith("run-") for r in run_ids), [_finish(p) for p in procs]
    kills = 0
    done: dict[str, int] = {}
    for _round in range(6):
        time.sleep(rng.uniform(0.05, 0.35))
        for p in procs:
            if p.poll() is None and rng.random() < 0.8:
                p.send_signal(signal.SIGKILL)
                kills += 1
        settled_before = _settled(db)
        for i, p in enumerate(procs):
            code, out, err = _finish(p)
            assert code in (0, -signal.SIGKILL), err
            if code == 0:
                done[run_ids[i]] = json.loads(out.strip().splitlines()[-1].removeprefix("OUTPUT "))
        # every boundary settled before the kills is still there, in both runs, after both resume
        procs = [_worker(db, "resume", r) for r in run_ids]
        for p, r in zip(procs, run_ids, strict=True):
            assert p.stdout.readline().strip() == r, _finish(p)
        after = _settled(db)
        lost = {k for k in settled_before if k not in after}
        assert not lost, f"settled boundaries lost after a kill: {sorted(lost)[:5]}"
    for i, p in enumerate(procs):
        code, out, err = _finish(p)
        assert code == 0, err
        done[run_ids[i]] = json.loads(out.strip().splitlines()[-1].removeprefix("OUTPUT "))
    assert kills >= 4
    assert done == {r: LIMIT for r in run_ids}
    # an uninterrupted run, for the history both must match
    with Lab(tmp_path / "reference.duckdb") as ref:
        g = declare(ref)
        from tests.integration.graphs_for_tests import entry

        reference = g.start(entry(), state=State()).run()
        want = [ref_cp.state for ref_cp in reference.history()]
    with Lab(db) as lab:
        declare(lab)
        for run_id in run_ids:
            rec = lab.run(run_id)
            assert rec.status == "done" and rec.output == LIMIT
            cps = lab.store.checkpoints(run_id)
            assert [c.seq for c in cps] == list(range(len(cps))), "checkpoint seqs have gaps"
            events = lab.events(run_id)
            assert [e.seq for e in events] == list(range(len(events))), "event seqs have gaps"
            history = [c.state for c in lab.resume(run_id).history()]
            assert history == want
            # every settlement wrote the checkpoint after it; interrupted attempts left no checkpoint
            settled = [e.checkpoint_seq for e in events if e.kind == "settled"]
            assert settled == list(range(1, len(cps)))
            assert State(**cps[-1].state) == State(count=LIMIT)
