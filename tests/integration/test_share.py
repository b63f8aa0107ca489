"""Sharing runs on a real DuckDB file (issue 28 parts 2 and 3): the export's data and the comparison.

Scenarios: a run with an interrupt and a gate exports its branch, waits with their verdicts and
events; a parent with a subgraph child exports the child too; `lab.read` (no graph code) exports
the same data; a rewound run's `(run, seq)` branch exports that branch; a hostile state cannot
close the data block; a run and its fork compare with their shared prefix, the aligned state
differences and the first differing station's inputs; two branches of one run compare; the
comparison's widget builds from the comparison alone; bad arguments are clear `ArgumentError`s.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from lab import Lab
from lab.errors import ArgumentError
from lab.share.page import page_data as read_page_data
from lab.widgets.compare_view import CompareView
from tests.conftest import Counter, Inc, declare_counter
from tests.integration.control_graphs import CHILD, Laps, Prepare, child_graph, parent_graph
from tests.integration.gate_graphs import Draft, Mail, declare_mail


def page_data(path: Path) -> dict[str, Any]:
    return read_page_data(path.read_text())


@pytest.fixture
def lab(tmp_path) -> Any:
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    yield lab
    lab.close()


def test_a_gated_run_exports_its_branch_waits_and_events(lab, tmp_path) -> None:
    run = declare_mail(lab).start(Draft(), state=Mail())
    run.run()
    run.resume_with("EU")
    run.run()
    run.deny(note="too <b>blunt</b>")
    run.run()
    run.resume_with("US")
    run.run()
    run.approve(note="ok")
    run.run()
    assert run.status == "done"
    path = run.export_html(tmp_path / "mail.html")
    (data,) = page_data(path)["runs"]
    assert [c["seq"] for c in data["checkpoints"]] == list(run.history().seqs)
    assert [c["state"] for c in data["checkpoints"]] == [r.state for r in run.history()]
    assert data["status"] == "done" and data["output"] == run.output
    verdicts = [(w["kind"], (w["resolution"] or {}).get("approved"), (w["resolution"] or {}).get("note")) for w in data["waits"]]
    assert ("consent", False, "too <b>blunt</b>") in verdicts and ("consent", True, "ok") in verdicts
    assert [w["kind"] for w in data["waits"]].count("interrupt") == 2
    assert [e["kind"] for e in data["events"]] == [e.kind for e in run.events()]
    stations = {c["station"] for c in data["checkpoints"]}
    assert {"Draft", "ConfirmSend", "Send"} <= stations
    html = path.read_text()
    assert "too <b>blunt</b>" not in html  # the note is in the data, escaped
    assert '<svg class="gl-graph"' in html and 'data-station="ConfirmSend"' in html  # drawn by dot


def test_a_subgraph_child_is_exported_with_its_parent(lab, tmp_path) -> None:
    CHILD["graph"] = child_graph(lab)
    parent = parent_graph(lab).start(Prepare(), state=Laps())
    parent.run()
    parent.resume_with("Ada")
    parent.run()
    (link,) = parent.events("subgraph")
    runs = page_data(parent.export_html(tmp_path / "parent.html"))["runs"]
    assert [r["id"] for r in runs] == [parent.id, link.payload["child_run"]]
    assert runs[0]["children"] == [{"run": link.payload["child_run"], "graph": link.payload["child_graph"], "node": link.node_id}]
    assert runs[1]["child_of"] == {"run": parent.id, "node": link.node_id} and runs[1]["status"] == "done"
    assert 'id="run-' + link.payload["child_run"] + '"' in (tmp_path / "parent.html").read_text()


def test_a_stored_run_and_a_branch_export(lab, tmp_path) -> None:
    run = declare_counter(lab).start(Inc(), state=Counter())
    run.run()
    first = page_data(run.export_html(tmp_path / "a.html"))["runs"][0]
    again = page_data(lab.export_html(lab.read(run.id), tmp_path / "b.html"))["runs"][0]
    assert again["checkpoints"] == first["checkpoints"] and again["events"] == first["events"]
    old_head = run.head
    run.rewind(2)
    run.step()  # a new branch from 2
    branch = page_data(lab.export_html((run, old_head), tmp_path / "c.html"))["runs"][0]
    assert branch["upto"] == old_head and branch["checkpoints"][-1]["seq"] == old_head
    assert [c["seq"] for c in branch["checkpoints"]] == list(range(old_head + 1))
    assert [b["seqs"] for b in branch["branches"]] == [list(range(old_head + 1))]  # that branch alone
    head = page_data(run.export_html(tmp_path / "d.html"))["runs"][0]
    assert [c["seq"] for c in head["checkpoints"]] == list(range(run.head + 1))  # the whole tree
    assert [(b["seqs"], b["head"]) for b in head["branches"]] == [
        ([0, 1, 2, run.head], True),  # the head's branch first
        (list(range(old_head + 1)), False),
    ]


def test_a_hostile_state_cannot_close_the_data_block(lab, tmp_path) -> None:
    hostile = ["</script><script>alert(1)</script>", "<!--", "a & b", "\u2028"]
    run = declare_counter(lab).start(Inc(), state=Counter(seen=list(hostile)))
    run.run()
    html = run.export_html(tmp_path / "x.html").read_text()
    assert html.count("<script") == 2 and html.count("</script>") == 2  # the data block and the page script
    assert page_data(tmp_path / "x.html")["runs"][0]["checkpoints"][0]["state"]["seen"] == hostile


def test_a_run_and_its_fork_compare(lab, tmp_path) -> None:
    run = declare_counter(lab).start(Inc(), state=Counter())
    run.run()
    fork = run.fork(2, state=Counter(count=10, seen=["edited"]))
    fork.run()
    cmp = lab.compare(run, fork)
    assert cmp.shared == 2 and cmp.diverged  # checkpoints 0 and 1 are the fork's lineage
    assert [(r.a["seq"], r.b and r.b["seq"]) for r in cmp.rows[:3]] == [(1, 1), (2, 0), (3, 1)]
    diverged = cmp.rows[1].diff
    assert {c.path for c in diverged.changes} >= {"count", "seen[0]"}
    assert cmp.first_b["station"] == "Inc" and cmp.first_b["state_before"] == {"count": 10, "seen": ["edited"]}
    assert cmp.first_b["fields"] == {"by": 2}
    assert cmp.first_a["station"] == "Inc" and cmp.first_a["from_seq"] == 2  # Check at 2 ran before the fork: the same on both
    shared, a, b = cmp.paths()
    assert shared == ["Inc"] and a[:2] == ["Check", "Inc"] and b[:2] == ["Check", "Inc"]  # the fork copied Check's checkpoint
    svg = cmp.svg()
    assert "gl-diverged" in svg and "gl-side-a" in svg and "gl-side-b" in svg
    assert 'class="node gl-end gl-side-a gl-side-b" data-station="__end__"' in svg  # both sides finished
    assert "<style>" in CompareView(cmp).summary.value  # the widget brings the comparison's own layout
    data = page_data(lab.export_html([run, fork], tmp_path / "cmp.html"))
    assert [r["id"] for r in data["runs"]] == [run.id, fork.id]
    html = (tmp_path / "cmp.html").read_text()
    assert "First differing station" in html and "gl-side-b" in html

    view = CompareView(cmp)
    assert "First differing station" in view.summary.value
    view.pick(1)
    assert "count" in view.detail.value and len(view.picker.options) == len(cmp.rows) <= 200


def test_the_first_differing_station_shows_its_differing_inputs(lab) -> None:
    g = declare_counter(lab)
    one, three = g.start(Inc(by=1), state=Counter()), g.start(Inc(by=3), state=Counter())
    one.run()
    three.run()
    cmp = lab.compare(one, three)
    assert cmp.shared == 1  # the first checkpoints hold the same state
    assert (cmp.first_a["station"], cmp.first_a["fields"]) == ("Inc", {"by": 1})
    assert (cmp.first_b["station"], cmp.first_b["fields"]) == ("Inc", {"by": 3})
    assert cmp.first_a["state_before"] == cmp.first_b["state_before"] == {"count": 0, "seen": []}


def test_two_branches_of_one_run_compare(lab) -> None:
    run = declare_counter(lab).start(Inc(), state=Counter())
    run.run()
    old = run.head
    run.rewind(2)
    run.edit_state(count=100)
    run.run()
    cmp = lab.compare((run, old), run)
    assert cmp.shared == 3 and cmp.rows[0].diff is not None and not cmp.rows[0].diff
    same = lab.compare(run, run)
    assert not same.diverged and same.first_a is None and "the same" in repr(same)


def test_bad_arguments_are_named(lab, tmp_path) -> None:
    run = declare_counter(lab).start(Inc(), state=Counter())
    run.run()
    with pytest.raises(ArgumentError, match="no checkpoint 99"):
        lab.compare(run, (run, 99))
    with pytest.raises(ArgumentError, match="pass a run"):
        lab.compare(run, "nope")
    with pytest.raises(ArgumentError, match="checkpoint_seq"):
        lab.compare(run, (run, "2"))
    with pytest.raises(ArgumentError, match="does not exist"):
        run.export_html(tmp_path / "missing" / "x.html")
    with pytest.raises(ArgumentError, match="is a directory"):
        run.export_html(tmp_path)
    with pytest.raises(ArgumentError, match="nothing to export"):
        lab.export_html([], tmp_path / "x.html")


def test_the_export_pauses_the_cycle_collector_and_restores_it(lab, tmp_path, monkeypatch) -> None:
    import gc

    from lab.share import collect

    run = declare_counter(lab, "gc_counter").start(Inc(), state=Counter())
    run.run()
    seen: list[bool] = []

    def waits(stored_run: Any) -> Any:
        seen.append(gc.isenabled())
        return collect.waits_of(stored_run)

    monkeypatch.setitem(collect.SECTIONS, "waits", waits)
    assert gc.isenabled()
    run.export_html(tmp_path / "a.html")
    assert seen == [False] and gc.isenabled()  # paused while the page was built, then back on

    def broken(stored_run: Any) -> Any:
        raise RuntimeError("a reader failed")

    monkeypatch.setitem(collect.SECTIONS, "waits", broken)
    with pytest.raises(RuntimeError, match="a reader failed"):
        run.export_html(tmp_path / "b.html")
    assert gc.isenabled()  # restored when the export fails too

    monkeypatch.setitem(collect.SECTIONS, "waits", waits)
    gc.disable()
    try:
        run.export_html(tmp_path / "c.html")
        assert not gc.isenabled()  # left off when it was off
    finally:
        gc.enable()
