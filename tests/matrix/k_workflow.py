"""The matrix's declarative-workflow kind: `lab.workflow(definition, workers=...)` (see cases.py for the variants).

Three activities do the work, each through its worker: `add` (total + 2), `middle` (the
variant's station: an `interrupt()` in the worker, a flaky worker with a declared `retry:`, a
slow worker, or a loop back to `add`; then total * 10) and `finish` (total + 1; in the gate
variant behind a consent checkpoint). The workers are module-level functions that read the
variant from the bag, so building a variant again in another process gives the same revision.
"""

from __future__ import annotations

from typing import Any

from lab import Lab, Run, interrupt

from .cases import ANSWER, Slow, flaky, reset_tries, wait_slow

SLOW: dict[str, Slow | None] = {}
"""The `slow` variant's signal files, by graph name."""


def _graph(ctx: Any) -> str:
    return f"workflow_{ctx.variables['variant']}"


def add(ctx: Any) -> dict[str, Any]:
    return {"variables": {"total": ctx.variables["total"] + 2}}


async def middle(ctx: Any) -> dict[str, Any]:
    variant, total = ctx.variables["variant"], ctx.variables["total"]
    if variant == "interrupt":
        total += int(interrupt({"question": "how many more?"}))
    elif variant == "retry":
        flaky(_graph(ctx))
    elif variant == "slow":
        await wait_slow(SLOW.get(_graph(ctx)))
    return {"variables": {"total": total * 10}}


def finish(ctx: Any) -> dict[str, Any]:
    return {"variables": {"total": ctx.variables["total"] + 1}}


def definition(variant: str) -> dict[str, Any]:
    """The workflow of `variant`, as a dict (what a workflow.yaml holds)."""
    mid: dict[str, Any] = {
        "id": "middle",
        "variables": {"writes": ["total"]},
        "exits": [{"id": "again" if variant == "loop" else "next", "isDefault": True}],
    }
    if variant == "retry":
        mid["retry"] = {"max_attempts": 3, "on": ["ConnectionError"]}
    end: dict[str, Any] = {"id": "finish", "variables": {"writes": ["total"]}}
    if variant == "gate":
        end["checkpoints"] = [{"id": "confirm", "prompt": "Finish the tally?", "consent": True}]
    return {
        "name": f"workflow_{variant}",
        "variables": [
            {"name": "total", "type": "number", "default": 0},
            {"name": "variant", "type": "string", "default": variant},
        ],
        "activities": [
            {"id": "add", "variables": {"writes": ["total"]}, "exits": [{"id": "on", "isDefault": True}]},
            mid,
            end,
        ],
        "exit_destinations": {
            "add": {"on": "middle"},
            "middle": {"again": "add"} if variant == "loop" else {"next": "finish"},
        },
    }


class WorkflowCase:
    name = "workflow"

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        name = f"{self.name}_{variant}"
        reset_tries(name)
        SLOW[name] = slow
        return lab.workflow(definition(variant), workers={"add": add, "middle": middle, "finish": finish})

    def start(self, graph: Any, **kwargs: Any) -> Run:
        return graph.start(variables={"total": 0}, **kwargs)

    def subgraph_call(self, graph: Any) -> dict[str, Any]:
        return {"inputs": {"total": 0}}

    def expected(self, variant: str) -> Any:
        total = (2 + ANSWER) * 10 + 1 if variant == "interrupt" else 21
        return {"total": total, "variant": variant}


CASE = WorkflowCase()
