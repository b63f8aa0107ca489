"""Batch runs on a real local Ray (one session for the test session, 2 CPUs).

On the embedded DuckDB store the workers send their boundaries back to this process, which
writes them; on PostgreSQL the workers write directly. A failing input fails its run alone;
runs parked at a gate wait and are counted; a batch killed with its kernel continues with only
its unfinished runs; `lab.sql` groups a batch's runs; the progress widget shows the tally.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab import ArgumentError, Lab
from lab.batch import release_workers
from lab.widgets.batch_widget import BatchProgress
from tests.store.graphs import Count, Order, Prepare, Tally, declare_orders, declare_tally

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a local Ray may take minutes to start on a busy machine


def test_a_batch_runs_every_input_and_a_failing_one_fails_alone(location: str, ray_session: str) -> None:
    lab = Lab(location)
    g = declare_tally(lab)
    seen: list[dict[str, int]] = []
    batch = lab.map(g, [Tally(limit=n) for n in (3, 5, -1, 4)], entry=Count(), workers=2, progress=False)
    assert [(r.status, r.output) for r in batch.rows()] == [("done", 3), ("done", 5), ("failed", None), ("done", 4)]
    bad = batch.rows()[2]
    assert bad.error == "ValueError: a negative limit: -1"
    assert batch.counts() == {"done": 3, "failed": 1}
    for run_id, limit in zip(batch.run_ids, (3, 5), strict=False):
        cps = lab.store.checkpoints(run_id)
        assert [cp.state["n"] for cp in cps] == list(range(limit + 1))  # every boundary, durable here
        events = lab.events(run_id)
        assert [e.seq for e in events] == list(range(len(events)))
        assert [e.kind for e in events][:2] == ["started", "resumed"] and events[-1].kind == "done"
    grouped = lab.sql(
        "select payload->'tags'->>'batch' as batch, r.status, count(*) as n from events e "
        "join runs r on r.run_id = e.run_id where e.kind = 'started' group by 1, 2 order by 2"
    ).fetchall()
    assert grouped == [(batch.id, "done", 3), (batch.id, "failed", 1)]
    html = batch._repr_html_()
    assert batch.id in html and "ValueError: a negative limit: -1" in html and html.count("<tr>") == 5
    again = batch.run(on_progress=seen.append, progress=False)  # nothing left to drive
    assert again.counts() == {"done": 3, "failed": 1} and seen[-1] == {"done": 3, "failed": 1}
    lab.close()


def test_runs_parked_at_a_gate_wait_and_continue_after_their_verdicts(location: str, ray_session: str) -> None:
    lab = Lab(location)
    g = declare_orders(lab)
    batch = lab.map(g, [Order(item=f"item{i}") for i in range(4)], entry=Prepare(), workers=2, progress=False)
    assert batch.counts() == {"waiting": 4} and batch.waiting == 4
    assert sorted(w.run_id for w in lab.waiting()) == sorted(batch.run_ids)
    for run_id in batch.run_ids[:3]:
        lab.resume(run_id).approve("ok")
    widget = BatchProgress(total=4, title="orders")
    batch.widget = widget
    batch.run(workers=2, progress=True)
    assert [r.status for r in batch.rows()] == ["done", "done", "done", "waiting"]
    assert [r.output for r in batch.rows()[:3]] == ["shipped item0", "shipped item1", "shipped item2"]
    assert widget.counts == {"done": 3, "waiting": 1} and widget.value == 4
    assert "1 waiting for a verdict" in widget.tally.value
    assert lab.store.checkpoint(batch.run_ids[0], lab.run(batch.run_ids[0]).head_seq).state["log"][-2:] == [
        "verdict True ok", "shipped"]  # fmt: skip
    lab.close()


def test_a_batch_killed_with_its_kernel_resumes_only_unfinished_runs(tmp_path: Path, ray_session: str) -> None:
    path = str(tmp_path / "lab.duckdb")
    marker = tmp_path / "in-flight"
    script = (
        "import sys; from lab import Lab; from tests.store.graphs import Count, Tally, declare_tally\n"
        "lab = Lab(sys.argv[1]); g = declare_tally(lab)\n"
        "states = [Tally(limit=3), Tally(limit=3), Tally(limit=4, marker=sys.argv[2]), Tally(limit=3), Tally(limit=2)]\n"
        "lab.map(g, states, entry=Count(), name='nightly', workers=1, address=sys.argv[3], progress=False)\n"
    )
    release_workers()  # the other process's batch needs a CPU of the shared Ray
    proc = subprocess.Popen([sys.executable, "-c", script, path, str(marker), ray_session], cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the batch never reached its third run"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # the kernel dies with a run in flight on its worker
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    lab = Lab(path)
    declare_tally(lab)
    batch = lab.batch("nightly")
    before = {r.run_id: r.status for r in batch.rows()}
    assert list(before.values()) == ["done", "done", "created", "created", "created"]
    done_events = {r: len(lab.events(r)) for r, s in before.items() if s == "done"}
    batch.run(workers=2, progress=False)
    assert [(r.status, r.output) for r in batch.rows()] == [("done", 3), ("done", 3), ("done", 4), ("done", 3), ("done", 2)]
    assert {r: len(lab.events(r)) for r in done_events} == done_events  # finished runs were not driven again
    lab.close()


def test_bad_batch_arguments_say_what_to_pass(tmp_path: Path) -> None:
    lab = Lab(str(tmp_path / "lab.duckdb"))
    g = declare_tally(lab)
    with pytest.raises(ArgumentError, match="inputs is empty"):
        lab.map(g, [], entry=Count())
    with pytest.raises(ArgumentError, match="entry=Node"):
        lab.map(g, [Tally()])
    with pytest.raises(ArgumentError, match="no batch of that id"):
        lab.batch("nope")
    lab.close()
