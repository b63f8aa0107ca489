"""Sealed session folders (seed 004 "Server-managed persistence", "The planning folder"; issue 19 req 6).

Scenarios:
- an exported run keeps session.json (schema-validated), .session-token (HMAC seal) and the
  README's Progress table current after every change; a person's README text is kept
- a changed session.json, a changed token, or a folder sealed with another lab's key is a hard
  SessionStoreError SEAL_MISMATCH, and nothing is resumed
- writes are atomic and ordered (temp files, then session.json, then the token); a crash between
  the two renames is completed on the next read, a crash before them leaves the old pair
- resume from the folder's path continues the run: after the lab closes, after a real SIGKILL of
  the process that ran it, and against a store that never held the run; on resume the lab writes
  the new request and the declared defaults the bag lacks
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lab import Lab
from lab.errors import RunStateError
from lab.workflow.errors import SessionStoreError
from lab.workflow.session import KEY_FILE, SessionFile, lab_key, read_session, session_index, write_sealed
from tests.integration.workflow_flows import FLOW, killable_workers, workers

HERE = Path(__file__).resolve().parent


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def doc(folder: Path) -> dict:
    return json.loads((folder / "session.json").read_text())


def progress(folder: Path) -> list[str]:
    text = (folder / "README.md").read_text()
    return [
        line for line in text.splitlines() if line.startswith("| ") and not line.startswith(("| #", "| ---"))
    ]


def test_export_keeps_the_folder_current(tmp_path: Path) -> None:
    """Two files live in the planning folder under the engineering root: session.json, the
    human-inspectable, schema-validated state (see the session-file schema), and .session-token, an
    HMAC-signed seal binding that state to the server key."""
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    wf = lab.workflow(FLOW, workers=workers([(1, False)]))
    folder = tmp_path / "plans" / "pr-12"
    run = wf.start(user_request="review PR 12", folder=folder)
    assert files(folder) == [".session-token", "README.md", "session.json"]
    d = doc(folder)
    SessionFile.model_validate(d)
    assert d["schema"] == "graphlab.workflow.session/1" and d["run_id"] == run.id
    assert d["session_index"] == session_index(run.id) and len(d["session_index"]) == 6
    assert d["status"] == "created" and d["current_activity"] == "triage"
    assert d["variables"]["user_request"] == "review PR 12"
    token = (folder / ".session-token").read_text().split()
    assert token[:3] == ["graphlab-session-seal", "v1", d["session_index"]] and len(token[3]) == 64
    key_file = tmp_path / KEY_FILE
    assert key_file.exists() and (key_file.stat().st_mode & 0o777) == 0o600
    assert progress(folder) == ["| 1 | triage | pending |  |  |"]

    readme = folder / "README.md"
    readme.write_text(
        readme.read_text().replace("## Progress", "My notes: check the auth module.\n\n## Progress")
    )
    run.run()
    assert doc(folder)["status"] == "waiting"
    assert doc(folder)["checkpoint"]["choices"][0] == {"id": "deep", "label": "Deep review"}
    assert progress(folder) == ["| 1 | triage | waiting |  |  |"]
    wf.choose(run, "deep")
    run.run()
    assert run.status == "done"
    d = doc(folder)
    assert d["status"] == "done" and d["current_activity"] is None and d["variables"]["mode"] == "deep"
    assert progress(folder) == [
        "| 1 | triage | complete | review | review |",
        "| 2 | review | complete | fix | fix |",
        "| 3 | fix | complete | back | review |",
        "| 4 | review | complete | done | end |",
    ]
    assert "My notes: check the auth module." in readme.read_text()  # the person's text is kept
    assert not [n for n in os.listdir(folder) if n.endswith(".tmp")]
    assert read_session(folder, lab_key(lab)).status == "done"
    lab.close()


def test_the_table_advances_when_a_worker_is_lost_and_replaced(tmp_path: Path) -> None:
    """The table still advances when a worker is lost and replaced."""
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    attempts = []

    def review(ctx):
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("the worker was lost")
        return {"variables": {"bug_count": 0}}

    wf = lab.workflow(FLOW, workers={"review": review})
    folder = tmp_path / "s"
    run = wf.start(at="review", folder=folder)
    run.run()
    assert run.status == "failed" and progress(folder) == ["| 1 | review | failed |  |  |"]
    run.retry()  # a replacement worker
    assert run.status == "done" and progress(folder) == ["| 1 | review | complete | done | end |"]
    lab.close()


@pytest.mark.parametrize("tamper", ["variable", "whitespace", "token", "other_key"])
def test_a_mismatched_seal_is_a_hard_error_and_nothing_resumes(tmp_path: Path, tamper: str) -> None:
    """Reads verify the seal and any mismatch is a hard SessionStoreError with code SEAL_MISMATCH."""
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    wf = lab.workflow(FLOW)
    folder = tmp_path / "s"
    run = wf.start(folder=folder)
    run.run()
    events_before = len(run.events())
    runs_before = len(lab.runs())
    if tamper == "variable":
        d = doc(folder)
        d["variables"]["mode"] = "deep"
        (folder / "session.json").write_text(json.dumps(d, indent=2) + "\n")
    elif tamper == "whitespace":
        (folder / "session.json").write_text((folder / "session.json").read_text() + "\n")
    elif tamper == "token":
        token = (folder / ".session-token").read_text()
        (folder / ".session-token").write_text(
            token[:-5] + ("0000" if not token[-5:-1] == "0000" else "1111") + "\n"
        )
    else:
        write_sealed(os.fspath(folder), b"another lab's key" * 2, doc(folder))
    with pytest.raises(SessionStoreError) as info:
        wf.resume(folder)
    assert info.value.code == "SEAL_MISMATCH"
    assert "changed outside the lab, or sealed by another lab's key" in str(info.value)
    assert len(lab.runs()) == runs_before and len(run.events()) == events_before
    lab.close()


def test_missing_files_and_foreign_sessions(tmp_path: Path) -> None:
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    wf = lab.workflow(FLOW)
    with pytest.raises(SessionStoreError) as info:
        wf.resume(tmp_path / "nowhere")
    assert info.value.code == "SESSION_MISSING"
    folder = tmp_path / "s"
    run = wf.start(folder=folder)
    (folder / ".session-token").unlink()
    with pytest.raises(SessionStoreError) as info:
        wf.resume(folder)
    assert info.value.code == "TOKEN_MISSING"
    wf.export(run, folder)
    with pytest.raises(SessionStoreError) as info:
        wf.start(folder=folder)  # another run into the same folder
    assert info.value.code == "FOLDER_IN_USE"
    other = lab.workflow({**FLOW, "name": "other-flow"})
    with pytest.raises(SessionStoreError) as info:
        other.resume(folder)
    assert info.value.code == "WRONG_WORKFLOW"
    lab.close()


def test_writes_are_atomic_and_ordered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes are atomic (write-temp, then rename) and ordered."""
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    wf = lab.workflow(FLOW)
    folder = tmp_path / "s"
    run = wf.start(folder=folder)
    key = lab_key(lab)
    old = doc(folder)
    renames: list[tuple[str, str]] = []
    real_replace = os.replace
    monkeypatch.setattr(
        os, "replace", lambda a, b: (renames.append((Path(a).name, Path(b).name)), real_replace(a, b))[1]
    )
    new = {**old, "status": "running"}
    write_sealed(os.fspath(folder), key, new)
    assert renames == [("session.json.tmp", "session.json"), (".session-token.tmp", ".session-token")]

    # a crash after session.json's rename, before the token's: the next read completes the write
    renames.clear()
    crash_after = {**old, "status": "queued"}

    def crash_on_token(a, b):
        if Path(b).name == ".session-token":
            raise KeyboardInterrupt("the process died here")
        return real_replace(a, b)

    monkeypatch.setattr(os, "replace", crash_on_token)
    with pytest.raises(KeyboardInterrupt):
        write_sealed(os.fspath(folder), key, crash_after)
    monkeypatch.setattr(os, "replace", real_replace)
    assert (folder / ".session-token.tmp").exists()
    assert read_session(folder, key).status == "queued"
    assert not (folder / ".session-token.tmp").exists()

    # a crash before either rename: the old pair is intact and still verifies
    def crash_on_json(a, b):
        raise KeyboardInterrupt("the process died here")

    monkeypatch.setattr(os, "replace", crash_on_json)
    with pytest.raises(KeyboardInterrupt):
        write_sealed(os.fspath(folder), key, {**old, "status": "failed"})
    monkeypatch.setattr(os, "replace", real_replace)
    assert read_session(folder, key).status == "queued"
    assert run.status == "created"
    lab.close()


