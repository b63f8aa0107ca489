"""An exported run opened from file:// in Chromium: no JupyterLab, no kernel, no network.

Scenarios: scrub the timeline to a checkpoint and read the state, diff and lit station shown;
nothing but the file itself is requested; a state holding `<script>`, `</script>` and an
`<img onerror>` shows as text and runs nothing; a comparison page of a run and its fork shows both
paths and the first differing station. Screenshots go to SCREENSHOTS (export-run.png, export-compare.png).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from lab import Lab
from tests.conftest import Counter, Inc, declare_counter
from tests.integration.gate_graphs import Draft, Mail, declare_mail
from tests.unit.test_widgets_parallel import declare_squares, fan_graph

from .conftest import SCREENSHOTS

HOSTILE = ["<script>window.PWNED=1</script>", "</script><img src=x onerror=\"window.PWNED=2\">"]


@pytest.fixture
def offline_page(chromium):  # type: ignore[no-untyped-def]
    """A page that records every request and dialog, and aborts anything not file://."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1400}, device_scale_factor=1)
    pg = context.new_page()
    pg.requests, pg.dialogs, pg.errors = [], [], []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://") else route.abort())
    try:
        yield pg
    finally:
        context.close()


@pytest.fixture
def runs(tmp_path) -> Iterator[tuple[Lab, object, object]]:
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    g = declare_counter(lab, "counter")
    run = g.start(Inc(), state=Counter(seen=list(HOSTILE)))
    run.run()
    fork = run.fork(2, state=Counter(count=3, seen=["edited"]))
    fork.run()
    yield lab, run, fork
    lab.close()


def _open(pg, path) -> None:  # type: ignore[no-untyped-def]
    pg.goto(path.as_uri())
    pg.wait_for_selector("html[data-gl-ready='1']")


def test_scrub_an_exported_run_offline(runs, offline_page, tmp_path) -> None:
    lab, run, _ = runs
    path = run.export_html(tmp_path / "run.html")
    pg = offline_page
    _open(pg, path)
    history = list(run.history())
    section = pg.locator("section.gl-run").first
    label = section.locator(".gl-label")
    assert label.get_attribute("data-seq") == str(history[-1].seq)  # opens at the head

    section.locator("input.gl-scrub").fill("3")  # the fourth checkpoint of the branch
    picked = history[3]
    assert label.get_attribute("data-seq") == str(picked.seq)
    state_text = section.locator(".gl-state").inner_text()
    assert f"count: {picked.state['count']}" in state_text
    for value in HOSTILE:  # shown as text (a JSON string), never as markup
        assert json.dumps(value) in state_text
    assert "Changes from checkpoint" in section.locator(".gl-diff").inner_text()
    lit = section.locator(".gl-drawing g.gl-current")
    assert lit.get_attribute("data-station") == picked.next[0].node_id

    section.locator("button.gl-prev").click()
    assert label.get_attribute("data-seq") == str(history[2].seq)
    section.locator("input.gl-events-all").check()
    assert "settled" in section.locator(".gl-events").inner_text()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SCREENSHOTS / "export-run.png"), full_page=True)

    assert pg.evaluate("typeof window.PWNED") == "undefined"
    assert pg.dialogs == [] and pg.errors == []
    assert pg.locator("img").count() == 0
    assert pg.requests == [path.as_uri()]  # nothing fetched but the file itself


def test_exported_comparison_offline(runs, offline_page, tmp_path) -> None:
    lab, run, fork = runs
    path = lab.export_html([run, fork], tmp_path / "cmp.html")
    pg = offline_page
    _open(pg, path)
    cmp = pg.locator("section.gl-compare")
    text = cmp.inner_text()
    assert "diverge at position" in text and "First differing station" in text
    assert cmp.locator("g.gl-side-b").count() >= 1 and cmp.locator("g.gl-diverged").count() == 1
    assert pg.locator("section.gl-run").count() == 2
    pg.locator("section.gl-run").nth(1).locator("input.gl-scrub").fill("0")
    assert "edited" in pg.locator("section.gl-run").nth(1).locator(".gl-state").inner_text()
    pg.screenshot(path=str(SCREENSHOTS / "export-compare.png"), full_page=True)
    assert pg.evaluate("typeof window.PWNED") == "undefined"
    assert pg.dialogs == [] and pg.errors == []
    assert pg.requests == [path.as_uri()]


