"""Sharing reads runs only through the public API, so it works the same on both stores.

Scenarios, on DuckDB and on PostgreSQL: a run and its fork export as one page each and compared,
with the same checkpoints, events and comparison on either backend.
"""

from __future__ import annotations

from pathlib import Path

from lab.share.page import page_data as read_page_data
from tests.conftest import Counter, Inc, declare_counter


def _runs(path: Path) -> list[dict]:
    return read_page_data(path.read_text())["runs"]


def test_export_and_compare_on_both_stores(lab, tmp_path) -> None:
    run = declare_counter(lab, "share_counter").start(Inc(), state=Counter(seen=["</script>"]))
    run.run()
    fork = run.fork(2, state=Counter(count=10))
    fork.run()
    (data,) = _runs(run.export_html(tmp_path / "run.html"))
    assert [c["seq"] for c in data["checkpoints"]] == list(run.history().seqs)
    assert data["events"] == [
        {"seq": e.seq, "kind": e.kind, "node": e.node_id, "attempt": e.attempt, "cp": e.checkpoint_seq,
         "payload": e.payload, "at": e.created_at.isoformat(timespec="milliseconds")}
        for e in run.events()
    ]  # fmt: skip
    assert [c["station"] for c in data["checkpoints"][1:3]] == ["Inc", "Check"]
    cmp = lab.compare(run, fork)
    assert cmp.shared == 2 and cmp.first_b["state_before"] == {"count": 10, "seen": []}
    pair = _runs(lab.export_html([run, fork], tmp_path / "cmp.html"))
    assert [r["id"] for r in pair] == [run.id, fork.id] and pair[1]["parent_run"] == run.id
