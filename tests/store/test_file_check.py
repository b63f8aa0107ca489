"""The `fsync=True` boundary's file check (lab/store/file_check.py): link count and size, never the times.

Scenarios:
- it answers what `os.fstat` answers: the size as it changes, a link count of 0 once deleted;
- where `statx` is missing or refused (ENOSYS) it falls back to `os.fstat` for good and still answers;
  any other error (a closed fd) is raised, not hidden;
- an `fsync=True` boundary checks the journal through it and never `fstat`s the journal (an
  `fstat` reports the times, so on Linux 6.13+ the next write changes the inode and the sync on
  ext4 without a journal writes the inode block too); a journal deleted while open is still refused.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest

from lab import Lab, StoreError
from lab.store.file_check import FileCheck
from tests.integration.graphs_for_tests import State, declare, entry


def test_it_answers_what_fstat_answers(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        check = FileCheck()
        assert check(fd) == (1, 0)
        os.pwrite(fd, b"x" * 5000, 0)
        assert check(fd) == (os.fstat(fd).st_nlink, os.fstat(fd).st_size) == (1, 5000)
        os.link(path, tmp_path / "g")
        assert check(fd) == (2, 5000)
        os.unlink(path)
        os.unlink(tmp_path / "g")
        assert check(fd) == (0, 5000)
    finally:
        os.close(fd)


def test_without_statx_it_falls_back_to_fstat_and_other_errors_are_raised(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.write(fd, b"abc")
        check = FileCheck()
        calls: list[int] = []

        def refused(*args: object) -> int:
            calls.append(1)
            ctypes.set_errno(errno.ENOSYS)
            return -1

        check._fn = refused
        assert check(fd) == (1, 3) and calls == [1]
        assert not check.uses_statx
        assert check(fd) == (1, 3) and calls == [1], "once refused, statx is not asked again"
    finally:
        os.close(fd)
    check = FileCheck()
    if check.uses_statx:
        with pytest.raises(OSError) as raised:
            check(fd)  # closed: EBADF is an answer, not a missing call
        assert raised.value.errno == errno.EBADF
        assert check.uses_statx


def test_an_fsync_boundary_checks_the_journal_without_fstat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "lab.duckdb"
    lab = Lab(db, fsync=True)
    try:
        run = declare(lab).start(entry(), state=State())
        run.step()
        journal_fd = lab.store._journal._fd
        fstats: list[int] = []
        checks: list[int] = []
        fstat = os.fstat
        monkeypatch.setattr(os, "fstat", lambda fd: (fstats.append(fd), fstat(fd))[1])
        stat = lab.store._journal._stat
        monkeypatch.setattr(lab.store._journal, "_stat", lambda fd: (checks.append(fd), stat(fd))[1])
        for _ in range(3):
            run.step()
        assert journal_fd not in fstats, "a boundary fstat'ed the journal: its next write would change the inode"
        assert checks.count(journal_fd) >= 3, "every boundary is checked"
        monkeypatch.undo()
        Path(str(db) + ".journal").unlink()
        with pytest.raises(StoreError, match="was deleted while the store was open"):
            run.step()
    finally:
        lab.close()
