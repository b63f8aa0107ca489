"""A shared page's checkpoint tree: a parallel run drawn step by step as the run widget draws it,
and a rewound run's every branch (issue 28 part 2), on a real DuckDB file and the real `dot`.

Scenarios:
- a map of 5 then a join: each checkpoint's `lit` (classes and mark line per station, counts per
  edge; `lit_data`, which the page's script reproduces from each checkpoint's `step`:
  tests/browser/test_export_html.py) is exactly what the run widget draws at that step: `square` lit `▶ ×5`, `map→square`
  taken 5 times, the timeline's words `square ×5`; the last step lights End, `square` `×5`
- a broadcast of 3 into a join, one branch a step longer: the step where two branches reached
  the join shows `2 of 3` (`gl-joining`) with the long branch lit, as the widget does
- a map of 8 joined round after round (its fork stacks grow a frame a round): every step drawn as
  the widget draws it, and drawing one step more reads one checkpoint more (counting is
  incremental: each checkpoint's tally is its parent's plus one step), equal to a full recount
- a run rewound twice: its page holds every checkpoint once and one branch per leaf, the head's
  branch first, labelled as the widget's branch picker labels them; a serial run has no `step`
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from lab import Lab
from lab.share.page import page_data as read_page_data
from lab.widgets import RunWidget
from tests.conftest import Counter, Inc, declare_counter
from tests.unit.test_widgets_parallel import declare_squares, fan_graph


def page_data(path: Path) -> dict[str, Any]:
    return read_page_data(path.read_text())


@pytest.fixture
def lab(tmp_path) -> Any:
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    yield lab
    lab.close()


_NODE = re.compile(r'<g class="node ([^"]*)" data-station="([^"]*)">((?:(?!</g>).)*)</g>', re.S)
_MARK = re.compile(r'<text class="gl-mark"[^>]*>([^<]*)</text>')
_EDGE = re.compile(r'<g class="edge ([^"]*)" data-edge="([^"]*)">(.*?)</g>', re.S)


def widget_drawing(w: RunWidget) -> tuple[dict[str, list[str]], set[str]]:
    """What the run widget draws now: each station's extra classes (past its kind) and mark line, the edges taken."""
    svg = w.graph.value.replace("&#8594;", "→")
    nodes = {}
    for cls, station, inner in _NODE.findall(svg):
        extra = " ".join(c for c in cls.split() if not c.startswith("gl-") or c in _OVERLAY)
        mark = _MARK.search(inner)  # the start point has no mark line
        nodes[station] = [extra, mark.group(1).strip() if mark else None]
    return nodes, {edge for cls, edge, _ in _EDGE.findall(svg) if "gl-trav" in cls}


_OVERLAY = {"gl-current", "gl-visited", "gl-joining", "gl-failed", "gl-parked", "gl-break"}


def lits_of(run: Any) -> dict[int, dict[str, Any]]:
    """Each checkpoint's frontier drawn (`lit_data`): what the page's script draws from the page's steps."""
    from lab.render import spec_from_manifest
    from lab.share.tree import lit_data

    stored = run.lab.read(run.id)
    tree = {r.seq: r for r in stored.history(all_branches=True)}
    return lit_data(stored, tree, spec_from_manifest(stored.manifest()))


def page_drawing(
    lit: dict[str, Any], spec_marks: dict[str, str], stations: list[str]
) -> tuple[dict[str, list[str]], set[str]]:
    nodes = {s: lit["nodes"].get(s, ["", spec_marks.get(s, "")]) for s in stations}
    nodes["__start__"][1] = None  # drawn without a mark line
    return nodes, set(lit["edges"])


def same_as_the_widget(run: Any, data: dict[str, Any]) -> None:
    w = RunWidget(run)
    by_seq = lits_of(run)
    assert all("step" in c for c in data["checkpoints"]) and set(data["flow"]["nodes"]) >= set(data["marks"])
    (branch,) = data["branches"]
    assert w.slider.max == len(branch["seqs"]) - 1
    for i, seq in enumerate(branch["seqs"]):
        w.slider.value = i
        want_nodes, want_edges = widget_drawing(w)
        got_nodes, got_edges = page_drawing(by_seq[seq], data["marks"], list(want_nodes))
        assert got_nodes == want_nodes, (seq, got_nodes, want_nodes)
        assert got_edges == want_edges, seq
        assert f"next {by_seq[seq]['next']}" in w.timeline_label.value.replace("&#215;", "×")


def test_a_map_and_join_page_draws_each_step_as_the_widget(lab, tmp_path) -> None:
    run = declare_squares(lab).start(inputs=[1, 2, 3, 4, 5])
    run.run()
    assert run.output == [1, 4, 9, 16, 25]
    data = page_data(run.export_html(tmp_path / "squares.html"))["runs"][0]
    assert data["parallel"] is True
    cps = {c["seq"]: c for c in data["checkpoints"]}
    lits = lits_of(run)
    assert cps[1]["step"] == {"did": [["__start__", 1]], "tasks": [["square", 5]], "next": "square ×5"}
    spread = lits[1]  # the start's routing spread five numbers over `square`
    assert spread["nodes"]["square"] == ["gl-current", "▶ ×5"]
    assert spread["edges"]["map→square"] == 5 and spread["next"] == "square ×5"
    last = lits[run.head]
    assert "gl-current" in last["nodes"]["__end__"][0] and last["next"] == "End"
    assert last["nodes"]["square"][1].endswith("×5") and "gl-visited" in last["nodes"]["square"][0]
    assert [cps[s]["station"] for s in (1, 2)] == ["__start__", "square ×5"]  # what each step settled
    same_as_the_widget(run, data)
    html = (tmp_path / "squares.html").read_text()
    assert 'data-edge="map&#8594;square"' in html  # the edge the page's script relabels "each ×5"