def test_a_parallel_page_draws_each_step_as_a_frontier(offline_page, tmp_path) -> None:
    """A map of 5 into a join, then a broadcast of 3 into a join: each checkpoint is a super-step,
    drawn as the run widget draws it (every pending task lit, `▶ ×5`, `each ×5`, `2 of 3`)."""
    lab = Lab(os.fspath(tmp_path / "par.duckdb"))
    try:
        squares = declare_squares(lab).start(inputs=[1, 2, 3, 4, 5])
        squares.run()
        fan = lab.adopt(fan_graph(), name="fan").start(inputs=1)
        fan.run()
        paths = squares.export_html(tmp_path / "squares.html"), fan.export_html(tmp_path / "fan.html")
    finally:
        lab.close()
    pg = offline_page
    _open(pg, paths[0])
    section = pg.locator("section.gl-run")
    drawing = section.locator(".gl-drawing svg.gl-graph")
    label = section.locator(".gl-label")
    assert drawing.locator("g.gl-current").get_attribute("data-station") == "__end__"  # opens at the head
    assert drawing.locator('g[data-station="square"] text.gl-mark').text_content() == "×5"
    section.locator("input.gl-scrub").fill("1")  # the start's routing spread five numbers over `square`
    assert label.get_attribute("data-seq") == "1"
    assert "next square ×5" in label.inner_text() and label.inner_text().startswith("step 1")
    lit = drawing.locator("g.gl-current")
    assert lit.count() == 1 and lit.get_attribute("data-station") == "square"
    assert lit.locator("text.gl-mark").text_content() == "▶ ×5"
    each = drawing.locator('g[data-edge="map→square"]')
    assert "gl-trav" in each.get_attribute("class") and each.locator("text").last.text_content() == "each ×5"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SCREENSHOTS / "export-parallel-map.png"), full_page=True)
    section.locator("button.gl-prev").click()  # the first checkpoint: only the start is pending
    assert drawing.locator('g[data-edge="map→square"] text').last.text_content() == "each"
    assert "gl-idle" in each.get_attribute("class")

    _open(pg, paths[1])
    section.locator("input.gl-scrub").fill("2")  # two branches reached the join; b2 still runs
    join = drawing.locator('g[data-station="reduce_sum"]')
    assert "gl-joining" in join.get_attribute("class") and join.locator("text.gl-mark").text_content().endswith("2 of 3")
    assert [drawing.locator("g.gl-current").nth(i).get_attribute("data-station") for i in range(drawing.locator("g.gl-current").count())] == ["b2"]
    assert "next b2 · joins: reduce_sum 2 of 3" in label.inner_text()
    assert "settled by a, b, c" in label.inner_text()
    section.locator("button.gl-prev").click()  # the broadcast's three branches at once
    lit = drawing.locator("g.gl-current")
    assert sorted(lit.nth(i).get_attribute("data-station") for i in range(lit.count())) == ["a", "b", "c"]
    assert pg.dialogs == [] and pg.errors == []
    assert pg.requests == [paths[0].as_uri(), paths[1].as_uri()]