def test_resume_from_the_folder_after_the_lab_closed(tmp_path: Path) -> None:
    """A session can be paused, killed, or resumed at any point: resume is one start_session call with
    the planning folder's absolute path. On resume the server writes the new request and any declared
    default the bag lacks."""
    db = os.fspath(tmp_path / "lab.duckdb")
    folder = tmp_path / "s"
    lab = Lab(db)
    wf = lab.workflow(FLOW, workers=workers([]))
    run = wf.start(user_request="first", folder=folder, variables={"notes": ["a"]})
    run.run()
    run_id = run.id
    # a bag without the declared default `mode` (say an older definition's session)
    run.edit_state(variables={k: v for k, v in run.state.variables.items() if k != "mode"})
    lab.close()

    lab = Lab(db)
    wf = lab.workflow(FLOW, workers=workers([]))
    resumed = wf.resume(folder, user_request="second")
    assert resumed.id == run_id
    assert (
        resumed.state.variables["user_request"] == "second" and resumed.state.variables["mode"] == "standard"
    )
    assert resumed.state.variables["notes"] == ["a"]
    assert [e.kind for e in resumed.events()][-2:] == ["resumed", "edited"]
    resumed.run()
    assert resumed.status == "waiting"  # the edit moved the head off the wait: triage asks again
    wf.choose(resumed, "quick")
    resumed.run()
    assert resumed.status == "done" and doc(folder)["status"] == "done"
    with pytest.raises(RunStateError, match="done"):
        resumed.edit_state(variables={})
    lab.close()