def test_a_broadcast_page_shows_the_join_filling(lab, tmp_path) -> None:
    run = lab.adopt(fan_graph(), name="fan").start(inputs=1)
    run.run()
    assert run.output == 12
    data = page_data(run.export_html(tmp_path / "fan.html"))["runs"][0]
    cps = {c["seq"]: c for c in data["checkpoints"]}
    lits = lits_of(run)
    three = lits[1]
    assert sorted(s for s, (cls, _) in three["nodes"].items() if "gl-current" in cls) == ["a", "b", "c"]
    joining = lits[2]
    assert cps[2]["step"]["joins"] == {"reduce_sum": [2, 3]} and cps[2]["step"]["open"] == ["reduce_sum"]
    assert (
        joining["nodes"]["reduce_sum"][1].endswith("2 of 3")
        and "gl-joining" in joining["nodes"]["reduce_sum"][0]
    )
    assert [s for s, (cls, _) in joining["nodes"].items() if "gl-current" in cls] == ["b2"]
    assert joining["next"] == "b2 · joins: reduce_sum 2 of 3"
    assert cps[2]["station"] == "a, b, c"  # what that step settled, every branch
    same_as_the_widget(run, data)


def test_a_rewound_run_offers_every_branch_head_first(lab, tmp_path) -> None:
    run = declare_counter(lab).start(Inc(), state=Counter())
    run.run()
    first_tip = run.head
    run.rewind(2)
    run.step()
    second_tip = run.head
    run.rewind(4)
    run.step()
    run.step()
    data = page_data(run.export_html(tmp_path / "tree.html"))["runs"][0]
    assert data["parallel"] is False and all("step" not in c for c in data["checkpoints"]) and "flow" not in data
    seqs = [c["seq"] for c in data["checkpoints"]]
    assert seqs == sorted(set(seqs)) == list(run.history(all_branches=True).seqs)
    branches = data["branches"]
    assert branches[0]["head"] and branches[0]["seqs"] == list(run.history().seqs)
    assert branches[0]["tip"] == run.head
    assert sorted(b["tip"] for b in branches) == sorted([first_tip, second_tip, run.head])
    assert [b["head"] for b in branches].count(True) == 1
    w = RunWidget(run)  # the same labels as the widget's branch picker, the head's branch first
    offered = [label for label, _ in w.branch_picker.options]
    assert [b["label"] for b in branches] == [o for o in offered if "head" in o] + [
        o for o in offered if "head" not in o
    ]
    by_seq = {c["seq"]: c for c in data["checkpoints"]}
    for b in branches:  # each branch is root to its tip along parent links
        assert b["seqs"][0] == 0 and b["seqs"][-1] == b["tip"]
        assert all(by_seq[s]["parent"] == p for p, s in zip(b["seqs"], b["seqs"][1:], strict=False))


def test_a_looping_map_is_drawn_incrementally_and_as_the_widget(lab, tmp_path) -> None:
    """A map of 8 joined, round after round (its tasks' fork stacks grow a frame a round): the page
    draws every step as the widget does, and drawing a branch one step longer reads one checkpoint
    (each checkpoint's tally is its parent's plus one step, not a recount of the branch)."""
    from lab.bench.share import WIDTH, Rounds, map_loop
    from lab.fork_stacks import StoredStack
    from lab.render import overlay_from_frontier, spec_from_manifest
    from lab.render.steps import StepView, frontier_of, is_parallel

    g = map_loop(lab.graph("loop", state_type=Rounds, input_type=list[int], output_type=int))
    run = g.start(inputs=list(range(WIDTH)), state=Rounds(limit=6), step_limit=None).run(step_limit=None)
    assert run.status == "done" and run.output == sum(i * i for i in range(WIDTH))
    data = page_data(run.export_html(tmp_path / "loop.html"))["runs"][0]
    same_as_the_widget(run, data)
    last = lits_of(run)[run.head]
    assert last["edges"]["map→square"] == 6 * WIDTH and last["nodes"]["square"][1].endswith(f"×{6 * WIDTH}")

    records = {r.seq: r for r in run.history()}
    stored = records[run.head - 1].next[0].meta["fork_stack"]
    assert len(StoredStack(stored)) >= 7  # the stack grew every round
    assert len(stored) == 3  # stored folded: the start's frame, the map's rounds as one block, the task's own
    manifest = lab.store.manifest(run.graph.name, run.revision)
    assert is_parallel(manifest)
    reads: list[int] = []

    def read(seqs):
        reads.extend(seqs)
        return {s: records[s] for s in seqs}

    view = StepView(spec_from_manifest(manifest), read)
    seqs = sorted(records)
    steps: list[list[str]] = []  # the branch's steps recounted from scratch, for the reference
    for i in range(1, len(seqs) + 1):
        before = len(reads)
        got = view.overlay(seqs[:i])
        assert len(reads) - before <= 2, f"drawing checkpoint {seqs[i - 1]} reread the branch"
        if i > 1:
            a, b = records[seqs[i - 2]], records[seqs[i - 1]]
            left = {p.meta["task"]: p.node_id for p in b.next if "join" not in p.meta}
            steps.append([p.node_id for p in a.next if "join" not in p.meta and p.meta["task"] not in left])
        tasks, joins = frontier_of(records[seqs[i - 1]])
        want = overlay_from_frontier(
            [list(s) for s in steps],
            tasks,
            spec=view.spec,
            accumulators=joins,
            done=records[seqs[i - 1]].status == "done",
        )
        assert (got.traversed, got.visits, got.tasks, got.joins) == (
            want.traversed,
            want.visits,
            want.tasks,
            want.joins,
        )
    assert sorted(set(reads)) == seqs and len(reads) <= 2 * len(seqs)
