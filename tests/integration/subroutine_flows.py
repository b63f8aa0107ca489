"""Subroutine definitions kept in a module, so Workflow calls can import them in a child process.

`slow_child` logs each visit to a file and, at its second node, waits for a gate file: the kill
test kills the parent while the child waits there. `workflow_parent` calls it with a Workflow
call; `inprocess_parent` calls `counting_child` with a Subroutine call.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from lab.subroutine import FeatureState, FeatureSuccess, Subroutine, Success, Workflow, define


@dataclass(frozen=True, slots=True)
class Visits:
    count: int = 0


@dataclass
class Files:
    log: str = ""
    gate: str = ""


def note(path: str, line: str) -> None:
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


# -- a child that waits at its second node ------------------------------------------------------

slow_child = define("slow_child", input=int, output=int, params=Files)


@slow_child.node(state=Visits)
async def first(n: int, state: Visits, context) -> Success:
    note(context.params.log, f"first {os.getpid()}")
    return Success(output=n + 1, state=Visits(state.count + 1))


@slow_child.node(state=Visits)
async def second(n: int, state: Visits, context) -> Success:
    note(context.params.log, f"second-start {os.getpid()}")
    deadline = time.monotonic() + 60
    while context.params.gate and not os.path.exists(context.params.gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    note(context.params.log, "second-end")
    return Success(output=n * 10, state=Visits(state.count + 1))


slow_child.edge(slow_child.input, first)
slow_child.edge(first, second)
slow_child.edge(second, slow_child.output)


# -- a parent calling it in a separate process --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Calls:
    calls: int = 0
    outputs: tuple[int, ...] = ()


workflow_parent = define("workflow_parent", input=int, output=int, params=Files)


@workflow_parent.node(state=Calls)
async def call(n: int, state: Calls, context) -> Success:
    note(context.params.log, f"adapter {os.getpid()}")
    out = await context.invoke(
        Workflow(slow_child), n, params=Files(log=context.params.log, gate=context.params.gate)
    )
    return Success(output=out, state=Calls(state.calls + 1, state.outputs + (out,)))


workflow_parent.edge(workflow_parent.input, call)
workflow_parent.edge(call, workflow_parent.output)


# -- the same parent, calling it in its own process ---------------------------------------------

inprocess_parent = define("inprocess_parent", input=int, output=int, params=Files)


@inprocess_parent.node(state=Calls, name="call")
async def call_here(n: int, state: Calls, context) -> Success:
    note(context.params.log, f"adapter {os.getpid()}")
    out = await context.invoke(
        Subroutine(slow_child), n, params=Files(log=context.params.log, gate=context.params.gate)
    )
    return Success(output=out, state=Calls(state.calls + 1, state.outputs + (out,)))


inprocess_parent.edge(inprocess_parent.input, "call")
inprocess_parent.edge("call", inprocess_parent.output)


# -- a child with the same node and feature names as its parent ---------------------------------

counting_child = define("counting_child", input=int, output=int)
CHILD_MODE = counting_child.feature("mode", ("fresh", "seen"))


@counting_child.feature_node
async def look(n: int, context) -> FeatureSuccess:
    FeatureState.replace(CHILD_MODE, "fresh" if FeatureState.get(CHILD_MODE) is None else "seen")
    return FeatureSuccess()


@counting_child.node(state=Visits)
async def tally(n: int, state: Visits, context) -> Success:
    return Success(output=n * 100 + state.count, state=Visits(state.count + 1))


counting_child.edge(counting_child.input, look)
counting_child.edge(look, tally, effect=CHILD_MODE.assign("fresh"))
counting_child.edge(tally, counting_child.output, when=CHILD_MODE.equals("fresh"))
