"""Seed 004 "The planning folder": the Progress row of an activity reads in progress before its worker runs."""

from __future__ import annotations

import json
from pathlib import Path

from lab import Lab
from tests.integration.workflow_flows import FLOW, workers


def _rows(folder: Path) -> list[list[str]]:
    text = (folder / "README.md").read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith(("| #", "| ---"))]
    return [[cell.strip() for cell in ln.strip("|").split("|")] for ln in lines]


def test_the_row_reads_in_progress_before_the_worker_gets_the_activity(tmp_path: Path) -> None:
    """Seed 004: "The orchestrator marks a row in progress before it hands the activity to a worker, and
    complete once that activity's work is committed." Each worker, the moment it is called, reads the
    folder: its own activity's row is the last one, in progress, in both the README's Progress table and
    session.json; once the run is done every row is complete."""
    folder = tmp_path / "plans"
    seen: list[tuple[str, list[str], dict]] = []

    def spying(name: str, fn):
        def worker(ctx):
            session = json.loads((folder / "session.json").read_text())
            seen.append((name, _rows(folder)[-1], session["progress"][-1]))
            return fn(ctx)

        return worker

    with Lab(tmp_path / "lab.duckdb") as lab:
        wf = lab.workflow(FLOW, workers={k: spying(k, v) for k, v in workers([(2, False)]).items()})
        run = wf.start(user_request="review PR 12", folder=folder)
        run.run()
        wf.choose(run, "deep")
        run.run()
        assert run.status == "done"
    assert [name for name, _, _ in seen] == ["review", "fix", "review"]
    for name, row, entry in seen:
        assert row[1:3] == [name, "in progress"], (name, row)
        assert (entry["activity"], entry["status"]) == (name, "in progress")
    assert {r[2] for r in _rows(folder)} == {"complete"}


import pytest  # noqa: E402

from lab.workflow.errors import SessionStoreError  # noqa: E402


def test_a_session_is_addressed_by_its_session_index_and_lives_under_the_engineering_root(tmp_path: Path) -> None:
    """Seed 004: "The server owns the canonical state and writes it on every call that changes the session —
    agents only ever pass their 6-character session_index. Two files live in the planning folder under the
    engineering root". With `wf.root` set, a relative folder is placed under it and one outside it is
    refused; `wf.resume(index)` finds the session by its index alone, in this process and, after the lab
    closed, under the root."""
    root = tmp_path / "eng"
    root.mkdir()
    with Lab(tmp_path / "lab.duckdb") as lab:
        wf = lab.workflow(FLOW, workers=workers([(2, False)]))
        wf.root = str(root)
        with pytest.raises(SessionStoreError) as outside:
            wf.start(user_request="x", folder=tmp_path / "elsewhere")
        assert outside.value.code == "OUTSIDE_ROOT" and not (tmp_path / "elsewhere" / "session.json").exists()
        assert lab.runs() == []  # refused before the run exists
        run = wf.start(user_request="review PR 12", folder="plans/pr-12")
        folder = root / "plans" / "pr-12"
        index = json.loads((folder / "session.json").read_text())["session_index"]
        assert len(index) == 6 and wf.sessions[run.id].path == str(folder)
        run.run()
        assert run.status == "waiting"
        assert wf.resume(index).id == run.id  # found among this process's sessions
        run_id = run.id
    with Lab(tmp_path / "lab.duckdb") as lab:
        wf = lab.workflow(FLOW, workers=workers([(2, False)]))
        with pytest.raises(SessionStoreError) as unknown:
            wf.resume(index)  # no root: only this process's sessions are searched
        assert unknown.value.code == "UNKNOWN_SESSION" and "wf.root" in str(unknown.value)
        wf.root = str(root)
        resumed = wf.resume(index)  # found under the root by its index alone
        assert resumed.id == run_id
        wf.choose(resumed, "deep")
        resumed.run()
        assert resumed.status == "done"
        with pytest.raises(SessionStoreError) as missing:
            wf.resume("abcdef" if index != "abcdef" else "fedcba")
        assert missing.value.code == "UNKNOWN_SESSION"


def test_the_documents_a_worker_reports_are_listed_in_the_run_notes(tmp_path: Path) -> None:
    """Seed 004: "The notes of the run — the progress README, the session files, and the documents an
    activity produces — stay in that folder ... The worker reports the documents it produced and does not
    edit the table." A worker returns `documents`; they are kept in the run's trail (checkpointed), listed
    on the activity's row of session.json and in a Documents column of the README's Progress table, and
    they survive a resume from the folder into a store that never held the run."""
    folder = tmp_path / "plans"
    base = workers([(1, False)])

    def review(ctx):
        out = base["review"](ctx)
        (folder / f"review-{len(list(folder.glob('review-*.md'))) + 1}.md").write_text("# findings\n")
        return {"variables": dict(out.variables), "step_manifest": out.step_manifest,
                "documents": [f"review-{len(list(folder.glob('review-*.md')))}.md"]}  # fmt: skip

    with Lab(tmp_path / "lab.duckdb") as lab:
        wf = lab.workflow(FLOW, workers={**base, "review": review})
        run = wf.start(user_request="review PR 12", folder=folder)
        run.run()
        wf.choose(run, "deep")
        run.run(max_steps=2)  # triage, then review (reports review-1.md); fix is next
        assert [t.documents for t in run.graph.trail(run)] == [(), ("review-1.md",)]
        rows = json.loads((folder / "session.json").read_text())["progress"]
        assert rows[1]["documents"] == ["review-1.md"] and "documents" not in rows[0]
        header = next(ln for ln in (folder / "README.md").read_text().splitlines() if ln.startswith("| #"))
        assert header.endswith("| Documents |") and _rows(folder)[1][5] == "review-1.md"
    with Lab(tmp_path / "other.duckdb") as lab:  # the session's own state carries them on
        wf = lab.workflow(FLOW, workers={**base, "review": review})
        resumed = wf.resume(folder)
        resumed.run()
        assert resumed.status == "done"
        assert [t.documents for t in resumed.graph.trail(resumed)] == [(), ("review-1.md",), (), ("review-2.md",)]
        assert [r[5] for r in _rows(folder)] == ["", "review-1.md", "", "review-2.md"]
        bad = lab.workflow(FLOW, workers={**base, "review": lambda ctx: {"documents": "notes.md"}})
        failed = bad.start(user_request="x")
        failed.run()
        bad.choose(failed, "deep")
        failed.run(raise_on_failure=False)
        assert failed.status == "failed" and "a list of their paths" in failed.error["message"]
