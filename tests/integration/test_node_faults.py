"""Nodes that raise what is not an `Exception`, and Ctrl-C, against a real DuckDB file.

Scenarios (issue 12 items 6-8):
- a node raising a `BaseException` subclass: the exception reaches the caller, the run is
  `failed` at its head with the state rolled back, and retry applies the change once
- `sys.exit()` and `KeyboardInterrupt` inside a node reach the calling thread without stopping
  the lab's event-loop thread; later steps of the same and of new runs work
- the same on the super-step engine (a map + join): the whole super-step rolls back
- Ctrl-C (a real SIGINT to a real process) while a station is in flight: in the same process
  `lab.resume(id)` or `run.retry()` continues the run to the end
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphBuilder, GraphRunContext, StepContext
from pydantic_graph.join import reduce_list_append

from lab import Lab, RunStateError


@dataclass
class Tally:
    count: int = 0


class Abandon(BaseException):
    """Not an Exception: what `except Exception` in a driver lets through."""


_raise: list[BaseException] = []
"""What the next visit of `Bump` raises after mutating the state (popped: once each)."""


@dataclass
class Bump(BaseNode[Tally, None, int]):
    async def run(self, ctx: GraphRunContext[Tally, None]) -> End[int]:
        ctx.state.count += 1
        if _raise:
            raise _raise.pop(0)
        return End(ctx.state.count)


def _start(lab: Lab):
    g = lab.graph("bump", state_type=Tally, output_type=int)
    g.node(Bump)
    return g.start(Bump(), state=Tally())


def _step_in_thread(run, timeout: float = 20.0) -> Any:
    """`run.step()` from another thread: what it returned or raised, or a failure if it hangs."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["result"] = run.step()
        except BaseException as exc:  # the point: SystemExit and KeyboardInterrupt must arrive here
            out["raised"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "run.step() never returned: the lab's event loop is gone"
    return out.get("raised", out.get("result"))


def test_base_exception_rolls_back_and_fails_the_station(file_lab):
    _raise[:] = [Abandon("give up")]
    run = _start(file_lab)
    with pytest.raises(Abandon, match="give up"):
        run.step()
    assert run.status == "failed" and run.head == 0
    assert run.state == Tally(count=0), "the half-done change is rolled back to the head"
    assert run.error["type"].endswith("Abandon") and run.error["node_id"] == "Bump"
    assert file_lab.run(run.id).status == "failed"
    assert [e.kind for e in run.events()] == ["started", "entered", "failed"]
    with pytest.raises(RunStateError, match="retry"):
        run.step()
    again = run.retry()
    assert again.outcome == "done" and run.output == 1, "the change is applied once, not twice"


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=["sys.exit", "KeyboardInterrupt"])
def test_exit_and_keyboard_interrupt_reach_the_caller_and_the_lab_goes_on(file_lab, exc):
    _raise[:] = [exc]
    run = _start(file_lab)
    raised = _step_in_thread(run)
    assert raised is exc, f"expected the node's {exc!r} in the caller, got {raised!r}"
    assert run.state == Tally(count=0) and run.head == 0
    if isinstance(exc, KeyboardInterrupt):
        assert run.status == "interrupted"
        assert run.events()[-1].payload["reason"] == "KeyboardInterrupt in flight"
    else:
        assert run.status == "failed" and run.error["type"] == "builtins.SystemExit"
    assert file_lab.run(run.id).status == run.status

    other = _start(file_lab)  # a new run on the same lab
    assert _step_in_thread(other).outcome == "done" and other.output == 1
    again = run.retry()  # and the same run, from its head
    assert again.outcome == "done" and run.output == 1


@dataclass
class Squares:
    squared: int = 0


def _parallel_run(lab: Lab):
    """A 3-wide map + join on the super-step engine; square(2) raises what `_raise` holds."""
    g = GraphBuilder(state_type=Squares, input_type=list[int], output_type=list[int])

    @g.step
    async def square(ctx: StepContext[Squares, None, int]) -> int:
        ctx.state.squared += 1
        if ctx.inputs == 2 and _raise:
            raise _raise.pop(0)
        return ctx.inputs**2

    collect = g.join(reduce_list_append, initial_factory=list[int])
    g.add(
        g.edge_from(g.start_node).map().to(square),
        g.edge_from(square).to(collect),
        g.edge_from(collect).to(g.end_node),
    )
    return lab.adopt(g.build(), name="squares").start(inputs=[1, 2, 3])


@pytest.mark.parametrize(
    "exc", [Abandon("give up"), SystemExit(3), KeyboardInterrupt()], ids=["BaseException", "sys.exit", "KeyboardInterrupt"]
)
def test_the_super_step_engine_records_and_surfaces_them_too(file_lab, exc):
    _raise[:] = [exc]
    run = _parallel_run(file_lab)
    raised = _step_in_thread(run)  # the start's routing (checkpoint 1, not a step), then the three squares
    assert raised is exc, f"expected the task's {exc!r} in the caller, got {raised!r}"
    assert run.state == Squares(squared=0) and run.head == 1, "the whole super-step rolls back"
    assert run.next_stations == ("square",) * 3
    assert run.status == ("interrupted" if isinstance(exc, KeyboardInterrupt) else "failed")
    assert file_lab.run(run.id).status == run.status
    assert run.retry().outcome == "done" and run.output == [1, 4, 9] and run.state == Squares(squared=3)


WORKER = Path(__file__).with_name("sigint_worker.py")


@pytest.mark.slow
def test_ctrl_c_in_flight_then_resume_or_retry_in_the_same_process(tmp_path):
    """A real SIGINT to a process waiting in `run.step()`; the same process then continues."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), os.fspath(tmp_path / "lab.duckdb")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reports: list[dict[str, Any]] = []
    try:
        # one run continued by lab.resume(id), one by run.retry(): each says IN FLIGHT, then reports
        while len(reports) < 2:
            line = proc.stdout.readline()
            if line.strip() == "IN FLIGHT":
                proc.send_signal(signal.SIGINT)
            elif line.startswith("{"):
                reports.append(json.loads(line))
            else:
                proc.kill()
                raise AssertionError(f"worker said {line!r}; stderr: {proc.communicate(timeout=30)[1]}")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert [x["how"] for x in reports] == ["resume", "retry"], reports
    for report in reports:
        assert report["after_ctrl_c"] == "interrupted" and report["state_after_ctrl_c"] == 0
        assert report["continued"] == "done" and report["output"] == 1, report
        assert report["stored"] == "done"
    resumed = reports[0]
    assert resumed["same_handle"] and resumed["after_resume"] == "running"
    assert resumed["kinds"] == ["started", "entered", "interrupted", "resumed", "entered", "settled", "done"]
    assert reports[1]["kinds"] == ["started", "entered", "interrupted", "retry", "entered", "settled", "done"]
