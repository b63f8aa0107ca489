"""A graph whose cases visit different stations, for tests/evals/test_evaluate_spans.py: `Route`
sends a short text to `Short`, a long one to `Long`; `Long` opens a span of its own (`lookup`)."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry import trace
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import HasMatchingSpan
from pydantic_graph import BaseNode, End, GraphRunContext

from lab import Lab


@dataclass
class Text:
    text: str = ""


@dataclass
class Route(BaseNode[Text, None, str]):
    async def run(self, ctx: GraphRunContext[Text, None]) -> Short | Long:
        return Long() if len(ctx.state.text) > 4 else Short()


@dataclass
class Short(BaseNode[Text, None, str]):
    async def run(self, ctx: GraphRunContext[Text, None]) -> End[str]:
        return End(ctx.state.text)


@dataclass
class Long(BaseNode[Text, None, str]):
    async def run(self, ctx: GraphRunContext[Text, None]) -> End[str]:
        with trace.get_tracer("a-station").start_as_current_span("lookup"):
            return End(ctx.state.text[:4])


def declare(lab: Lab):
    """The router graph in `lab` (its nodes live in this module, so Ray workers import them)."""
    g = lab.graph("router", state_type=Text, output_type=str)
    for node in (Route, Short, Long):
        g.node(node)
    return g, Route


def dataset() -> Dataset:
    cases = [
        Case(name="hi", inputs=Text("hi"), expected_output="hi"),
        Case(name="hello", inputs=Text("hello there"), expected_output="hell"),
        Case(name="yo", inputs=Text("yo"), expected_output="yo"),
    ]
    evaluators = [
        HasMatchingSpan(query={"name_contains": "Long"}, evaluation_name="went_long"),
        HasMatchingSpan(query={"name_contains": "Short"}, evaluation_name="went_short"),
        HasMatchingSpan(query={"name_equals": "lookup"}, evaluation_name="looked_up"),
    ]
    return Dataset(name="routes", cases=cases, evaluators=evaluators)


if __name__ == "__main__":  # the live capture, in a process of its own (a global tracer provider)
    import json
    import sys

    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    lab = Lab(sys.argv[1])
    g, Route = declare(lab)
    ev = lab.evaluate(g, dataset(), entry=Route(), progress=False)
    print(json.dumps({r.name: r.assertions for r in ev.rows()}))
    lab.close()
