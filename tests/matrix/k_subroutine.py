"""The matrix's subroutine kind: `lab.subroutine(...)` (seed 000; see cases.py for the variants).

Each variant is a subroutine of int payloads with node-local state: `add` adds one to the input,
`middle` is the variant's station (plain work, an `interrupt()`, a flaky visit with a retry
policy, a slow visit, or a loop back to `add`) and multiplies by ten, `approve` (the gate
variant) asks `context.consent(...)`, and `finish` adds one. Started with 1, a run ends with
(1 + 1) * 10 + 1 = 21, or (2 + ANSWER) * 10 + 1 when middle was answered ANSWER.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lab import Lab, Retry, Run, interrupt
from lab.subroutine import Success

from .cases import ANSWER, Slow, flaky, reset_tries, wait_slow

START = 1
"""The input every run of this case starts from."""

SLOW: dict[str, Slow | None] = {}
"""The `slow` variant's signal files, by subroutine name (a visit reads them by its graph's name)."""


@dataclass(frozen=True, slots=True)
class Visits:
    """Node-local state: how often the node was visited, and the last input it saw."""

    count: int = 0
    last: int = 0


def _variant(context: Any) -> str:
    return context.graph.name.split("_", 1)[1]


async def add(x: int, state: Visits, context: Any) -> Success:
    return Success(output=x + 1, state=Visits(state.count + 1, x))


async def middle(x: int, state: Visits, context: Any) -> Success:
    variant, name = _variant(context), context.graph.name
    if variant == "interrupt":
        x += int(interrupt({"question": "how many more?"}))
    elif variant == "retry":
        flaky(name)
    elif variant == "slow":
        await wait_slow(SLOW.get(name))
    out = (x * 10) % 1000 if variant == "loop" else x * 10  # a loop's payload stays small
    return Success(output=out, state=Visits(state.count + 1, x))


async def approve(x: int, state: Visits, context: Any) -> Success:
    verdict = context.consent("Finish the tally?", {"total": x})
    return Success(output=x if verdict.approved else 0, state=Visits(state.count + 1, x))


async def finish(x: int, state: Visits, context: Any) -> Success:
    return Success(output=x + 1, state=Visits(state.count + 1, x))


class SubroutineCase:
    name = "subroutine"

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        name = f"{self.name}_{variant}"
        reset_tries(name)
        SLOW[name] = slow
        sub = lab.subroutine(name, input=int, output=int)
        sub.node(add, state=Visits)
        policy = Retry(max_attempts=3, on=(ConnectionError,)) if variant == "retry" else None
        sub.node(middle, state=Visits, retry=policy)
        sub.edge(sub.input, add)
        sub.edge(add, middle)
        if variant == "loop":
            sub.edge(middle, add)
            return sub
        sub.node(finish, state=Visits)
        if variant == "gate":
            sub.node(approve, state=Visits, gate=True)
            sub.edge(middle, approve)
            sub.edge(approve, finish)
        else:
            sub.edge(middle, finish)
        sub.edge(finish, sub.output)
        return sub

    def start(self, graph: Any, **kwargs: Any) -> Run:
        return graph.start(START, **kwargs)

    def subgraph_call(self, graph: Any) -> dict[str, Any]:
        return {"inputs": START}

    def expected(self, variant: str) -> Any:
        return (START + 1 + ANSWER) * 10 + 1 if variant == "interrupt" else (START + 1) * 10 + 1


CASE = SubroutineCase()
