"""The serial engine and the run lifecycle, against a DuckDB file and `:memory:`.

Scenarios (seed 001 "Decision", "Execution and occurrence identity", "Checkpoint Ownership"):
- step runs exactly one station; run() goes to End; every boundary is a checkpoint
- entered before the call, settled after, with one attempt number
- a station that raises leaves the head; nothing retried until retry()
- an undeclared successor (or End) is refused before it executes
- cancel between stations and in flight (from a thread and from an async task)
- sync calls inside a running event loop (a notebook cell), and the async twins
- a redefined node makes a new revision; a pinned run refuses to step onto it
- batch durability buffers and still shows everything to reads
- observer errors are logged and never replace the station's result
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab, RevisionMismatchError, RunStateError, UndeclaredTransitionError
from tests.conftest import Check, Counter, Inc, declare_counter


def test_step_runs_one_station_and_run_finishes(lab):
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    assert run.status == "created" and run.head == 0 and run.next_stations == ("Inc",)

    first = run.step()
    assert (first.node_id, first.outcome, first.seq, first.next) == ("Inc", "settled", 1, ("Check",))
    assert run.state.count == 2 and run.status == "running"

    run.run()
    assert run.status == "done" and run.output == 6
    history = run.history()
    assert [c.seq for c in history] == list(range(7))
    assert [c.parent_seq for c in history] == [None, 0, 1, 2, 3, 4, 5]
    assert history[0].next[0].fields == {"by": 2}
    assert history[-1].status == "done" and history[-1].next == () and history[-1].output == 6
    assert history[3].state == {"count": 4, "seen": ["inc2", "inc2"]}
    with pytest.raises(RunStateError, match="done"):
        run.step()


def test_entered_and_settled_pair_up_by_attempt(lab):
    run = declare_counter(lab).start(Inc(by=2), state=Counter()).run()
    events = run.events()
    kinds = [e.kind for e in events]
    assert kinds[0] == "started" and kinds[-1] == "done"
    entered = [e for e in events if e.kind == "entered"]
    settled = [e for e in events if e.kind == "settled"]
    assert len(entered) == len(settled) == 6
    for en, se in zip(entered, settled, strict=True):
        assert en.attempt == se.attempt and en.node_id == se.node_id
        assert en.seq < se.seq
        assert se.checkpoint_seq == en.checkpoint_seq + 1
    assert [e.seq for e in events] == list(range(len(events)))


def test_native_results_match(lab):
    """The lab's output and final state equal pydantic-graph's own run of the same graph."""
    g = declare_counter(lab)
    native_state = Counter()
    native_out = asyncio.run(_native_run(g, native_state))
    run = g.start(Inc(by=2), state=Counter()).run()
    assert run.output == native_out
    assert run.state == native_state


async def _native_run(g, state):
    from pydantic_graph import EndMarker, GraphTaskRequest

    async with g.build().native.iter(state=state) as gr:
        fs = gr.next_task[0].fork_stack
        result = await gr.next([GraphTaskRequest("Inc", Inc(by=2), fs)])
        while not isinstance(result, EndMarker):
            result = await gr.next()
        return result.value


_flaky_calls: list[int] = []


@dataclass
class Flaky(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> End[int]:
        ctx.state.count += 100  # a mutation the failure must not leave behind
        _flaky_calls.append(1)
        if len(_flaky_calls) == 1:
            raise ValueError("the upstream service said no")
        return End(ctx.state.count)


def test_failure_keeps_head_and_retry_is_a_new_attempt(lab):
    _flaky_calls.clear()
    g = lab.graph("flaky", state_type=Counter, output_type=int)
    g.node(Flaky)
    run = g.start(Flaky(), state=Counter(count=1))
    result = run.step()
    assert result.outcome == "failed" and "upstream service said no" in result.error
    assert run.status == "failed" and run.head == 0
    assert run.state.count == 1, "the failed station's partial mutation is rolled back to the head"
    failed = run.events("failed")
    assert len(failed) == 1
    assert failed[0].payload["type"] == "builtins.ValueError"
    assert "upstream service said no" in failed[0].payload["message"]
    assert "Traceback" in failed[0].payload["traceback"]
    assert [c.seq for c in run.history()] == [0]
    assert lab.run(run.id).status == "failed" and lab.run(run.id).error["message"] == "the upstream service said no"

    with pytest.raises(RunStateError, match="retry"):
        run.step()
    assert len(_flaky_calls) == 1, "nothing is retried automatically"

    again = run.retry()
    assert again.outcome == "done" and run.output == 101
    attempts = [e.attempt for e in run.events("entered")]
    assert len(attempts) == 2 and attempts[0] != attempts[1]
    assert [e.kind for e in run.events()][-4:] == ["retry", "entered", "settled", "done"]


@dataclass
class Sneaky(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> Declared:
        return Undeclared()  # type: ignore[return-value]


@dataclass
class Declared(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> End[int]:
        return End(1)


_undeclared_ran: list[int] = []


@dataclass
class Undeclared(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> End[int]:
        _undeclared_ran.append(1)
        return End(2)


@dataclass
class EndsSilently(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> Declared:
        return End(3)  # type: ignore[return-value]


def test_undeclared_successor_is_refused_before_it_runs(lab):
    g = lab.graph("sneaky", state_type=Counter, output_type=int)
    for cls in (Sneaky, Declared, Undeclared, EndsSilently):
        g.node(cls)
    run = g.start(Sneaky(), state=Counter()).run()
    assert run.status == "failed" and run.head == 0
    assert run.error["type"].endswith("UndeclaredTransitionError")
    assert "Sneaky returned Undeclared" in run.error["message"] and "permitted: Declared" in run.error["message"]
    assert _undeclared_ran == []

    run2 = g.start(EndsSilently(), state=Counter()).run()
    assert run2.status == "failed" and "returned End" in run2.error["message"]
    assert issubclass(UndeclaredTransitionError, RuntimeError)


def test_sync_step_works_inside_a_running_event_loop(lab):
    """A Jupyter cell runs inside the kernel's loop: run.step() must still work there."""
    g = declare_counter(lab)

    async def cell():
        run = g.start(Inc(by=2), state=Counter())
        run.step()  # sync call from inside a running loop
        await run.astep()
        await run.arun()
        return run

    run = asyncio.run(cell())
    assert run.status == "done" and run.output == 6


