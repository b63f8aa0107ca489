"""Adopt accepts the annotations pydantic-graph accepts (issue 24 item 12).

pydantic-graph resolves a step's hints while the function that builds the graph runs, with that
function's locals. With `from __future__ import annotations` every hint is a string, so a graph
adopted after its building function returned may name what only those locals held: `Literal`
imported inside the function (pydantic-graph's `test_label_on_decision_branch`), a class defined
there. This module deliberately imports neither `Literal` nor those classes at module level.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from pydantic_graph import GraphBuilder, StepContext

from lab import Lab, StateContractError


@dataclass
class Route:
    picks: int = 0


def literal_decision() -> object:
    """A step returns `Literal["left", "right"]`; a decision routes on `Literal["left"]` / `Literal["right"]`."""
    from typing import Literal

    from pydantic_graph import TypeExpression

    g = GraphBuilder(state_type=Route, output_type=str)

    @g.step
    async def pick(ctx: StepContext[Route, None, object]) -> Literal["left", "right"]:
        ctx.state.picks += 1
        return "right"

    @g.step
    async def go_left(ctx: StepContext[Route, None, object]) -> str:
        return "went left"

    @g.step
    async def go_right(ctx: StepContext[Route, None, Literal["right"]]) -> str:
        return f"went {ctx.inputs}"

    g.add(
        g.edge_from(g.start_node).to(pick),
        g.edge_from(pick).to(
            g.decision()
            .branch(g.match(TypeExpression[Literal["left"]]).label("to the left").to(go_left))
            .branch(g.match(TypeExpression[Literal["right"]]).label("to the right").to(go_right))
        ),
        g.edge_from(go_left, go_right).to(g.end_node),
    )
    return g.build()


def local_classes() -> object:
    """Types defined inside the building function: one the graph holds (a branch's), one it does not."""
    from typing import Literal

    @dataclass
    class Parcel:
        weight: int

    Heavy = Literal["heavy"]  # an alias only this function's locals know

    g = GraphBuilder(state_type=Route, input_type=int, output_type=str)

    @g.step
    async def pack(ctx: StepContext[Route, None, int]) -> Parcel:
        return Parcel(ctx.inputs)

    @g.step
    async def weigh(ctx: StepContext[Route, None, Parcel]) -> Heavy | Parcel:
        return "heavy" if ctx.inputs.weight > 10 else ctx.inputs

    @g.step
    async def label(ctx: StepContext[Route, None, object]) -> str:
        return f"label for {getattr(ctx.inputs, 'weight', ctx.inputs)}"

    g.add(
        g.edge_from(g.start_node).to(pack),
        g.edge_from(pack).to(weigh),
        g.edge_from(weigh).to(g.decision().branch(g.match(Parcel).to(label)).branch(g.match(str).to(label))),
        g.edge_from(label).to(g.end_node),
    )
    return g.build()


def test_a_step_annotated_with_a_literal_imported_in_the_building_function_is_adopted() -> None:
    """Issue 24 item 12 (pydantic-graph's test_label_on_decision_branch): adopted, run, native result."""
    native_graph = literal_decision()
    native = asyncio.run(native_graph.run(state=Route()))
    lab = Lab(":memory:")
    lg = lab.adopt(literal_decision(), name="labelled")
    run = lg.start(state=Route())
    run.run()
    assert run.status == "done", run.error
    assert run.output == native == "went right"
    assert run.state.picks == 1
    stepped = lg.start(state=Route())
    while stepped.status not in ("done", "failed"):
        stepped.step()
    assert stepped.output == native  # one checkpoint per station, each read back from JSON


def test_types_only_the_building_function_knew_do_not_stop_the_graph() -> None:
    """Issue 24 item 12: a class defined in the building function is found among the graph's own types;
    an annotation the lab does not need (a step's return hint naming a local alias) never stops it."""
    native = asyncio.run(local_classes().run(state=Route(), inputs=4))
    lab = Lab(":memory:")
    lg = lab.adopt(local_classes(), name="parcels")
    run = lg.start(inputs=4, state=Route())
    while run.status not in ("done", "failed"):
        run.step()
    assert run.status == "done", run.error
    assert run.output == native == "label for 4"
    heavy = lg.start(inputs=40, state=Route())
    heavy.run()
    assert heavy.output == asyncio.run(local_classes().run(state=Route(), inputs=40)) == "label for heavy"


def test_an_input_annotation_nothing_can_resolve_is_refused_by_name() -> None:
    """The one annotation adopt needs, a step's `StepContext[...]`, still has to resolve: a clear error."""

    def build() -> object:
        @dataclass
        class Secret:
            code: int

        g = GraphBuilder(state_type=Route, input_type=int, output_type=int)

        @g.step
        async def reveal(ctx: StepContext[Route, None, Secret]) -> int:
            return 1

        g.add(g.edge_from(g.start_node).to(reveal), g.edge_from(reveal).to(g.end_node))
        return g.build()

    built = build()
    with pytest.raises(StateContractError, match=r"step reveal: cannot resolve its StepContext\[\.\.\.\] annotation.*'Secret'"):
        Lab(":memory:").adopt(built, name="secretive")
