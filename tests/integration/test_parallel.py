"""Parallel graphs (issue 11): the lab's super-step runs give what native pydantic-graph gives.

Every case of `parallel_graphs.CASES` runs natively (`await graph.run(...)`) and in the lab, once
with `run.run()` and once with `run.step()` to the end; output, final state and the multiset of
visited steps must be equal, and the lab's `settled` events must name the same steps.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic_graph import GraphBuilder, StepContext
from pydantic_graph.join import reduce_list_append

from lab import Lab, StateContractError, WaitError, WaitOwnerError
from lab.engine.tasks import JoinAcc
from tests.integration import parallel_graphs as pg


def native_run(case: pg.Case) -> tuple[Any, pg.Log]:
    state = pg.Log()
    output = asyncio.run(case.build().run(state=state, deps=case.deps(), inputs=case.inputs))
    return output, state


def step_ids(run) -> Counter[str]:
    """The steps the lab ran, from its events (forks and joins are routing, not tasks)."""
    steps = {s.node_id for s in run._built.manifest.stations if s.kind in ("step", "node")}
    ran = [e for e in run.events() if e.kind == "settled" or (e.kind == "dropped" and e.payload["reason"].startswith("finished"))]
    return Counter(e.node_id for e in ran if e.node_id in steps)


def same(case: pg.Case, a: Any, b: Any) -> bool:
    if case.ordered:
        return a == b
    return sorted(map(repr, a)) == sorted(map(repr, b))


@pytest.mark.parametrize("mode", ["run", "step"])
@pytest.mark.parametrize("name", sorted(pg.CASES))
def test_parallel_graph_matches_native(lab, name, mode):
    case = pg.CASES[name]
    output, state = native_run(case)
    lg = lab.adopt(case.build(), name=name)
    assert lg.manifest.engine == "superstep"
    run = lg.start(inputs=case.inputs, state=pg.Log(), deps=case.deps())
    if mode == "run":
        run.run()
    else:
        steps = 0
        while run.status not in ("done", "failed"):
            result = run.step()
            steps += 1
            assert result.outcome in ("settled", "done"), result
            assert result.seq == run.head
        # one checkpoint per super-step, and one for the start's routing, which is not a step (issue 24 item 10);
        # a start that routes straight to End (an empty map) is the one call's only checkpoint
        assert steps == max(1, len(run.history()) - 2)
    assert run.status == "done", run.error
    assert same(case, run.output, output)
    assert Counter(run.state.visits) == Counter(state.visits)
    assert run.state.total == state.total and run.state.seen.keys() == state.seen.keys()
    assert step_ids(run) == Counter(state.visits)
    # what was stored reads back to the same result
    again = lab.resume(run.id)
    assert again.output == run.output and again.state == run.state


def test_a_super_step_checkpoint_holds_the_whole_frontier(lab):
    lg = lab.adopt(pg.squares(), name="squares")
    run = lg.start(inputs=[1, 2, 3])
    first = run.step()  # the start's routing (checkpointed, not a step), then the three squares at once
    assert first.tasks == ("square", "square", "square") and first.outcome == "done"
    assert run.output == [1, 4, 9]
    rows = lab.sql(
        "SELECT seq, status, next FROM checkpoints WHERE run_id = ? ORDER BY seq", [run.id]
    ).fetchall()
    frontier = json.loads(rows[1][2])
    assert [t["node_id"] for t in frontier] == ["square"] * 3
    assert [t["fields"]["inputs"] for t in frontier] == [1, 2, 3]
    assert [t["fork_stack"][-1] for t in frontier] == [
        {"fork": "map", "run": 1, "thread": i} for i in range(3)
    ]
    entered = [e for e in run.events(kind="entered") if e.node_id == "square"]
    settled = [e for e in run.events(kind="settled") if e.node_id == "square"]
    assert {e.payload["task"] for e in entered} == {e.payload["task"] for e in settled} == {1, 2, 3}
    assert {e.payload["step"] for e in settled} == {2} and {e.checkpoint_seq for e in settled} == {2}


def test_an_open_join_is_checkpointed_with_its_value_and_what_it_waits_for(lab):
    lg = lab.adopt(pg.nested_forks(), name="nested")
    run = lg.start(inputs=[1, 5])
    run.step()  # start -> fan x2 (routing, not a step), then fan -> plus, minus for each
    run.step()  # plus/minus -> inner joins fire -> pair x2
    cp = run.checkpoint(run.head)
    joins = [j for j in cp.next if type(j).__name__ == "JoinAcc"]
    assert joins == [] or all(j.node_id == "outer" for j in joins)
    row = lab.sql(
        "SELECT next FROM checkpoints WHERE run_id = ? AND seq = 2", [run.id]
    ).fetchall()[0]
    stored = json.loads(row[0])
    tasks = [e for e in stored if "task" in e]
    assert sorted(e["node_id"] for e in tasks) == ["minus", "minus", "plus", "plus"]
    run.run()
    assert run.output == asyncio.run(pg.nested_forks().run(state=pg.Log(), inputs=[1, 5]))


def test_join_state_survives_a_resume_between_steps(tmp_path):
    path = str(tmp_path / "lab.duckdb")
    lab = Lab(path)
    lg = lab.adopt(pg.fan_out(), name="fan")
    run = lg.start(inputs=8, state=pg.Log())
    for _ in range(2):  # start -> spread (the start's routing is not a step), then work
        run.step()
    run_id = run.id
    stored = lab.sql("SELECT next FROM checkpoints WHERE run_id = ? AND seq = 3", [run_id]).fetchall()[0][0]
    join = next(e for e in json.loads(stored) if "join" in e)
    assert join["node_id"] == "collect" and join["join"]["arrived"] == 4
    assert join["fields"]["value"] == [0, 4, 16, 36]
    waiting = [e["task"] for e in json.loads(stored) if e.get("node_id") == "again"]
    assert len(waiting) == 4 and join["join"]["waiting_for"] == waiting
    # the query docs/parallel.md gives
    shown = lab.sql(
        "SELECT seq, e->>'node_id' AS join_id, e->'fields'->'value' AS value, e->'join'->>'arrived' AS arrived "
        "FROM checkpoints, unnest(CAST(next AS JSON[])) AS t(e) WHERE run_id = ? AND (e->'join') IS NOT NULL",
        [run_id],
    ).fetchall()
    assert [(seq, j, json.loads(v), a) for seq, j, v, a in shown] == [(3, "collect", [0, 4, 16, 36], "4")]
    lab.close()
    lab2 = Lab(path)
    lab2.adopt(pg.fan_out(), name="fan")
    again = lab2.resume(run_id)
    again.run()
    expected, _ = native_run(pg.CASES["fan-out-8"])
    assert sorted(again.output) == sorted(expected)
    assert again.output == [0, 4, 16, 36, 2, 10, 26, 50]  # frontier order: deterministic
    lab2.close()


@dataclass
class _Outer:
    n: int = 0


def test_types_defined_inside_the_building_function(lab):
    @dataclass
    class LocalState:
        hits: int = 0

    @dataclass
    class LocalDeps:
        bonus: int

    @dataclass
    class Item:
        value: int

    g = GraphBuilder(state_type=LocalState, deps_type=LocalDeps, input_type=list[int], output_type=list[Item])

    @g.step
    async def wrap(ctx: StepContext[LocalState, LocalDeps, int]) -> Item:
        ctx.state.hits += 1
        return Item(ctx.inputs + ctx.deps.bonus)

    @g.step
    async def bump(ctx: StepContext[LocalState, LocalDeps, Item]) -> Item:
        return Item(ctx.inputs.value * 2)

    collect = g.join(reduce_list_append, initial_factory=list[Item], node_id="collect")
    g.add(
        g.edge_from(g.start_node).map().to(wrap),
        g.edge_from(wrap).to(bump),
        g.edge_from(bump).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    graph = g.build()
    native_state = LocalState()
    expected = asyncio.run(graph.run(state=native_state, deps=LocalDeps(5), inputs=[1, 2]))
    lg = lab.adopt(graph, name="local-types")
    run = lg.start(inputs=[1, 2], deps=LocalDeps(5))
    run.step()  # start (routing, not a step) -> wrap x2: the pending bump tasks hold Item values, under the local type
    assert run.checkpoint(run.head).next[0].inputs == Item(6)
    run.run()
    assert run.output == expected and run.state == native_state


# -- SIGKILL mid-fork, then lab.resume ------------------------------------------------------------

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "parallel_worker.py")


def _spawn(db: str, mode: str, arg: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, WORKER, db, mode, arg], stdout=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_sigkill_mid_fork_at_random_points_then_resume_gives_the_native_result(tmp_path):
    """>= 12 real SIGKILLs of a worker whose step has 8 branches in flight (at seeded random
    points, at least one while the branches are in flight); every run ends as native."""
    rng = random.Random(1105)
    native_state = pg.Log()
    expected = asyncio.run(pg.laps().run(state=native_state, inputs=8))
    db = os.fspath(tmp_path / "lab.duckdb")
    env = {**os.environ, "GRAPHLAB_STEP_SLEEP": "0.03"}
    kills, run_ids, results = 0, [], []
    while kills < 12:  # each kill costs a worker process (~2 s quiet); 20 took 39 s at load 9
        proc = _spawn(db, "start", "8", env)
        run_id = proc.stdout.readline().strip()
        assert run_id.startswith("run-")
        for _ in range(10):  # at most ten kills per run, then let it finish
            time.sleep(rng.uniform(0.0, 0.35))
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
            kills += 1
            proc = _spawn(db, "resume", run_id, env)
            assert proc.stdout.readline().strip() == run_id
        out = proc.stdout.read()
        proc.stdout.close()
        assert proc.wait(timeout=60) == 0
        run_ids.append(run_id)
        results.append(json.loads(out.strip().splitlines()[-1]))
    for result in results:
        assert sorted(result["output"]) == sorted(expected)
        assert result["output"] == [i * i for i in range(8)]  # frontier order
        assert Counter(result["state"]["visits"]) == Counter(native_state.visits)
        assert result["state"]["total"] == native_state.total == 8 * pg.LAPS
    with Lab(db) as lab:
        lab.adopt(pg.laps(), name="laps")
        interrupted_work = 0
        for run_id in run_ids:
            run = lab.resume(run_id)
            assert run.status == "done" and run.output == [i * i for i in range(8)]
            for cp in run.history():  # the join never counts a branch twice or drops one
                for entry in cp.next:
                    if isinstance(entry, JoinAcc):
                        assert entry.arrived == len(entry.value) == len(set(entry.value))
                        assert set(entry.value) <= set(expected)
            work = [e for e in run.events(kind="settled") if e.node_id == "work"]
            assert len(work) == 8 * pg.LAPS  # each lap of each branch settled exactly once
            interrupted_work += sum(1 for e in run.events(kind="interrupted") if e.node_id == "work")
        assert interrupted_work >= 1, "no kill landed while the 8 branches were in flight"


# -- time travel over super-step checkpoints ------------------------------------------------------


def test_time_travel_over_a_parallel_run(lab):
    lg = lab.adopt(pg.fan_out(), name="fan")
    run = lg.start(inputs=8, state=pg.Log())
    run.run()
    assert run.output == [0, 4, 16, 36, 2, 10, 26, 50]
    seqs = [cp.seq for cp in run.history()]
    assert seqs == [0, 1, 2, 3, 4]
    assert run.state_at(2).visits == ["spread"]
    assert run.diff(2, 3).to_json()  # the work steps changed the state
    # checkpoint 3: four odd branches pending in `again`, the join holding the even squares
    cp = run.checkpoint(3)
    assert cp.next_stations == ("again",) * 4
    join = next(e for e in cp.next if isinstance(e, JoinAcc))
    assert join.value == [0, 4, 16, 36] and join.arrived == 4
    # rewinding into the middle of the map re-runs the pending branches only
    run.rewind(3)
    assert run.next_stations == ("again",) * 4
    before = len(run.events(kind="entered"))
    result = run.step()
    assert result.outcome == "done" and result.tasks == ("again",) * 4
    assert len(run.events(kind="entered")) - before == 4
    assert run.output == [0, 4, 16, 36, 2, 10, 26, 50]
    assert run.history().seqs == (0, 1, 2, 3, 5)
    # edit the state mid-map, then finish
    run.rewind(3)
    edited = run.edit_state(total=100)
    assert edited.next[-1].meta["join"]["arrived"] == 4
    run.run()
    assert run.state.total == 100 and run.output == [0, 4, 16, 36, 2, 10, 26, 50]
    # fork from the middle of the map: a new run with the same frontier
    child = run.fork(3)
    assert child.next_stations == ("again",) * 4
    assert [e.value for e in child.frontier if isinstance(e, JoinAcc)] == [[0, 4, 16, 36]]
    child.run()
    assert child.output == run.output and child.status == "done"
    assert lab.diff((run, 3), (child, 0)).to_json() == lab.diff((run, 3), (run, 3)).to_json()


# -- gates and interrupts in a branch -------------------------------------------------------------


@pytest.mark.parametrize("approved", [True, False])
def test_a_gate_in_one_branch_parks_it_while_its_siblings_settle(lab, approved):
    run = lab.adopt(pg.gated(), name="gated").start(inputs=[1, 2, 3], state=pg.Log())
    run.run()
    assert run.status == "waiting" and run.wait.node_id == "Approve" and run.wait.kind == "consent"
    assert run.next_stations == ("Approve",)
    join = next(e for e in run.frontier if isinstance(e, JoinAcc))
    assert join.value == [1, 3] and join.arrived == 2  # the siblings settled into the join
    stored = lab.sql("SELECT next FROM checkpoints WHERE run_id = ? AND seq = ?", [run.id, run.head]).fetchall()[0][0]
    parked = next(e for e in json.loads(stored) if e["node_id"] == "Approve")
    assert parked["wait"] == run.wait.owner
    (run.approve if approved else run.deny)(note="checked")
    run.run()
    assert run.status == "done" and run.output == [1, 3, 2 if approved else -2]
    assert run.state.visits == ["check", "check", "check", "Approve"]


def test_two_waits_in_one_step_are_answered_by_owner_in_any_order(tmp_path):
    path = str(tmp_path / "lab.duckdb")
    lab = Lab(path)
    run = lab.adopt(pg.asking(), name="asking").start(inputs=[1, 2, 3], state=pg.Log())
    run.run()
    assert run.status == "waiting"
    waits = run.head_waits
    assert [w.node_id for w in waits] == ["ask", "ask"] and [w.details for w in waits] == [{"item": 1}, {"item": 3}]
    assert {w.owner for w in lab.waiting()} == {w.owner for w in waits}
    with pytest.raises(WaitOwnerError, match="waits on 2 branches at once"):
        run.resume_with("x")
    first, second = waits
    run.resume_with("three", owner=second.owner)  # the later branch first
    assert run.status == "waiting" and [w.owner for w in lab.waiting()] == [first.owner]
    with pytest.raises(WaitError, match="answer it first"):
        run.run()
    with pytest.raises(WaitError, match="already answered"):
        run.resume_with("again", owner=second.owner)
    run_id = run.id
    lab.close()
    lab = Lab(path)  # a restart between the two answers
    lab.adopt(pg.asking(), name="asking")
    again = lab.resume(run_id)
    assert again.status == "waiting" and [w.owner for w in again.head_waits if w.open] == [first.owner]
    again.resume_with("one")  # the only open wait: no owner needed
    assert again.status == "queued"
    again.run()
    assert again.status == "done" and again.output == ["2:auto", "1:one", "3:three"]
    assert Counter(again.state.visits) == Counter({"ask": 3})  # each branch recorded its visit once
    assert all(w.resolution is not None for w in again.waits())
    lab.close()


# -- what is still refused --------------------------------------------------------------------------


def test_a_parallel_step_whose_input_is_a_live_object_is_refused_by_station_and_type(lab):
    g = GraphBuilder(input_type=int, output_type=list[int])

    @g.step
    async def sockets(ctx: StepContext[None, None, int]) -> list[socket.socket]:
        return [socket.socket() for _ in range(ctx.inputs)]

    @g.step
    async def use(ctx: StepContext[None, None, socket.socket]) -> int:
        return 1

    collect = g.join(reduce_list_append, initial_factory=list[int], node_id="collect")
    g.add(
        g.edge_from(g.start_node).to(sockets),
        g.edge_from(sockets).map().to(use),
        g.edge_from(use).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    with pytest.raises(StateContractError, match=r"step use's input type socket does not round-trip through JSON"):
        lab.adopt(g.build(), name="live-map")
    assert "live-map" not in lab.graphs


def test_an_untyped_step_in_a_fork_is_not_refused(lab):
    g = GraphBuilder(input_type=list[int], output_type=list[Any])

    @g.step
    async def anything(ctx):  # no annotation at all: checkpointed as JSON, checked on write
        return ctx.inputs

    collect = g.join(reduce_list_append, initial_factory=list, node_id="collect")
    g.add(g.edge_from(g.start_node).map().to(anything), g.edge_from(anything).to(collect), g.edge_from(collect).to(g.end_node))
    graph = g.build()
    run = lab.adopt(graph, name="untyped").start(inputs=[1, 2])
    run.run()
    assert run.output == asyncio.run(graph.run(inputs=[1, 2])) == [1, 2]