_gate = threading.Event()


@dataclass
class Slow(BaseNode[Counter, None, int]):
    async def run(self, ctx: GraphRunContext[Counter, None]) -> Slow | End[int]:
        ctx.state.count += 1
        _gate.set()
        await asyncio.sleep(30)
        return End(ctx.state.count)


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


def test_cancel_in_flight_from_another_thread(lab):
    _gate.clear()
    g = lab.graph("slow", state_type=Counter, output_type=int)
    g.node(Slow)
    run = g.start(Slow(), state=Counter())
    worker = threading.Thread(target=run.run)
    worker.start()
    _gate.wait(10)
    t0 = time.monotonic()
    run.cancel()
    worker.join(60)
    assert not worker.is_alive() and time.monotonic() - t0 < 5
    assert run.status == "cancelled" and run.head == 0 and run.state.count == 0
    kinds = [e.kind for e in run.events()]
    assert kinds == ["started", "entered", "cancelled"]
    cancelled = run.events("cancelled")[0]
    assert cancelled.attempt == run.events("entered")[0].attempt
    assert lab.run(run.id).status == "cancelled"
    with pytest.raises(RunStateError, match="cancelled"):
        run.step()


def test_cancel_in_flight_from_an_async_task(lab):
    _gate.clear()
    g = lab.graph("slow", state_type=Counter, output_type=int)
    g.node(Slow)
    run = g.start(Slow(), state=Counter())

    async def main():
        task = asyncio.create_task(run.arun())
        while not _gate.is_set():
            await asyncio.sleep(0.01)
        run.cancel()
        await task

    asyncio.run(main())
    assert run.status == "cancelled" and [c.seq for c in run.history()] == [0]


def test_cancel_between_stations_and_concurrent_drive_refused(lab):
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    run.step()
    run.cancel()
    assert run.status == "cancelled" and lab.run(run.id).status == "cancelled"
    with pytest.raises(RunStateError, match="already cancelled"):
        run.cancel()

    _gate.clear()
    g2 = lab.graph("slow", state_type=Counter, output_type=int)
    g2.node(Slow)
    slow = g2.start(Slow(), state=Counter())
    worker = threading.Thread(target=slow.run)
    worker.start()
    _gate.wait(10)
    with pytest.raises(RunStateError, match="already running"):
        slow.step()
    slow.cancel()
    worker.join(60)


