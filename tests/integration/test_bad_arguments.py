"""Wrong arguments and unwritable stores get a LabError that names what was wrong and what to do.

Scenarios (issue 12 item 13), each of which used to give a raw or misleading error:
- lab.resume(123), lab.run(123), lab.runs(status=5 / "finished"), lab.runs(graph=5): ArgumentError
  naming the argument (not "restore it from a backup")
- run.run(max_steps="2") / -1: ArgumentError naming max_steps (not a raw TypeError)
- a node returning None or 42: the station fails saying it returned neither a node nor End
  (not "AssertionError: Expected code to be unreachable")
- a store whose schema_version reads 'abc': StoreSchemaError naming it (not a raw ValueError)
- a read-only store file, a read-only folder: StorePermissionError naming the file or folder and
  the ways on (not "not a DuckDB database... move the file aside", not a raw PermissionError).
  These run in a real subprocess whose permission checks are real: as root, with the capability
  that bypasses file modes dropped (setpriv), else as the ordinary user.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, LabError, StoreSchemaError
from lab.errors import ArgumentError
from tests.conftest import Check, Counter, Inc, declare_counter


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda lab: lab.resume(123), r"lab\.resume\(123\): run_id is a run's id, a str"),
        (lambda lab: lab.run(123), r"lab\.run\(123\): run_id is a run's id"),
        (lambda lab: lab.fork(None, 0), r"lab\.fork\(None\): run_id is a run's id"),
        (lambda lab: lab.runs(status=5), r"lab\.runs\(status=5\): status is one of 'created', .*'interrupted'"),
        (lambda lab: lab.runs(status="finished"), r"lab\.runs\(status='finished'\): status is one of"),
        (lambda lab: lab.runs(graph=5), r"lab\.runs\(graph=5\): graph is a graph's name, a str"),
    ],
)
def test_lab_arguments_are_named(file_lab, call, message):
    declare_counter(file_lab).start(Inc(), state=Counter())
    with pytest.raises(ArgumentError, match=message) as err:
        call(file_lab)
    assert isinstance(err.value, LabError) and "backup" not in str(err.value)


def test_resume_names_the_run_handle_it_was_given(file_lab):
    run = declare_counter(file_lab).start(Inc(), state=Counter())
    with pytest.raises(ArgumentError, match=rf"pass run\.id, '{run.id}'"):
        file_lab.resume(run)


@pytest.mark.parametrize("bad", ["2", -1, 2.0, True])
def test_max_steps_is_named(file_lab, bad):
    run = declare_counter(file_lab).start(Inc(), state=Counter())
    with pytest.raises(ArgumentError, match=rf"run\.run\(max_steps={bad!r}\): max_steps is how many stations"):
        run.run(max_steps=bad)
    assert run.status == "created" and run.head == 0
    assert run.run(max_steps=2).head == 2


@dataclass
class ReturnsNone(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> Check | End[int]:
        return None  # type: ignore[return-value]


@dataclass
class Returns42(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> Check | End[int]:
        return 42  # type: ignore[return-value]


@pytest.mark.parametrize(("node", "shown"), [(ReturnsNone(), "None (NoneType)"), (Returns42(), "42 (int)")])
def test_a_node_returning_neither_a_node_nor_end_says_so(file_lab, node, shown):
    g = file_lab.graph("odd", state_type=Counter, output_type=int)
    for cls in (ReturnsNone, Returns42, Check, Inc):
        g.node(cls)
    run = g.start(node, state=Counter())
    result = run.step()
    assert result.outcome == "failed" and run.status == "failed"
    name = type(node).__name__
    expected = (
        f"station {name} returned {shown}, which is neither a node nor End; its run() must return one of "
        "what its return hint declares: Check(...), End(...)"
    )
    assert result.error == f"UndeclaredTransitionError: {expected}"
    assert run.error["type"] == "lab.errors.UndeclaredTransitionError" and run.error["message"] == expected
    assert "unreachable" not in run.error["message"]


def test_a_schema_version_that_is_not_a_number_is_a_schema_error(db_path):
    Lab(db_path).close()
    con = duckdb.connect(db_path)
    con.execute("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(StoreSchemaError, match=r"says its schema_version is 'abc', not a number: its meta table was edited"):
        Lab(db_path)


# -- read-only file and folder, in a real process ---------------------------------------------------

OPENER = """
import json, sys
from lab import Lab
from lab.errors import StorePermissionError
try:
    Lab(sys.argv[1]).close()
    print(json.dumps({"opened": True}))
except StorePermissionError as exc:
    print(json.dumps({"type": type(exc).__name__, "message": str(exc), "permission": isinstance(exc, PermissionError)}))
"""


def _open_without_write_access(path: Path) -> dict:
    """Open `path` with `Lab` in a subprocess for which file modes are enforced, even as root."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) is needed to test read-only stores as root"
        caps = "-dac_override,-dac_read_search"
        prefix = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [*prefix, sys.executable, "-c", OPENER, os.fspath(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": os.fspath(root)},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _read_only(path: Path) -> None:
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH | (stat.S_IXUSR if path.is_dir() else 0))


@pytest.fixture
def restore_modes():
    changed: list[Path] = []
    yield changed
    for p in changed:
        p.chmod(0o755 if p.is_dir() else 0o644)


def test_a_read_only_store_file_says_so(tmp_path, restore_modes):
    db = tmp_path / "lab.duckdb"
    Lab(os.fspath(db)).close()
    _read_only(db)
    restore_modes.append(db)
    got = _open_without_write_access(db)
    assert got.get("type") == "StorePermissionError" and got["permission"], got
    message = got["message"]
    assert f"the file {db} is read-only to this process" in message
    assert "chmod u+w" in message and f"python -m lab runs --store {db}" in message
    assert "not a DuckDB database" not in message and "move the file aside" not in message


@pytest.mark.parametrize("where", ["in-it", "below-it", "journal-beside-a-writable-file"])
def test_a_read_only_folder_says_so(tmp_path, restore_modes, where):
    folder = tmp_path / "locked"
    folder.mkdir()
    if where == "journal-beside-a-writable-file":
        Lab(os.fspath(folder / "lab.duckdb")).close()
        (folder / "lab.duckdb.journal").unlink()
    db = folder / ("sub/lab.duckdb" if where == "below-it" else "lab.duckdb")
    _read_only(folder)
    restore_modes.append(folder)
    got = _open_without_write_access(db)
    assert got.get("type") == "StorePermissionError" and got["permission"], got
    assert f"the folder {folder} is read-only to this process" in got["message"]
    assert "Lab('elsewhere.duckdb')" in got["message"]
