"""The pure parts of sharing: the JSON block, the page's policy and escaping, the two-paths overlay.

Scenarios: no value can close or comment out the data block, and it round-trips; the page runs only
its own script (the CSP names its hash) and fetches nothing; titles, ids and comparison values are
escaped; two paths light shared, side A, side B and the divergence with text marks as well as
classes, on the real `dot` drawing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime

from lab.render import START, GraphSpec, SpecEdge, SpecNode, layout, overlay_two_paths
from lab.share.page import EVENT_COLUMNS, JsonRows, comparison_html, csp, json_block, page_data, page_html
from lab.share.page_script import SCRIPT

HOSTILE = ["</script><script>alert(1)</script>", "<!-- x", "a & b", "\u2028\u2029", "<img src=x onerror=alert(2)>"]


def test_the_json_block_escapes_every_closing_sequence_and_round_trips() -> None:
    text = json_block({"state": HOSTILE, "<key>": "</SCRIPT>"})
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    assert json.loads(text) == {"state": HOSTILE, "<key>": "</SCRIPT>"}


@dataclass
class _Point:
    x: int


def test_rows_written_already_are_embedded_as_they_are_and_escaped() -> None:
    rows = JsonRows('[[0,"a<b",{"x":"</script>","y":1180591620717411303424}]]')
    text = json_block({"rows": rows, "n": 1})
    assert "<" not in text and ">" not in text
    assert json.loads(text) == {"rows": [[0, "a<b", {"x": "</script>", "y": 2**70}]], "n": 1}


def test_a_value_orjson_refuses_writes_the_block_as_json_dumps_did() -> None:
    rows = JsonRows('[[1,"k"]]')
    for odd in (2**70, -(2**63) - 1, "\ud800 lone", {1: "an int key", 2.5: "a float key"}):
        text = json_block({"v": odd, "rows": rows})
        assert json.loads(text) == {"v": json.loads(json.dumps(odd)), "rows": [[1, "k"]]}
    at = datetime(2026, 1, 2, 3, 4, 5, 6000)
    assert json.loads(json_block({"at": at, "p": _Point(3)})) == {"at": str(at), "p": str(_Point(3))}


def test_the_store_rows_take_the_events_columns_in_order() -> None:
    from lab.records import EVENT_ROW

    assert len(EVENT_ROW) == len(EVENT_COLUMNS)
    renamed = {"node_id": "node", "checkpoint_seq": "cp", "created_at": "at"}
    assert tuple(renamed.get(c, c) for c in EVENT_ROW) == EVENT_COLUMNS
    html = page_html("t", [{**_run(), "events": JsonRows('[[0,"entered","a",1,0,{"task":1},"t0"]]')}], {"g@1": "<svg/>"})
    assert page_data(html)["runs"][0]["events"] == [
        {"seq": 0, "kind": "entered", "node": "a", "attempt": 1, "cp": 0, "payload": {"task": 1}, "at": "t0"}
    ]


def test_events_are_stored_as_rows_and_read_back_as_objects() -> None:
    events = [
        {"seq": 0, "kind": "entered", "node": "a", "attempt": 1, "cp": 0, "payload": {"task": 1}, "at": "t0"},
        {"seq": 1, "kind": "settled", "node": "a", "attempt": 1, "cp": 1, "payload": {"x": HOSTILE}, "at": None},
    ]
    html = page_html("t", [{**_run(), "events": events}], {"g@1": "<svg></svg>"})
    start = html.index('id="gl-data">') + len('id="gl-data">')
    raw = json.loads(html[start : html.index("</script>", start)])
    assert raw["version"] == 3
    assert raw["runs"][0]["events"] == {
        "columns": list(EVENT_COLUMNS),
        "rows": [[e[k] for k in EVENT_COLUMNS] for e in events],
    }
    assert '"kind":' not in html  # no event repeats its keys
    assert page_data(html)["runs"][0]["events"] == events


def _run(run_id: str = "r1") -> dict:
    return {"id": run_id, "graph": "g<x>", "drawing": "g@1", "checkpoints": [{"state": HOSTILE}], "children": []}


def test_the_page_runs_only_its_own_script_and_fetches_nothing() -> None:
    html = page_html("<title>", [_run()], {"g@1": "<svg></svg>"})
    assert html.count("<script") == 2 and html.count("</script>") == 2
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1)
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy and "default-src 'none'" in policy
    assert policy == csp()
    assert f"<script>{SCRIPT}</script>" in html  # the hashed text, byte for byte
    assert "<title>&lt;title&gt;</title>" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing to fetch


def test_a_subgraph_child_is_a_collapsed_section() -> None:
    child = dict(_run("c1"), child_of={"run": "r1", "node": "Sub"})
    html = page_html("t", [_run(), child], {})
    assert '<details id="run-c1" class="gl-run" data-run-index="1">' in html
    assert "Subgraph child: Run c1 (g&lt;x&gt;)" in html


def test_the_comparison_html_escapes_values() -> None:
    side = {"run": "r<1>", "seq": 2, "station": "S<t>", "status": "running"}
    data = {
        "a": {"label": "A: <a>", "length": 3},
        "b": {"label": "B: <b>", "length": 2},
        "shared": 1,
        "rows": [{"index": 1, "a": side, "b": None, "changes": None},
                 {"index": 2, "a": side, "b": side, "changes": [{"path": "x<y>", "kind": "changed", "old": "<i>", "new": 1}]}],
        "total_rows": 5,
        "first": {"a": {"station": "S<t>", "run": "r", "seq": 2, "from_seq": 1, "fields": {"k": "</script>"}, "state_before": HOSTILE}, "b": None},
    }
    html = comparison_html(data, "<svg/>")
    assert "<a>" not in html and "<b>:" not in html and "S<t>" not in html and "</script>" not in html
    assert "x&lt;y&gt;" in html and "only one side has a checkpoint here" in html and "3 more aligned" in html


def _spec() -> GraphSpec:
    nodes = (SpecNode(START, "start", "start"), SpecNode("A", "node", "A"), SpecNode("B", "node", "B"), SpecNode("C", "node", "C"))
    edges = (SpecEdge(START, "A"), SpecEdge("A", "B"), SpecEdge("A", "C"), SpecEdge("B", "A"))
    return GraphSpec("two", nodes, edges)


def test_two_paths_mark_each_side_in_text_and_class() -> None:
    ov = overlay_two_paths(["A"], ["B", "A", "B"], ["C"])
    assert ov.diverged == "A" and ov.marks("A") == ["◆", "both 1", "A 1"]
    assert ov.marks("B") == ["A 2"] and ov.marks("C") == ["B 1"]
    assert ov.node_classes("C") == ["gl-side-b"] and "gl-diverged" in ov.node_classes("A")
    assert ov.edge_classes(START, "A") == ["gl-trav"]
    assert ov.edge_classes("A", "B") == ["gl-side-a"] and ov.edge_classes("A", "C") == ["gl-side-b"]
    svg = layout(_spec()).svg(ov)  # the real dot, restyled
    assert re.search(r'<g class="node gl-node gl-side-b" data-station="C">', svg)
    assert 'data-edge="A&#8594;C"' in svg and "B 1" in svg


def test_no_divergence_draws_no_fork_mark() -> None:
    ov = overlay_two_paths(["A", "B"], [], [])
    assert ov.diverged is None and ov.marks("A") == ["both 1"] and ov.edge_classes("A", "C") == ["gl-idle"]