def test_a_rewound_page_offers_every_branch(offline_page, tmp_path) -> None:
    """A run rewound twice: the page's branch picker offers its three branches, the head's first;
    picking one shows it on the timeline (its tip, its state); a wait's "show" is not needed here."""
    lab = Lab(os.fspath(tmp_path / "tree.duckdb"))
    try:
        run = declare_counter(lab, "counter").start(Inc(), state=Counter())
        run.run()
        first_tip, first_count = run.head, run.state.count
        run.rewind(2)
        run.step()
        run.rewind(1)
        run.step()
        run.step()
        head, head_count = run.head, run.state.count
        path = run.export_html(tmp_path / "tree.html")
    finally:
        lab.close()
    pg = offline_page
    _open(pg, path)
    section = pg.locator("section.gl-run")
    picker = section.locator("select.gl-branch")
    assert picker.is_visible()
    options = picker.locator("option").all_inner_texts()
    assert len(options) == 3 and options[0].endswith("· head") and options[0].startswith("from 1:")
    assert options[1:] == [f"0…{first_tip}", f"from 2: {first_tip + 1}"]
    label = section.locator(".gl-label")
    assert label.get_attribute("data-seq") == str(head)
    assert f"count: {head_count}" in section.locator(".gl-state").inner_text()

    picker.select_option(label=f"0…{first_tip}")  # the first branch, at its tip
    assert label.get_attribute("data-seq") == str(first_tip)
    assert f"{first_tip + 1} of {first_tip + 1}" in label.inner_text()
    assert f"count: {first_count}" in section.locator(".gl-state").inner_text()
    section.locator("input.gl-scrub").fill("2")
    assert label.get_attribute("data-seq") == "2"
    assert section.locator('.gl-drawing g.gl-visited[data-station="Inc"] text.gl-mark').text_content() == "▶ next ×1"
    pg.screenshot(path=str(SCREENSHOTS / "export-branches.png"), full_page=True)
    picker.select_option(index=0)  # back to the head's branch
    assert label.get_attribute("data-seq") == str(head)
    assert pg.dialogs == [] and pg.errors == []


def test_a_waits_show_button_moves_to_the_branch_holding_it(offline_page, tmp_path) -> None:
    """A gated run approved, then rewound to its start and parked again: the old gate's wait is
    on the other branch; its "show" button picks that branch and scrubs to the wait's checkpoint."""
    lab = Lab(os.fspath(tmp_path / "mail.duckdb"))
    try:
        run = declare_mail(lab).start(Draft(), state=Mail())
        run.run()
        run.resume_with("EU")
        run.run()
        gate = run.wait.checkpoint_seq
        run.approve(note="ok")
        run.run()
        assert run.status == "done"
        run.rewind(0)
        run.run()  # parks at the interrupt again, on a new branch
        assert run.status == "waiting" and gate not in run.history().seqs
        path = run.export_html(tmp_path / "mail.html")
    finally:
        lab.close()
    pg = offline_page
    _open(pg, path)
    section = pg.locator("section.gl-run")
    picker, label = section.locator("select.gl-branch"), section.locator(".gl-label")
    assert picker.locator("option").first.inner_text().endswith("· head")
    row = section.locator(".gl-waits tr", has_text="consent")
    assert "approved" in row.inner_text()
    row.locator("button.gl-go").click()
    assert label.get_attribute("data-seq") == str(gate)
    assert picker.evaluate("s => s.options[s.selectedIndex].text") == picker.locator("option").nth(1).inner_text()
    gated = section.locator(".gl-drawing g.gl-parked")
    assert gated.get_attribute("data-station") == "ConfirmSend"
    assert pg.dialogs == [] and pg.errors == []


def test_the_calls_panel_shows_live_and_replayed_calls(offline_page, tmp_path) -> None:
    """The five-station agent workflow run, rewound to 1 and run again: the page's calls panel lists
    the five live calls and the four replayed ones with the tokens saved; "show" scrubs to a call's checkpoint."""
    from tests.agents.replay_graphs import Article, declare

    lab = Lab(os.fspath(tmp_path / "calls.duckdb"))
    try:
        g, _, _ = declare(lab)
        run = g.start(g.nodes["Research"](), state=Article())
        run.run()
        run.rewind(1)
        run.run()
        saved = sum(c.tokens for c in run.calls() if c.mode == "replayed")
        path = run.export_html(tmp_path / "calls.html")
        first_entered = next(e.seq for e in run.events("entered") if e.node_id == "Research")
    finally:
        lab.close()
    pg = offline_page
    _open(pg, path)
    panel = pg.locator("section.gl-run .gl-calls")
    text = panel.inner_text()
    assert "Recorded calls (9)" in text and f"5 live · 4 replayed · {saved} tokens saved" in text
    assert panel.locator("tr.gl-call-replayed").count() == 4 and "↺ replayed" in text
    # each call's try is named by its `entered` event, as the event log numbers it
    header = panel.locator("tr").first.inner_text()
    assert "entered" in header and "try" not in header
    assert panel.locator("tr.gl-call-live").first.locator("td").nth(2).inner_text() == f"event {first_entered}"
    panel.locator("tr.gl-call-live button.gl-go").nth(3).click()  # the first branch's Review call, from checkpoint 3
    assert pg.locator("section.gl-run .gl-label").get_attribute("data-seq") == "3"
    assert pg.dialogs == [] and pg.errors == []


