"""Recorded calls in the shared page and in the comparison (issue 28: parts 1 with 2 and 3).

On a real DuckDB file with the five-station agent workflow of tests/agents/replay_graphs.py: the
exported run carries its calls (live, then replayed after a rewind, with the tokens saved, the
station and the checkpoint each came from); a fork whose Review prompt changed compares with its
parent, the first differing station (Review) showing each side's recorded call, the fork's live;
on a rewound run only the calls of the try on the compared branch are shown;
a call named with markup is escaped in the comparison's HTML and in the page's data block.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab
from lab.widgets.compare_view import CompareView
from tests.agents.replay_graphs import Article, declare
from tests.integration.test_share import page_data


@pytest.fixture
def lab(tmp_path) -> Any:
    lab = Lab(os.fspath(tmp_path / "lab.duckdb"))
    yield lab
    lab.close()


def test_the_page_shows_each_recorded_call_live_or_replayed(lab, tmp_path) -> None:
    g, model, _ = declare(lab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.run()
    run.rewind(1)
    run.run()
    assert model.calls == 5
    (data,) = page_data(run.export_html(tmp_path / "run.html"))["runs"]
    calls = data["calls"]
    assert [(c["node"], c["mode"]) for c in calls] == [
        *[(s, "live") for s in ("Research", "Outline", "Draft", "Review", "Polish")],
        *[(s, "replayed") for s in ("Outline", "Draft", "Review", "Polish")],
    ]
    stored = run.calls()
    assert [c["call"] for c in calls] == [c.call_id for c in stored]
    assert [c["cp"] for c in calls] == [c.checkpoint_seq for c in stored] and calls[5]["cp"] == 1
    assert all(c["tokens"] > 0 and c["saved_tokens"] == 0 for c in calls[:5])
    assert all(c["saved_tokens"] == c["tokens"] > 0 for c in calls[5:])
    assert calls[6]["replayed_from"] == calls[2]["call"]
    assert "request" not in calls[0] and "response" not in calls[0]  # what it was, not what it said
    assert 'class="gl-calls"' in (tmp_path / "run.html").read_text()


def test_the_comparison_shows_the_first_differing_stations_calls(lab, tmp_path) -> None:
    g, model, _ = declare(lab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.run()
    fork = run.fork(3, state=Article(tone="warm", notes=list(run.history()[3].state["notes"])))
    fork.run()
    assert model.calls == 6  # only the Review prompt changed; Polish's request is the same
    cmp = lab.compare(run, fork)
    assert cmp.first_a["station"] == cmp.first_b["station"] == "Review"
    (a_call,) = cmp.first_a["calls"]
    (b_call,) = cmp.first_b["calls"]
    assert (a_call["mode"], a_call["cp"], a_call["node"]) == ("live", 3, "Review")
    assert (b_call["mode"], b_call["cp"], b_call["node"]) == ("live", 0, "Review")
    assert a_call["call"] != b_call["call"]
    assert [c.mode for c in fork.calls()] == ["live", "replayed"]  # Review live, Polish replayed
    first = cmp.to_json()["first"]
    assert first["b"]["calls"] == [b_call]
    html = CompareView(cmp).summary.value
    assert "its recorded calls (1)" in html and "● live" in html
    # the try a call belongs to is named by its `entered` event, as the event log numbers it (not "try 19")
    entered = next(e.seq for e in fork.events("entered") if e.node_id == "Review")
    assert b_call["attempt"] == entered and "<th>entered</th>" in html and f"<td>event {entered}</td>" in html
    page = (lab.export_html([run, fork], tmp_path / "cmp.html")).read_text()
    assert page.count('class="gl-calls-first"') == 2


def test_the_first_station_shows_the_calls_of_the_try_on_its_branch(lab) -> None:
    """A rewound run's head branch re-ran Draft from checkpoint 2 (replayed): compared with a fork
    from 2, its first differing station shows that try's call, not the first branch's live one."""
    g, _, _ = declare(lab)
    run = g.start(g.nodes["Research"](), state=Article())
    run.run()
    run.rewind(2)
    run.run()
    fork = run.fork(2, state=Article(tone="warm", notes=list(run.history()[2].state["notes"])))
    fork.run()
    cmp = lab.compare(run, fork)
    assert cmp.first_a["station"] == cmp.first_b["station"] == "Draft"
    assert [(c["mode"], c["cp"]) for c in cmp.first_a["calls"]] == [("replayed", 2)]
    assert [c["mode"] for c in cmp.first_b["calls"]] == ["replayed"]


@dataclass
class Box:
    got: list[str]


def test_a_call_named_with_markup_is_escaped(lab, tmp_path) -> None:
    hostile = "<script>alert(1)</script>"

    @lab.recorded(name=hostile)
    def probe(x: int) -> int:
        return x + 1

    g = lab.graph("probe", state_type=Box, output_type=int)

    @g.node
    @dataclass
    class Probe(BaseNode[Box, None, int]):
        seed: int = 1

        async def run(self, ctx: GraphRunContext[Box]) -> End[int]:
            ctx.state.got.append(str(probe(self.seed)))
            return End(len(ctx.state.got))

    one, two = g.start(Probe(seed=1), state=Box(got=[])), g.start(Probe(seed=2), state=Box(got=[]))
    one.run()
    two.run()
    cmp = lab.compare(one, two)
    assert cmp.first_a["calls"][0]["name"] == hostile
    html = lab.export_html([one, two], tmp_path / "x.html").read_text()
    assert hostile not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert page_data(tmp_path / "x.html")["runs"][0]["calls"][0]["name"] == hostile
