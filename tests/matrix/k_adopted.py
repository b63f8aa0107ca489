"""The matrix's adopted kind: a serial graph built with pydantic-graph's own `GraphBuilder`, unchanged.

The graph is the step kind's (k_steps.py: ``start -> add -> middle -> finish -> end``, the same
step functions), built natively and handed over with ``lab.adopt(graph, name=..., retry=...)``:
the lab adds nothing to the graph's code. The ``retry`` variant's policy comes from adopt's
``retry={"middle": Retry(...)}``; the ``gate`` variant's gate is a `lab.Gate` node class added
with ``GraphBuilder.node`` (docs/adopt.md "Gates and interrupts in adopted graphs"), reached
through ``middle``'s return hint; ``interrupt()`` is called inside the ``middle`` step.
"""

from __future__ import annotations

from typing import Any

from pydantic_graph import Graph, GraphBuilder

from lab import Lab, Retry, Run

from .cases import ANSWER, Slow, reset_tries
from .k_steps import SLOW, START, Approve, Tally, add, finish, middle, middle_gate, middle_loop, negative


def native_graph(variant: str) -> Graph[Any, Any, Any, Any]:
    """The variant's graph as a pydantic-graph user builds it (no lab in sight)."""
    g = GraphBuilder(state_type=Tally, input_type=int, output_type=int)
    s_add = g.step(add)
    s_middle = g.step({"gate": middle_gate, "loop": middle_loop}.get(variant, middle), node_id="middle")
    g.add(g.edge_from(g.start_node).to(s_add), g.edge_from(s_add).to(s_middle))
    if variant == "gate":
        g.add(g.node(Approve))
    elif variant == "loop":
        g.add(
            g.edge_from(s_middle).to(
                g.decision(node_id="again")
                .branch(g.match(int, matches=negative).to(g.end_node))
                .branch(g.match(int).to(s_add))
            )
        )
    else:
        s_finish = g.step(finish)
        g.add(g.edge_from(s_middle).to(s_finish), g.edge_from(s_finish).to(g.end_node))
    return g.build()


class AdoptedCase:
    name = "adopted"

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        name = f"{self.name}_{variant}"
        reset_tries(name)
        SLOW[name] = slow
        retry = {"middle": Retry(max_attempts=3, on=(ConnectionError,))} if variant == "retry" else None
        return lab.adopt(native_graph(variant), name=name, retry=retry)

    def _args(self, graph: Any) -> dict[str, Any]:
        variant = graph.name.split("_", 1)[1]
        return {"inputs": START, "state": Tally(variant=variant, graph=graph.name)}

    def start(self, graph: Any, **kwargs: Any) -> Run:
        return graph.start(**self._args(graph), **kwargs)

    def subgraph_call(self, graph: Any) -> dict[str, Any]:
        return self._args(graph)

    def expected(self, variant: str) -> Any:
        return (START + ANSWER) * 10 + 1 if variant == "interrupt" else START * 10 + 1


CASE = AdoptedCase()