def test_resume_against_a_store_that_never_held_the_run(tmp_path: Path) -> None:
    """Because state lives on disk rather than in the agent ... server restarts are transparent: a new
    store continues from the session's own state (the bag and the trail), recording where it came from."""
    folder = tmp_path / "s"
    lab = Lab(os.fspath(tmp_path / "first.duckdb"))
    wf = lab.workflow(FLOW, workers=workers([(2, False)]))
    run = wf.start(user_request="first", folder=folder)
    run.run()
    wf.choose(run, "deep")
    run.run(max_steps=2)  # triage and review settle; fix is next
    assert doc(folder)["current_activity"] == "fix"
    first_id = run.id
    lab.close()

    lab = Lab(os.fspath(tmp_path / "second.duckdb"))  # same folder: the same session.key
    wf = lab.workflow(FLOW, workers=workers([]))
    resumed = wf.resume(folder)
    assert resumed.id != first_id and resumed.next_stations == ("fix",)
    assert [t.activity for t in wf.trail(resumed)] == ["triage", "review"]
    resumed.run()
    assert resumed.status == "done"
    d = doc(folder)
    assert d["run_id"] == resumed.id and d["resumed_from"] == [first_id]
    assert [r.split("|")[2].strip() for r in progress(folder)] == ["triage", "review", "fix", "review"]
    with pytest.raises(RunStateError, match="nothing to resume"):
        lab.close()
        Lab(os.fspath(tmp_path / "third.duckdb")).workflow(FLOW).resume(folder)


@pytest.mark.slow
def test_resume_after_the_process_was_killed(tmp_path: Path) -> None:
    """A session can be paused, killed, or resumed at any point (a real SIGKILL mid-activity). The
    orchestrator marks a row in progress before it hands the activity to a worker, and complete once that
    activity's work is committed."""
    db, folder = os.fspath(tmp_path / "lab.duckdb"), tmp_path / "s"
    proc = subprocess.Popen(
        [sys.executable, os.fspath(HERE / "workflow_worker.py"), db, os.fspath(folder)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "GRAPHLAB_TEST_BLOCK_FIX": "1"},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("READY "), line
        run_id = line.split()[1]
        assert doc(folder)["progress"][-1] == {
            "n": 3,
            "activity": "fix",
            "status": "in progress",
            "exit": None,
            "next": None,
        }
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()
    lab = Lab(db)
    wf = lab.workflow(FLOW, workers=killable_workers(threading.Event()))  # the same revision
    run = wf.resume(folder)
    assert run.id == run_id and run.next_stations == ("fix",)
    assert [e.kind for e in run.events()][-2:] == ["interrupted", "resumed"]  # fix was in flight
    run.run()
    assert run.status == "done"
    assert [t.activity for t in wf.trail(run)] == ["triage", "review", "fix", "review", "fix", "review"]
    assert doc(folder)["status"] == "done"
    lab.close()
