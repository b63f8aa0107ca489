"""The in-place journal of `Lab(fsync=True)` (lab/store/journal.py): zeros beyond the data.

Scenarios:
- boundaries leave the journal's size unchanged while its data grows (the sync carries no size
  change), the fd has no O_APPEND, one fdatasync per boundary; a fold zeroes what was used and
  the next boundary is written at 0, with nothing old after it
- a store opened after a clean close, with `fsync=True` and without, finds no torn tail
- another live process (`fsync=True`) writes; this one reads its runs, and `python -m lab runs`
  (a read-only reader) too, with no warning; killed, its journal (data, then zeros) is folded here
  and emptied
- salvage of a padded journal with a damaged line keeps every complete transaction and counts
  the damage once (the zeros are no damaged part)
- what a power loss inside an in-place write may leave (data, zeros, then pieces of the lost write)
  is dropped as a torn tail with a warning and zeroed, without changing the file's size
- a write that fails part-way gets its zeros back: the data still ends with a complete transaction
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab import Lab, StoreError
from lab.store import salvage_journal
from lab.store.journal import JournalDamagedError, scan
from tests.integration.graphs_for_tests import State, declare, entry
from tests.integration.test_many_processes import Peer

REPO = Path(__file__).resolve().parents[2]


def journal_of(db: Path) -> Path:
    return db.with_name(db.name + ".journal")


def data_end(path: Path) -> int:
    return len(path.read_bytes().rstrip(b"\0"))


def torn_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "torn" in r.getMessage()]


def test_boundaries_keep_the_size_and_sync_once_each_and_a_fold_zeroes_what_was_used(tmp_path, monkeypatch):
    db = tmp_path / "lab.duckdb"
    lab = Lab(db, fsync=True)
    try:
        journal = lab.store._journal
        assert not fcntl.fcntl(journal._fd, fcntl.F_GETFL) & os.O_APPEND, "pwrite appends on an O_APPEND fd"
        run = declare(lab).start(entry(), state=State())
        run.step()
        size, end = journal_of(db).stat().st_size, data_end(journal_of(db))
        assert size >= 1 << 20 and 0 < end < size
        syncs: list[int] = []
        real = os.fdatasync
        monkeypatch.setattr(os, "fdatasync", lambda fd: (syncs.append(fd), real(fd))[1])
        for _ in range(3):
            run.step()
            assert journal_of(db).stat().st_size == size, "a boundary changed the journal's size"
            assert data_end(journal_of(db)) > end
            end = data_end(journal_of(db))
        assert len(syncs) == 3, "one fdatasync per boundary"
        monkeypatch.undo()
        lab.store.fold()
        assert journal_of(db).stat().st_size == size and data_end(journal_of(db)) == 0, "the fold left data behind"
        run.step()
        data = journal_of(db).read_bytes()
        s = scan(data)
        assert s.complete and s.complete[0][0] == 0 and not s.torn and not s.damaged
        assert not data[s.end :].strip(b"\0"), "old transactions follow the new data"
        assert run.run().status == "done"
    finally:
        lab.close()
    assert journal_of(db).stat().st_size == 0, "close() folds and drops the zeros"


@pytest.mark.parametrize("fsync", [True, False])
def test_a_padded_journal_left_by_a_process_reopens_without_a_torn_tail(tmp_path, caplog, fsync):
    db = tmp_path / "lab.duckdb"
    lab = Lab(db, fsync=True)
    run = declare(lab).start(entry(), state=State()).run()
    padded = journal_of(db).read_bytes()
    lab.close()
    journal_of(db).write_bytes(padded)  # as a killed process leaves it: data (already folded), then zeros
    with caplog.at_level(logging.INFO, logger="lab"):
        again = Lab(db, fsync=fsync)
    try:
        assert not torn_warnings(caplog)
        declare(again)
        assert again.run(run.id).status == "done" and again.run(run.id).output == run.output
    finally:
        again.close()


def test_another_process_writes_in_place_and_this_one_reads_and_folds_it(tmp_path, caplog):
    db = tmp_path / "lab.duckdb"
    Lab(db).close()
    peer = Peer(db, fsync=True)
    try:
        run_id = peer.do("run = counter.start(Inc(by=2), state=State()); run.run(max_steps=6); out = run.id")
        peer_journal = Path(peer.do("out = lab.store._journal.path"))
        size = peer_journal.stat().st_size
        assert data_end(peer_journal) < size, "the peer's journal has no zeros"
        with caplog.at_level(logging.INFO, logger="lab"):
            listed = subprocess.run(
                [sys.executable, "-m", "lab", "runs", "--store", os.fspath(db)], cwd=REPO, capture_output=True, text=True, timeout=60
            )
            assert listed.returncode == 0, listed.stderr
            assert run_id in listed.stdout and "torn" not in listed.stderr
            lab = Lab(db)
            try:
                declare(lab)
                assert lab.run(run_id).head_seq == 6
                peer.kill()  # its journal stays as it was: data, then zeros
                assert peer_journal.stat().st_size == size
                lab.store.fold()  # a journal whose writer is gone is folded and emptied here
                assert peer_journal.stat().st_size == 0
                assert lab.run(run_id).head_seq == 6
            finally:
                lab.close()
        assert not torn_warnings(caplog)
    finally:
        if peer.proc.poll() is None:
            peer.kill()


def test_salvage_of_a_padded_journal_counts_the_damage_not_the_zeros(tmp_path):
    db = tmp_path / "lab.duckdb"
    lab = Lab(db, fsync=True)
    runs = [declare(lab).start(entry(), state=State()).run(max_steps=8)]
    padded = bytearray(journal_of(db).read_bytes())
    lab.close()
    s = scan(bytes(padded))
    start, end = s.complete[len(s.complete) // 2]
    padded[start : start + 5] = b"#####"  # a damaged line between complete transactions
    journal_of(db).write_bytes(bytes(padded))
    with pytest.raises(JournalDamagedError, match="salvage"):
        Lab(db)
    summary = salvage_journal(db)
    assert f"kept {len(s.complete) - 1} complete transaction(s)" in summary
    assert "left out 1 damaged part(s)" in summary, summary
    with Lab(db) as again:
        declare(again)
        assert [again.run(r.id).head_seq for r in runs] == [8]


def test_pieces_of_a_write_lost_in_a_power_loss_are_a_torn_tail_and_are_zeroed(tmp_path, caplog):
    db = tmp_path / "lab.duckdb"
    Lab(db).close()
    peer = Peer(db, fsync=True)
    try:
        run_id = peer.do("run = counter.start(Inc(by=2), state=State()); run.step(); run.step(); out = run.id")
    finally:
        peer.kill()  # nothing folded: the journal holds the run, then zeros
    padded = bytearray(journal_of(db).read_bytes())
    end = len(padded.rstrip(b"\0"))
    piece = padded[end // 2 : end]  # a lost write's second half: its first block never reached the disk
    padded[end + 4096 : end + 4096 + len(piece)] = piece
    journal_of(db).write_bytes(bytes(padded))
    size = len(padded)
    with caplog.at_level(logging.WARNING, logger="lab"):
        lab = Lab(db, fsync=True)
    try:
        assert torn_warnings(caplog), "the pieces were not reported"
        assert journal_of(db).stat().st_size == size
        assert not journal_of(db).read_bytes()[end:].strip(b"\0"), "the pieces were not zeroed"
        declare(lab)
        assert lab.run(run_id).head_seq == 2
        assert lab.resume(run_id).run().status == "done"
    finally:
        lab.close()


def test_a_write_that_fails_part_way_gets_its_zeros_back(tmp_path, monkeypatch):
    db = tmp_path / "lab.duckdb"
    lab = Lab(db, fsync=True)
    try:
        run = declare(lab).start(entry(), state=State())
        run.step()
        journal = lab.store._journal
        end = journal.written()
        real = os.pwrite

        def half_then_fail(fd: int, data: bytes, offset: int) -> int:
            if fd == journal._fd and offset >= end and any(data):
                monkeypatch.setattr(os, "pwrite", real)
                real(fd, bytes(data)[: len(data) // 2], offset)
                raise OSError(5, "Input/output error")
            return real(fd, data, offset)

        monkeypatch.setattr(os, "pwrite", half_then_fail)
        with pytest.raises(StoreError, match="Input/output error"):
            run.step()
        data = journal_of(db).read_bytes()
        assert len(data.rstrip(b"\0")) == end and scan(data).good_end == end, "the failed bytes stayed"
        if run.status == "failed":
            run.retry()
        assert run.run().status == "done"
    finally:
        lab.close()
    with Lab(db) as again:
        declare(again)
        assert again.run(run.id).status == "done"


def test_zeros_that_cannot_grow_fail_the_write_and_leave_the_journal_as_it_was(tmp_path, monkeypatch):
    """A full disk while the zeros grow: the file is cut back to its size, nothing of the write is kept."""
    db = tmp_path / "lab.duckdb"
    lab = Lab(db, fsync=True)
    try:
        run = declare(lab).start(entry(), state=State())
        run.step()
        journal = lab.store._journal
        size, end = journal_of(db).stat().st_size, journal.written()
        real = os.pwrite

        def full_beyond_the_zeros(fd: int, data: bytes, offset: int) -> int:
            if fd == journal._fd and offset >= size:
                real(fd, bytes(data)[:100], offset)  # the disk took a little, then was full
                raise OSError(28, "No space left on device")
            return real(fd, data, offset)

        monkeypatch.setattr(os, "pwrite", full_beyond_the_zeros)
        too_big = journal.encode([{"t": "ev", "run_id": run.id, "payload": "x" * size}])  # does not fit in the zeros
        with pytest.raises(StoreError, match="No space left on device"):
            journal.write(too_big, 1)
        monkeypatch.undo()
        assert journal_of(db).stat().st_size == size, "the failed growth was not cut back"
        s = scan(journal_of(db).read_bytes())
        assert s.good_end == end and not s.torn and not s.damaged
        assert run.run().status == "done"
    finally:
        lab.close()
