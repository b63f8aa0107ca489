"""Native pydantic-graph v2 graphs run in the lab unchanged, with the same results.

Every shape runs natively (`Graph.iter`) and through `lab.adopt(...)`; outputs, final states and
the sequence of visited stations must be equal, also when the run is killed mid-run in a real
process and resumed in another.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext

from lab import GraphDefinitionError, Lab, StateContractError
from tests.integration import native_graphs as ng

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "adopt_worker.py")


def visited(run) -> list[str]:
    return [e.node_id for e in run.events(kind="settled")]


def native(graph, **kwargs: Any) -> tuple[list[str], Any]:
    return asyncio.run(ng.native_trace(graph, **kwargs))


SHAPES = {
    "nodes-only": (ng.nodes_only, lambda: {"state": ng.Number(), "inputs": ng.Increment()}),
    "step-entry": (ng.fives, lambda: {"inputs": 4}),
    "vending": (
        ng.vending,
        lambda: {"state": ng.Machine(), "deps": ng.Answers(["1", "pizza", "soda", "0.5"]), "inputs": ng.InsertCoin()},
    ),
    "decisions": (ng.decisions, lambda: {"state": ng.Tally(), "inputs": "7"}),
    "decisions-str": (ng.decisions, lambda: {"state": ng.Tally(), "inputs": "hi"}),
    "deps": (ng.with_deps, lambda: {"state": ng.Quote(), "deps": ng.Pricing(rate=2.0), "inputs": 10.0}),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_adopted_graph_matches_native_run(lab, shape):
    build, kwargs = SHAPES[shape]
    native_kwargs, lab_kwargs = kwargs(), kwargs()
    native_visits, native_output = native(build(), **native_kwargs)
    lg = lab.adopt(build(), name=shape)
    run = lg.start(**lab_kwargs)
    run.run()
    assert run.status == "done", run.error
    assert run.output == native_output
    assert run.state == native_kwargs.get("state")
    assert visited(run) == native_visits
    if "deps" in native_kwargs:
        assert lab_kwargs["deps"] == native_kwargs["deps"]  # deps saw the same calls


def test_stepping_one_task_at_a_time_with_checkpoints(lab):
    lg = lab.adopt(ng.fives(), name="fives")
    run = lg.start(inputs=4)
    assert run.next_stations == ("__start__",)
    assert run.step().next == ("DivisibleBy5",)  # the start is routing, not a step: step() runs begin
    cp = run.history()[-1]
    assert cp.next[0].node_id == "DivisibleBy5" and cp.next[0].fields == {"foo": 4}
    assert run.history()[1].next[0].fields == {"inputs": 4}
    assert run.run().output == 5


def test_manifest_lists_native_stations_and_edges(lab):
    lg = lab.adopt(ng.decisions(), name="decisions")
    m = lg.manifest
    assert {(s.node_id, s.kind) for s in m.stations} == {
        ("parse", "step"),
        ("route", "decision"),
        ("big", "step"),
        ("double", "step"),
        ("shout", "step"),
    }
    assert set(m.edges) == {
        ("__start__", "parse"),
        ("parse", "route"),
        ("route", "big"),
        ("route", "double"),
        ("route", "shout"),
        ("double", "parse"),
        ("big", "__end__"),
        ("shout", "__end__"),
    }
    nodes = lab.adopt(ng.fives(), name="fives").manifest
    # the decision GraphBuilder.node adds for a union hint never runs: the node routes directly
    assert "decision" not in nodes.station_ids
    assert ("DivisibleBy5", "IncrementFoo") in nodes.edges and ("DivisibleBy5", "__end__") in nodes.edges


def test_time_travel_on_an_adopted_graph(lab):
    lg = lab.adopt(ng.decisions(), name="decisions")
    run = lg.start(state=ng.Tally(), inputs="30")
    run.run()
    assert run.output == "big 120"
    parse_again = next(c.seq for c in run.history() if c.next and c.next[0].node_id == "parse" and c.seq > 2)
    child = run.fork(parse_again, state=ng.Tally(log=["forked"]))
    child.run()
    assert child.output == run.output and child.state.log[0] == "forked"
    run.rewind(1)
    assert run.run().output == "big 120"


def test_readopting_a_changed_graph_makes_a_new_revision(lab):
    first = lab.adopt(ng.fives(), name="fives")
    r1 = first.revision
    assert lab.adopt(ng.fives(), name="fives").revision == r1  # same graph, same revision
    changed = lab.adopt(ng.nodes_only(), name="fives")
    assert changed is first and changed.revision == r1 + 1


def test_a_gate_inside_an_adopted_graph(lab):
    lg = lab.adopt(ng.gated(), name="gated")
    assert lg.manifest.station("Review").kind == "gate"
    run = lg.start(inputs="  hello world ")
    run.run()
    assert run.status == "waiting" and run.wait.prompt == "Publish this post?"
    assert run.wait.details == {"text": "hello world"}
    run.approve(note="ship")
    assert run.run().output == "published: hello world" and run.state.published
    denied = lg.start(inputs="meh")
    denied.run()
    denied.deny(note="too short")
    assert denied.run().output == "rejected: too short"


def test_an_interrupt_answers_the_vending_machine_prompt(lab):
    from dataclasses import dataclass

    from pydantic_graph import BaseNode, End, GraphRunContext

    from lab import interrupt

    @dataclass
    class Ask(BaseNode[ng.Machine, None, str]):
        async def run(self, ctx: GraphRunContext[ng.Machine, None]) -> End[str]:
            product = interrupt({"prompt": "Select product:", "choices": sorted(ng.PRICES)})
            ctx.state.product = product
            return End(product)

    g = GraphBuilder(state_type=ng.Machine, input_type=Ask, output_type=str)
    g.add(g.node(Ask), g.edge_from(g.start_node).to(Ask))
    run = lab.adopt(g.build(), name="ask").start(inputs=Ask(), state=ng.Machine())
    run.run()
    assert run.wait.kind == "interrupt" and run.wait.details["choices"][0] == "chocolate"
    run.resume_with("soda")
    assert run.run().output == "soda" and run.state.product == "soda"


# -- refusals ---------------------------------------------------------------------------------------


def test_adopting_something_that_is_not_a_built_graph(lab):
    g = GraphBuilder(input_type=int, output_type=int)
    with pytest.raises(GraphDefinitionError, match=r"needs a built pydantic-graph Graph .*call \.build\(\)"):
        lab.adopt(g, name="unbuilt")
    with pytest.raises(GraphDefinitionError, match="got dict"):
        lab.adopt({}, name="dict")


def test_a_step_whose_input_is_a_live_object_is_refused(lab):
    g = GraphBuilder(input_type=int, output_type=int)

    @g.step
    async def open_socket(ctx: StepContext[None, None, int]) -> socket.socket:
        return socket.socket()

    @g.step
    async def use_socket(ctx: StepContext[None, None, socket.socket]) -> int:
        return 1

    g.add(g.edge_from(g.start_node).to(open_socket), g.edge_from(open_socket).to(use_socket), g.edge_from(use_socket).to(g.end_node))
    with pytest.raises(StateContractError, match=r"step use_socket's input type socket does not round-trip through JSON"):
        lab.adopt(g.build(), name="live")
    assert "live" not in lab.graphs


def test_starting_without_the_inputs_the_start_needs(lab):
    lg = lab.adopt(ng.fives(), name="fives")
    with pytest.raises(StateContractError, match=r"starts from inputs of type int; start\(inputs=\.\.\.\) got None"):
        lg.start()
    with pytest.raises(StateContractError, match="got 'four'"):
        lg.start(inputs="four")
    assert lab.runs(graph="fives") == []


# -- kill and resume ------------------------------------------------------------------------------


def test_killed_mid_run_and_resumed_in_another_process_gives_the_native_result(tmp_path):
    expected_visits, expected_output = native(ng.decisions(), state=(state := ng.Tally()), inputs="3")
    db = os.fspath(tmp_path / "lab.duckdb")
    env = {**os.environ, "GRAPHLAB_STEP_SLEEP": "0.03"}
    proc = subprocess.Popen([sys.executable, WORKER, db, "start", "3"], stdout=subprocess.PIPE, text=True, env=env)
    run_id = proc.stdout.readline().strip()
    assert run_id.startswith("run-")
    kills = 0
    while kills < 5:  # a few kills at different points, then let the last worker finish
        time.sleep(0.15)
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        kills += 1
        proc = subprocess.Popen([sys.executable, WORKER, db, "resume", run_id], stdout=subprocess.PIPE, text=True, env=env)
        assert proc.stdout.readline().strip() == run_id
    out = proc.stdout.read()
    proc.stdout.close()
    assert proc.wait(timeout=60) == 0
    assert kills >= 1, "the run finished before it could be killed"
    result = json.loads(out.strip().splitlines()[-1])
    assert result["output"] == expected_output
    assert result["state"] == {"log": state.log}
    with Lab(db) as lab:
        lab.adopt(ng.decisions(), name="decisions")
        run = lab.resume(run_id)
        settled = visited(run)
        # an interrupted station settles once, when it runs again after the resume
        assert settled == expected_visits
        assert len([e for e in run.events() if e.kind == "interrupted"]) <= kills
        assert copy.deepcopy(run.state) == state


def test_an_adopted_graph_draws_like_a_declared_one(lab):
    lg = lab.adopt(ng.decisions(), name="decisions")
    assert "[*] --> parse" in lg.mermaid() and "route --> shout" in lg.mermaid()
    assert 'data-station="route"' in lg.svg()  # decisions are stations in the drawing too
    bundle = lg._repr_mimebundle_()
    assert bundle["image/svg+xml"].lstrip().startswith("<svg") and "decisions" in bundle["text/plain"]
