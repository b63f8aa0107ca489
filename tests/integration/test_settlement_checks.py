"""Values are checked where they enter a checkpoint: at start and when a station settles.

Scenarios (issue 12 items 9, 10), on a real DuckDB file, closed and reopened as a restart:
- a node setting an int field to None, or End("x") under output_type=int: the station fails with
  an error naming the field, nothing of it is stored, the state rolls back to the head, and after
  a restart the run resumes (it used to raise CheckpointError "edited by hand?")
- g.start refuses an entry node or a state the declared types do not admit, writing nothing
- a value JSON would change (int dict keys, a tuple in an Any field, an open file) fails the
  station naming the field, and the file is not read
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import CheckpointValueError, Lab, StateContractError

_plan: list[str] = []
"""What the next visits of `Act` do wrong, one word each ("" does nothing wrong)."""
_opened: list[Any] = []


@dataclass
class Box:
    count: int = 0
    loose: Any = None
    table: dict = field(default_factory=dict)


@dataclass
class Act(BaseNode[Box, None, int]):
    by: int = 1

    async def run(self, ctx: GraphRunContext[Box, None]) -> Act | End[int]:
        what = _plan.pop(0) if _plan else ""
        ctx.state.count += self.by
        nxt: Act | End[int] = End(ctx.state.count) if ctx.state.count >= 2 else Act()
        if what == "none":
            ctx.state.count = None  # type: ignore[assignment]
        elif what == "end-str":
            nxt = End("x")  # type: ignore[arg-type]
        elif what == "int-keys":
            ctx.state.table = {1: "a"}
        elif what == "tuple":
            ctx.state.loose = (1, 2)
        elif what == "file":
            _opened.append(open(__file__))  # noqa: SIM115 - the point: a live file in state
            ctx.state.loose = _opened[-1]
        elif what == "next-bad":
            nxt = Act(by="two")  # type: ignore[arg-type]
        return nxt

def _declare(lab: Lab):
    g = lab.graph("box", state_type=Box, output_type=int)
    g.node(Act)
    return g


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("none", r"state field 'count' does not validate as declared in Box: .* got None"),
        ("end-str", r"End data does not validate as declared in int: .* got 'x'"),
        ("next-bad", r"node Act field 'by' does not validate as declared in int: .* got 'two'"),
        ("int-keys", r"state field 'table' changes when written as JSON and read back: \{1: 'a'\} became \{'1': 'a'\}"),
        ("tuple", r"state field 'loose' changes when written as JSON and read back: \(1, 2\) became \[1, 2\]"),
        ("file", r"state field 'loose' holds TextIOWrapper \(an iterator or open file\)"),
    ],
)
def test_a_bad_value_fails_its_station_and_the_run_resumes_after_a_restart(db_path, what, message):
    lab = Lab(db_path)
    run = _declare(lab).start(Act(), state=Box())
    _plan[:] = [what]
    result = run.step()
    assert result.outcome == "failed", result
    assert run.status == "failed" and run.head == 0 and run.state == Box()
    failed = run.events("failed")[-1].payload
    assert failed["type"] == "lab.errors.CheckpointValueError" and failed["node_id"] == "Act"
    assert re.search(message, failed["message"]), failed["message"]
    assert [c.seq for c in run.history(all_branches=True)] == [0], "nothing of the station is stored"
    while _opened:
        with _opened.pop() as fh:
            assert fh.tell() == 0, "the file was not read"
    lab.close()

    lab = Lab(db_path)  # a restart: the stored run decodes and continues
    _declare(lab)
    again = lab.resume(run.id)
    assert again.status == "failed" and again.state == Box()
    again.retry()
    again.run()
    assert again.status == "done" and again.output == 2
    lab.close()


def test_start_refuses_a_bad_entry_node_or_state_and_writes_nothing(db_path):
    lab = Lab(db_path)
    g = _declare(lab)
    with pytest.raises(CheckpointValueError, match=r"node Act field 'by' does not validate as declared in int: .* got 'x'"):
        g.start(Act(by="x"), state=Box())  # type: ignore[arg-type]
    with pytest.raises(CheckpointValueError, match=r"state field 'count' does not validate .* got None"):
        g.start(Act(), state=Box(count=None))  # type: ignore[arg-type]
    with pytest.raises(CheckpointValueError, match=r"state field 'table' changes when written as JSON"):
        g.start(Act(), state=Box(table={2: "b"}))
    with pytest.raises(StateContractError):  # CheckpointValueError is a StateContractError
        g.start(Act(), state=Box(loose=(1,)))
    assert lab.runs() == []
    lab.close()
