"""An evaluation whose process is killed (SIGKILL) mid-case continues in a new process: the same
`lab.evaluate` call runs only the unfinished cases (the killed case's run resumes from its last
checkpoint; the cases done before the kill are not run again) and scores them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import Lab

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _process(store: Path, where: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "GRAPHLAB_EVAL_DIR": str(where), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.evals.restart_graph", str(store)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _entered(lab: Lab, run_id: str, node: str) -> int:
    return sum(1 for e in lab.events(run_id) if e.kind == "entered" and e.node_id == node)


def test_a_killed_evaluation_continues_its_unfinished_cases(tmp_path: Path) -> None:
    store = tmp_path / "lab.duckdb"
    first = _process(store, tmp_path)
    deadline = time.monotonic() + 120
    while not (tmp_path / "entered").exists():  # case c3's station is at work: kill the process there
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "case c3 never started"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)  # reaps it and closes its pipes

    lab = Lab(str(store))
    [rec] = lab.store.evaluations()
    runs = {int(i): r for r, i in lab.sql(
        "select run_id, payload->'tags'->>'index' from events where kind = 'started' and payload->'tags'->>'evaluation' = ?",
        [rec.evaluation_id],
    ).fetchall()}  # fmt: skip
    assert sorted(runs) == list(range(6))  # every case's run was created before any was driven
    statuses = [lab.store.get_run(runs[i]).status for i in range(6)]
    assert (
        statuses[:3] == ["done"] * 3
        and statuses[3] in ("running", "interrupted")
        and statuses[4:] == ["created"] * 2
    )
    scored = [(c.case_name, c.status) for c in lab.store.eval_cases(rec.evaluation_id)]
    assert scored == [("c0", "scored"), ("c1", "scored"), ("c2", "scored")]  # scored as each run ended
    before = {i: _entered(lab, runs[i], "Square") for i in range(6)}
    lab.close()

    (tmp_path / "release").touch()
    second = _process(store, tmp_path)
    out, err = second.communicate(timeout=240)
    assert second.returncode == 0, err
    assert out.strip() == "[('scored', 6)]"

    lab = Lab(str(store))
    try:
        ev = lab.evaluation(rec.evaluation_id)
        rows = ev.rows()
        assert [(r.run_id, r.status, r.output, r.assertions) for r in rows] == [
            (runs[i], "scored", i * i, {"EqualsExpected": True}) for i in range(6)
        ]
        after = {i: _entered(lab, runs[i], "Square") for i in range(6)}
        assert [after[i] - before[i] for i in range(6)] == [0, 0, 0, 1, 1, 1]  # done cases did not run again
        assert any(e.kind == "resumed" for e in lab.events(runs[3]))  # the killed case resumed its run
    finally:
        lab.close()