def test_pause_stops_at_the_next_boundary(lab):
    g = declare_counter(lab)
    run = g.start(Inc(by=2), state=Counter())
    run.on_event(lambda ev: run.pause() if ev.kind == "settled" and ev.checkpoint_seq == 2 else None)
    run.run()
    assert run.status == "running" and run.head == 2
    run.run()
    assert run.status == "done"


def test_max_steps(lab):
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    run.run(max_steps=3)
    assert run.head == 3 and run.status == "running"


def test_redefined_node_makes_a_new_revision_and_pinned_run_refuses(lab):
    g = declare_counter(lab)
    rev1 = g.revision
    run = g.start(Inc(by=2), state=Counter())
    run.step()

    g.node(Check)  # the same class again: same digest, same revision
    assert g.revision == rev1

    @dataclass
    class Check2(BaseNode[Counter, None, int]):  # noqa: F811 - a cell re-run with an edited body
        limit: int = 6

        async def run(self, ctx: GraphRunContext[Counter, None]) -> Inc | End[int]:
            return End(-1)

    Check2.get_node_id = classmethod(lambda cls: "Check")  # type: ignore[method-assign]
    g.node(Check2)
    assert g.revision == rev1 + 1
    with pytest.raises(RevisionMismatchError) as err:
        run.step()
    message = str(err.value)
    assert "station Check source changed" in message and "fork" in message
    assert f"counter@{rev1}" in message and f"counter@{rev1 + 1}" in message

    g.node(Check)  # back to the original definition: the run continues
    assert g.revision == rev1
    run.run()
    assert run.output == 6
    manifests = lab.sql("select revision, digest from graphs where graph_key = 'counter' order by 1").fetchall()
    assert [r[0] for r in manifests] == [rev1, rev1 + 1]


def test_batch_durability_buffers_yet_reads_see_everything(db_path):
    lab = Lab(db_path, durability="batch", batch_size=50)
    try:
        run = declare_counter(lab).start(Inc(by=2), state=Counter())
        run.run(max_steps=3)
        assert run.durability == "batch"
        assert [c.seq for c in run.history()] == [0, 1, 2, 3]
        run.run()
        assert lab.run(run.id).status == "done"
    finally:
        lab.close()
    reopened = Lab(db_path)
    try:
        assert reopened.run(run.id).output == 6
        assert len(reopened.store.checkpoints(run.id)) == 7
    finally:
        reopened.close()


def test_observer_errors_are_logged_not_raised(lab, caplog):
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    seen = []

    def bad(ev):
        raise RuntimeError("observer broke")

    run.on_event(bad)
    run.on_event(seen.append)
    with caplog.at_level(logging.ERROR):
        run.run()
    assert run.status == "done" and run.output == 6
    assert "observer failed" in caplog.text
    assert [e.kind for e in seen][-1] == "done"


def test_resume_after_close_continues_from_head(db_path):
    lab = Lab(db_path)
    run = declare_counter(lab).start(Inc(by=2), state=Counter())
    run.run(max_steps=3)
    run_id = run.id
    lab.close()

    lab2 = Lab(db_path)
    try:
        declare_counter(lab2)
        again = lab2.resume(run_id)
        assert again is not run and again.head == 3 and again.state.count == 4
        assert again.next_stations == ("Check",)
        again.run()
        assert again.output == 6
        assert [c.seq for c in again.history()] == list(range(7))
        assert "resumed" in [e.kind for e in again.events()]
        assert lab2.resume(run_id) is again, "one live handle per run in a process"
    finally:
        lab2.close()


def test_same_path_shares_one_store(db_path):
    a, b = Lab(db_path), Lab(db_path)
    try:
        assert a.store is b.store
        run = declare_counter(a).start(Inc(), state=Counter()).run()
        assert b.run(run.id).status == "done"
    finally:
        a.close()
        b.close()
    assert a.store.closed


def test_runs_listing_and_sql(lab):
    g = declare_counter(lab)
    r1 = g.start(Inc(by=2), state=Counter()).run()
    r2 = g.start(Inc(by=3), state=Counter())
    ids = [r.run_id for r in lab.runs()]
    assert ids == [r1.id, r2.id]
    assert [r.run_id for r in lab.runs(status="done")] == [r1.id]
    rows = lab.sql(
        "select seq, (state->>'count')::int as count from checkpoints where run_id = ? order by seq",
        [r1.id],
    ).fetchall()
    assert rows[-1] == (6, 6)
    assert Check in g.nodes.values()
