"""Rendering: DOT snapshots, SVG from the real `dot`, restyling without `dot`, partial graphs,
gates, escaping, Mermaid, and the error when Graphviz is missing.

Scenarios:
- the counter graph's DOT, plain and with a run overlay, as text snapshots
- the SVG from `dot` names every station and lights the overlay's stations and edges
- a laid-out revision restyles with `dot` gone from PATH (no second `dot` call)
- without `dot`, the error says how to install Graphviz
- a graph whose return hint names an undeclared node draws it dashed and labelled "missing"
- a gate station is drawn as a gate; breakpoints, failed and parked stations carry text marks
- station names with markup are escaped in DOT, SVG and Mermaid
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import GraphDefinitionError, Lab, Manifest, Station
from lab.manifest import END
from lab.render import (
    GraphvizNotFoundError,
    clear_layout_cache,
    layout,
    overlay_from_path,
    spec_for,
    spec_from_manifest,
    svg_of,
    to_dot,
    to_mermaid,
)
from tests.conftest import declare_counter

SVG = "{http://www.w3.org/2000/svg}"

COUNTER_DOT = """digraph counter {
	graph [bgcolor=transparent fontname="Helvetica,Arial,sans-serif" fontsize=11 nodesep=0.45 pad=0.25 rankdir=TB ranksep=0.45]
	node [color="#333333" fillcolor="#ffffff" fontcolor="#111111" fontname="Helvetica,Arial,sans-serif" fontsize=12 margin="0.12,0.05" penwidth=1.2 shape=box style="rounded,filled" width=1.35]
	edge [arrowsize=0.7 color="#555555" fontname="Helvetica,Arial,sans-serif" fontsize=10 penwidth=1.2]
	__start__ [label="" fillcolor="#333333" fixedsize=true shape=circle style=filled width=0.22]
	Inc [label="Inc\\n "]
	Check [label="Check\\n "]
	__end__ [label="End\\n " margin=0.02 shape=doublecircle width=0.5]
	__start__ -> Inc
	Check -> Inc
	Check -> __end__ [label=End]
	Inc -> Check
}
"""

COUNTER_DOT_OVERLAY = """digraph counter {
	graph [bgcolor=transparent fontname="Helvetica,Arial,sans-serif" fontsize=11 nodesep=0.45 pad=0.25 rankdir=TB ranksep=0.45]
	node [color="#333333" fillcolor="#ffffff" fontcolor="#111111" fontname="Helvetica,Arial,sans-serif" fontsize=12 margin="0.12,0.05" penwidth=1.2 shape=box style="rounded,filled" width=1.35]
	edge [arrowsize=0.7 color="#555555" fontname="Helvetica,Arial,sans-serif" fontsize=10 penwidth=1.2]
	__start__ [label="" fillcolor="#333333" fixedsize=true shape=circle style=filled width=0.22]
	Inc [label="Inc\\n×2" fillcolor="#e5e7eb"]
	Check [label="Check\\n▶ next ×1" color="#0072B2" fillcolor="#dbeafe" fontname="Helvetica-Bold,Arial Bold,sans-serif" penwidth=3.2]
	__end__ [label="End\\n " margin=0.02 shape=doublecircle width=0.5]
	__start__ -> Inc [color="#0072B2" penwidth=2.8]
	Check -> Inc [color="#0072B2" penwidth=2.8]
	Check -> __end__ [label=End color="#9ca3af" fontcolor="#737373"]
	Inc -> Check [color="#0072B2" penwidth=2.8]
}
"""

COUNTER_MERMAID = """stateDiagram-v2
  state "Inc (×2)" as Inc
  state "Check (▶ next ×1)" as Check
  [*] --> Inc
  Check --> Inc
  Check --> [*]: End
  Inc --> Check
  classDef visited fill:#e5e7eb
  class Inc,Check visited
  classDef current fill:#dbeafe,stroke:#0072B2,stroke-width:3px
  class Check current"""


@pytest.fixture
def mem_lab():
    lab = Lab(":memory:")
    yield lab
    lab.close()


def _groups(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)  # the SVG is well-formed XML
    return {g.get("data-station"): g for g in root.iter(f"{SVG}g") if g.get("data-station") is not None}


def _texts(g: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in g.iter(f"{SVG}text")]


def test_counter_dot_snapshot_plain_and_with_overlay(mem_lab):
    g = declare_counter(mem_lab)
    assert g.render() == COUNTER_DOT
    ov = overlay_from_path(["Inc", "Check", "Inc"], ["Check"])
    assert g.render(ov) == COUNTER_DOT_OVERLAY
    assert g.mermaid(ov) == COUNTER_MERMAID
    assert g.mermaid().splitlines()[:4] == [
        "stateDiagram-v2",
        "  [*] --> Inc",
        "  Check --> Inc",
        "  Check --> [*]: End",
    ]


def test_svg_from_dot_lights_the_overlay(mem_lab):
    g = declare_counter(mem_lab)
    spec = spec_for(g)
    plain = _groups(svg_of(spec))
    assert set(plain) == {"__start__", "Inc", "Check", END}
    assert all("gl-current" not in (el.get("class") or "") for el in plain.values())

    ov = overlay_from_path(["Inc", "Check", "Inc"], ["Check"])
    svg = svg_of(spec, ov)
    nodes = _groups(svg)
    assert nodes["Check"].get("class") == "node gl-node gl-current gl-visited"
    assert nodes["Inc"].get("class") == "node gl-node gl-visited"
    assert _texts(nodes["Check"]) == ["Check", "▶ next ×1"]
    assert _texts(nodes["Inc"]) == ["Inc", "×2"]
    edges = {
        e.get("data-edge"): e.get("class") for e in ET.fromstring(svg).iter(f"{SVG}g") if e.get("data-edge")
    }
    assert edges == {
        "__start__→Inc": "edge gl-trav",
        "Inc→Check": "edge gl-trav",
        "Check→Inc": "edge gl-trav",
        "Check→__end__": "edge gl-idle",
    }
    done = _groups(svg_of(spec, overlay_from_path(["Inc", "Check"], [END])))
    assert "gl-current" in done[END].get("class") and _texts(done[END]) == ["End", "▶ done"]


def test_restyle_needs_no_dot_once_laid_out(mem_lab, monkeypatch, tmp_path):
    g = declare_counter(mem_lab)
    spec = spec_for(g)
    clear_layout_cache()
    first = layout(spec)
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` from here on
    assert layout(spec) is first  # cached by the revision's digest
    for path in (["Inc"], ["Inc", "Check"], ["Inc", "Check", "Inc"]):
        svg = svg_of(spec, overlay_from_path(path, ["Check" if path[-1] == "Inc" else "Inc"]))
        assert _groups(svg)[path[-1]].get("class").endswith("gl-visited")
    # the geometry is the same on every restyle: only classes and mark lines differ
    a, b = first.svg(), first.svg(overlay_from_path(["Inc"], ["Check"]))
    assert len([p for p in first.parts if isinstance(p, str)]) > 3
    assert a.count("<path") == b.count("<path") and a.count("<text") == b.count("<text")


def test_missing_dot_says_how_to_install_graphviz(mem_lab, monkeypatch, tmp_path):
    g = declare_counter(mem_lab, "counter2")
    clear_layout_cache()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphvizNotFoundError, match=r"apt-get install graphviz"):
        g.svg()
    bundle = g._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and "apt-get install graphviz" in bundle["text/plain"]
    assert g.render() == COUNTER_DOT.replace("counter", "counter2")  # DOT text needs no `dot`


@dataclass
class Draft(BaseNode[None, None, str]):
    async def run(self, ctx: GraphRunContext[None, None]) -> Review:  # noqa: F821 - declared later
        return Review()  # noqa: F821


def test_partial_graph_draws_the_missing_node(mem_lab):
    g = mem_lab.graph("partial", output_type=str)
    g.node(Draft)
    with pytest.raises(GraphDefinitionError):
        g.build()
    dot = g.render()
    assert (
        'Review [label="Review\\nmissing" color="#777777" fontcolor="#555555" style="dashed,rounded"]' in dot
    )
    assert "Draft -> Review" in dot
    svg = g.svg()
    nodes = _groups(svg)
    assert nodes["Review"].get("class") == "node gl-missing"
    assert _texts(nodes["Review"]) == ["Review", "missing"]
    assert "stroke-dasharray" in ET.tostring(nodes["Review"]).decode()  # dashed outline from dot
    assert "missing: Review" in svg  # the caption says what to declare
    assert "classDef missing" in g.mermaid()


def test_gate_breakpoint_failed_and_parked_marks(mem_lab):
    gates = pytest.importorskip("lab.gates", reason="gates are not in this build yet")

    @dataclass
    class Send(BaseNode[None, None, str]):
        async def run(self, ctx: GraphRunContext[None, None]) -> End[str]:
            return End("sent")

    @dataclass
    class Confirm(gates.Gate[None]):
        prompt = "Send?"

        async def decide(self, ctx, verdict) -> Send | End[str]:
            return Send() if verdict.approved else End("denied")

    g = mem_lab.graph("gated", output_type=str)
    g.node(Confirm)
    g.node(Send)
    spec = spec_for(g)
    assert spec.node("Confirm").kind == "gate"
    assert 'Confirm [label="Confirm\\ngate" fillcolor="#fffaf0" shape=hexagon style=filled]' in g.render()
    parked = _groups(
        svg_of(
            spec,
            overlay_from_path(
                [], ["Confirm"], parked="Confirm", breakpoints={"before": {"Send"}, "after": set()}
            ),
        )
    )
    assert parked["Confirm"].get("class") == "node gl-gate gl-parked"
    assert _texts(parked["Confirm"]) == ["Confirm", "gate ‖ waiting"]
    assert _texts(parked["Send"]) == ["Send", "● before"] and "gl-break" in parked["Send"].get("class")
    failed = _groups(svg_of(spec, overlay_from_path(["Confirm"], ["Send"], failed="Send")))
    assert failed["Send"].get("class") == "node gl-node gl-failed"
    assert _texts(failed["Send"]) == ["Send", "✖ failed"]
    dot = to_dot(spec, overlay_from_path(["Confirm"], ["Send"], failed="Send"))
    assert 'style="rounded,filled,dashed"' in dot and "✖ failed" in dot


def test_markup_in_names_is_escaped_everywhere():
    evil = "<img src=x onerror=alert(1)>"
    other = 'a&amp;b"c\\N:d'
    m = Manifest(
        key="evil",
        stations=(Station(evil, "node", "X", (), "h1"), Station(other, "node", "Y", (), "h2")),
        edges=((evil, other), (other, END)),
        schema_id="s",
    ).with_revision(1)
    spec = spec_from_manifest(m, {(evil, other): "</text><script>alert(2)</script>"})
    svg = svg_of(spec, overlay_from_path([evil], [other]))
    assert "<img" not in svg and "<script" not in svg
    nodes = _groups(svg)  # parses: no markup leaked into the XML
    assert set(nodes) == {"__start__", evil, other, END}
    assert _texts(nodes[evil])[0] == evil and _texts(nodes[other])[0] == other
    assert [t.text for t in nodes[other].iter(f"{SVG}title")] == [other]
    labels = [
        "".join(t.itertext())
        for e in ET.fromstring(svg).iter(f"{SVG}g")
        if e.get("data-edge")
        for t in e.iter(f"{SVG}text")
    ]
    assert "</text><script>alert(2)</script>" in labels
    mermaid = to_mermaid(spec)
    assert "<img" not in mermaid and '"' not in mermaid.replace('state "', "").replace('" as', "")


def test_adopted_graph_draws_steps_decisions_and_its_own_start(mem_lab):
    from tests.integration import native_graphs

    spec = spec_for(mem_lab.adopt(native_graphs.decisions(), name="decisions"))
    kinds = {n.id: n.kind for n in spec.nodes}
    assert kinds["route"] == "decision" and kinds["parse"] == "step"
    starts = [e for e in spec.edges if e.src == "__start__"]
    assert [(e.src, e.dst) for e in starts] == [("__start__", "parse")]  # the graph's own, not doubled
    assert 'route [label="route\\n " shape=diamond style=filled]' in to_dot(spec)
    assert set(_groups(svg_of(spec))) == set(kinds)