def _broken_map():  # type: ignore[no-untyped-def]
    """A map of three whose item 2 raises: the run fails with its siblings settled."""
    g = GraphBuilder(input_type=list[int], output_type=list[int])

    @g.step
    async def item(ctx: StepContext[None, None, int]) -> int:
        if ctx.inputs == 2:
            raise ValueError("item 2 is broken")
        return ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(item), g.edge_from(item).to(collect), g.edge_from(collect).to(g.end_node))
    return g.build()


def test_the_script_draws_every_parallel_step_as_lit_data(offline_page, tmp_path) -> None:
    """The page carries each super-step (what it settled, its frontier, its joins) and the graph's flow;
    its script counts each step's drawing from them. For every checkpoint of a map into a join, a
    broadcast into a join, a looping map rewound onto a second branch, maps of maps and nested forks,
    a map parked at a gate, one parked at two `interrupt()`s and one that failed, the script's drawing
    equals `lit_data`'s (the renderer's own count, equal to the run widget's: test_share_tree.py)."""
    from lab.bench.share import WIDTH, Rounds, map_loop
    from lab.render import spec_from_manifest
    from lab.share.tree import lit_data
    from tests.integration import parallel_graphs as pgs

    lab = Lab(os.fspath(tmp_path / "steps.duckdb"))
    try:
        runs = [declare_squares(lab).start(inputs=[1, 2, 3, 4, 5]), lab.adopt(fan_graph(), name="fan").start(inputs=1)]
        loop = map_loop(lab.graph("loop", state_type=Rounds, input_type=list[int], output_type=int))
        runs.append(loop.start(inputs=list(range(WIDTH)), state=Rounds(limit=3), step_limit=None))
        adopted = [
            (pgs.map_of_maps(), [[1, 2], [3]]),
            (pgs.nested_forks(), [1, 2]),
            (pgs.gated(), [1, 2, 3]),
            (pgs.asking(), [1, 2, 3]),
        ]
        for graph, inputs in adopted:
            runs.append(lab.adopt(graph, name=f"g{len(runs)}").start(inputs=inputs, state=pgs.Log()))
        runs.append(lab.adopt(_broken_map(), name="broken").start(inputs=[1, 2, 3]))
        for run in runs:
            run.run(step_limit=None)
        runs[2].rewind(4)
        runs[2].step()  # a second branch from step 4
        assert [r.status for r in runs] == ["done", "done", "running", "done", "done", "waiting", "waiting", "failed"]
        want, paths = [], []
        for i, run in enumerate(runs):
            stored = lab.read(run.id)
            tree = {r.seq: r for r in stored.history(all_branches=True)}
            lits = lit_data(stored, tree, spec_from_manifest(stored.manifest()))
            want.append(json.loads(json.dumps({str(s): lit for s, lit in lits.items()}, ensure_ascii=False)))
            paths.append(run.export_html(tmp_path / f"steps{i}.html"))
    finally:
        lab.close()
    pg = offline_page
    for path, lits in zip(paths, want, strict=True):
        _open(pg, path)
        got = pg.evaluate("seqs => seqs.map(s => window.glViewers[0].lit(parseInt(s, 10)))", list(lits))
        assert dict(zip(lits, got, strict=True)) == lits, path.name
        assert any(lit["nodes"] for lit in lits.values())
    assert pg.errors == [] and pg.dialogs == []
    assert "gl-failed" in want[-1][str(runs[-1].head)]["nodes"]["item"][0]  # the failed station, lit at the head
    assert "gl-parked" in want[5][str(runs[5].head)]["nodes"]["Approve"][0]
