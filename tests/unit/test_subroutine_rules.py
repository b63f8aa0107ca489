"""Seed 000 ("State"), the rules that need no run: node-state types, feature domains, the commit rule.

Each test's docstring quotes the seed sentence it proves. The routing functions are pure
(`lab.subroutine.routing`), so the commit rule is tested here directly; tests/integration/
test_subroutine_run.py proves the same rules through real runs on a DuckDB file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from lab import Lab
from lab.subroutine import (
    AmbiguousEdgeError,
    EdgeDecl,
    FeatureDomainError,
    FeatureResetError,
    FeatureState,
    FeatureSuccess,
    FeatureUnsetError,
    NoCompatibleEdgeError,
    NodeStateTypeError,
    NodeStateValueError,
    SubroutineDefinitionError,
    Success,
    define,
    route,
)
from lab.subroutine.features import Feature, Proposal, current_proposal
from lab.subroutine.values import check_returned_state, check_state_type

# -- node-local state types -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Good:
    count: int = 0
    names: tuple[str, ...] = ()
    flags: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Base:
    inherited: int = 0


@dataclass(frozen=True, slots=True)
class Child(Base):
    own: int = 0


@dataclass(frozen=True, slots=True)
class Factory:
    items: tuple[int, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Unslotted:
    n: int = 0


@dataclass(slots=True)
class Thawed:
    n: int = 0


@dataclass(frozen=True, slots=True)
class NoDefault:
    n: int


@dataclass(frozen=True, slots=True, init=False)
class OwnInit:
    n: int = 0

    def __init__(self) -> None:
        object.__setattr__(self, "n", 1)


def test_node_state_type_must_be_frozen_slotted_dataclass_with_direct_fields() -> None:
    """Seed: "Its type must be a frozen, slotted dataclass with direct fields, immutable defaults, and a
    generated initializer." """
    check_state_type(Good, node="n")
    with pytest.raises(NodeStateTypeError, match="Unslotted is not slotted"):
        check_state_type(Unslotted, node="n")
    with pytest.raises(NodeStateTypeError, match="Thawed is not frozen"):
        check_state_type(Thawed, node="n")
    with pytest.raises(NodeStateTypeError, match="is not a dataclass"):
        check_state_type(dict, node="n")
    with pytest.raises(NodeStateTypeError, match="initializer @dataclass generates"):
        check_state_type(OwnInit, node="n")
    with pytest.raises(NodeStateTypeError, match="field 'n' has no default"):
        check_state_type(NoDefault, node="n")


def test_inherited_fields_and_default_factories_are_rejected_naming_the_field() -> None:
    """Seed: "Inherited fields and default factories are rejected." (at declaration, naming the field)"""
    sub = define("s", input=int, output=int)
    with pytest.raises(NodeStateTypeError, match=r"node grow: .*field 'inherited' is inherited from Base"):

        @sub.node(state=Child)
        async def grow(n, state, context):  # pragma: no cover - never declared
            return Success(n, state)

    with pytest.raises(NodeStateTypeError, match="field 'items' has a default factory"):

        @sub.node(state=Factory)
        async def other(n, state, context):  # pragma: no cover - never declared
            return Success(n, state)

    assert sub.nodes == {}


def test_mutable_defaults_are_rejected_naming_the_field() -> None:
    """Seed: "... immutable defaults ..." — a default holding a mutable value names the field and the value."""

    @dataclass(frozen=True, slots=True)
    class Holder:
        inner: Good = Good()
        cell: object = None

    bad = dataclass(frozen=True, slots=True)(
        type("Bad", (), {"__annotations__": {"box": tuple}, "box": ((1, [2]),), "__module__": __name__})
    )
    check_state_type(Holder, node="n")
    with pytest.raises(NodeStateTypeError, match=r"field 'box': the default of 'box'\[0\]\[1\] is a list"):
        check_state_type(bad, node="n")


def test_returned_state_must_be_exactly_the_declared_type_and_recursively_immutable() -> None:
    """Seed: "A returned state must have exactly the declared node state type and recursively immutable
    contents." """
    assert check_returned_state(Good(1, ("a",)), Good, node="n") == Good(1, ("a",))

    @dataclass(frozen=True, slots=True)
    class Lookalike:
        count: int = 0

    with pytest.raises(NodeStateValueError, match=r"node n's visit returned .*Lookalike.*exactly Good"):
        check_returned_state(Lookalike(), Good, node="n")
    with pytest.raises(NodeStateValueError, match=r"state.names\[1\] is a list"):
        check_returned_state(Good(1, ("a", ["b"])), Good, node="n")  # type: ignore[arg-type]
    with pytest.raises(NodeStateValueError, match="exactly Good"):
        check_returned_state(None, Good, node="n")


# -- features ----------------------------------------------------------------------------------

MODE = Feature.declare("mode", ("fast", "careful"))
LEVEL = Feature.declare("level", int)


def test_feature_domains_are_declared_and_enforced() -> None:
    """Seed: "A Feature visit uses FeatureState.get(FEATURE) and FeatureState.replace(FEATURE, value) to
    propose values in the feature's declared domain." """
    lit = Feature.declare("lit", Literal["a", "b"])
    assert lit.contains("a") and not lit.contains("c")
    assert LEVEL.contains(3) and not LEVEL.contains(True) and not LEVEL.contains("3")
    proposal = Proposal({"mode": MODE, "level": LEVEL}, {"mode": None, "level": None}, "choose")
    token = current_proposal.set(proposal)
    try:
        assert FeatureState.get(MODE) is None
        FeatureState.replace(MODE, "fast")
        assert FeatureState.get("mode") == "fast"
        with pytest.raises(
            FeatureDomainError, match=r"proposed 'slow' for feature 'mode'.*\{'fast', 'careful'\}"
        ):
            FeatureState.replace(MODE, "slow")
        with pytest.raises(FeatureDomainError, match="feature 'other' is not declared"):
            FeatureState.replace("other", 1)
    finally:
        current_proposal.reset(token)
    with pytest.raises(SubroutineDefinitionError, match="domain"):
        Feature.declare("bad", [None])
    with pytest.raises(SubroutineDefinitionError, match="not one of bool, int"):
        Feature.declare("bad", list)


def test_feature_state_outside_a_feature_visit_is_refused() -> None:
    """Seed: "Feature visits propose changes checked by outgoing effects." — only a Feature visit proposes."""
    from lab import RunStateError

    with pytest.raises(RunStateError, match="outside a Feature visit"):
        FeatureState.replace(MODE, "fast")


def test_an_initialised_feature_cannot_be_reset_to_none() -> None:
    """Seed: "An initialized feature cannot be reset to None." """
    proposal = Proposal({"mode": MODE}, {"mode": "fast"}, "choose")
    token = current_proposal.set(proposal)
    try:
        with pytest.raises(FeatureResetError, match="cannot be reset to None"):
            FeatureState.replace(MODE, None)
        assert proposal.values == {"mode": "fast"}
    finally:
        current_proposal.reset(token)


def test_condition_on_a_feature_still_none_raises_value_error() -> None:
    """Seed: "evaluating a condition on a feature that is still None raises ValueError." """
    edge = EdgeDecl("a", "b", when=MODE.equals("fast"))
    with pytest.raises(ValueError, match="feature 'mode', which is still None") as info:
        route("a", [edge], {"mode": None}, {"mode": None})
    assert isinstance(info.value, FeatureUnsetError)


# -- routing and the commit rule --------------------------------------------------------------


def test_conditions_read_the_state_before_the_visit_effects_the_proposed_successor() -> None:
    """Seed: "Routing evaluates conditions against the state before the source visit and effects against
    that state and the proposed successor." """
    stay = EdgeDecl("choose", "fast", when=MODE.equals("fast"), effects=(MODE.transition("fast", "careful"),))
    other = EdgeDecl("choose", "slow", when=MODE.equals("careful"))
    # the condition sees 'fast' (before), although the visit proposes 'careful'
    assert route("choose", [stay, other], {"mode": "fast"}, {"mode": "careful"}) is stay
    # the effect sees before and proposed: fast -> careful is admitted, careful -> careful is not
    with pytest.raises(NoCompatibleEdgeError, match=r"condition mode == 'careful' is false"):
        route("choose", [other], {"mode": "fast"}, {"mode": "careful"})


def test_the_first_assignment_needs_an_assignment_or_unconstrained_effect() -> None:
    """Seed: "The first assignment requires an assignment or unconstrained effect on the outgoing edge;" """
    assign = EdgeDecl("choose", "a", effects=(MODE.assign("fast"),))
    free = EdgeDecl("choose", "b", effects=(MODE.unconstrained(),))
    transition = EdgeDecl("choose", "c", effects=(MODE.transition("careful", "fast"),))
    bare = EdgeDecl("choose", "d")
    before, proposed = {"mode": None}, {"mode": "fast"}
    assert route("choose", [assign], before, proposed) is assign
    assert route("choose", [free], before, proposed) is free
    with pytest.raises(
        NoCompatibleEdgeError, match="first assignment .* needs an assignment or unconstrained effect"
    ):
        route("choose", [transition], before, proposed)
    with pytest.raises(NoCompatibleEdgeError, match="changed mode .* has no effect on mode"):
        route("choose", [bare], before, proposed)


def test_exactly_one_compatible_edge_zero_or_several_raise() -> None:
    """Seed: "Exactly one compatible outgoing edge is required. Zero or multiple compatible edges raise an
    exception;" """
    a = EdgeDecl("n", "a", when=MODE.equals("fast"))
    b = EdgeDecl("n", "b", when=MODE.one_of("fast", "careful"))
    c = EdgeDecl("n", "c", when=~MODE.equals("fast"))
    state = {"mode": "fast"}
    assert route("n", [a, c], state, state) is a
    with pytest.raises(
        AmbiguousEdgeError, match=r"2 outgoing edges of n are compatible.*n → a.*n → b"
    ) as amb:
        route("n", [a, b, c], state, state)
    assert "not undone" in str(amb.value)
    with pytest.raises(NoCompatibleEdgeError, match="no outgoing edge of n is compatible"):
        route("n", [c], state, state)


def test_edge_declarations_name_what_is_wrong() -> None:
    """Edges are declared beside their nodes; a wrong one is refused naming the edge."""
    sub = define("s", input=int, output=int)
    mode = sub.feature("mode", ("x", "y"))
    with pytest.raises(
        SubroutineDefinitionError, match="Input → a: the enter port's edge takes no condition"
    ):
        sub.edge(sub.input, "a", when=mode.equals("x"))
    with pytest.raises(SubroutineDefinitionError, match="two effects on feature 'mode'"):
        sub.edge("a", "b", effect=[mode.assign("x"), mode.unconstrained()])
    with pytest.raises(SubroutineDefinitionError, match="when= takes a Condition"):
        sub.edge("a", "b", when=lambda f: True)  # type: ignore[arg-type]
    sub.edge(sub.input, "a")
    assert "edge Input → a names a, which is not a declared node" in sub.problems()


def test_graph_view_draws_conditions_and_effects_as_edge_labels() -> None:
    """Issue 18: the graph view draws edge conditions and effects as labels (seed: "Edge conditions observe
    it; Feature visits propose changes checked by outgoing effects")."""
    from lab.subroutine import FeatureSuccess

    lab = Lab(":memory:")
    sub = lab.subroutine("drawn", input=int, output=int)
    mode = sub.feature("mode", ("fast", "careful"))

    @sub.feature_node
    async def choose(n: int, context) -> FeatureSuccess:
        return FeatureSuccess()

    @sub.node
    async def work(n: int, state, context) -> Success:
        return Success(n)

    sub.edge(sub.input, choose)
    sub.edge(choose, work, effect=mode.assign("fast"))
    sub.edge(choose, sub.output, effect=mode.transition("fast", "careful"))
    sub.edge(work, sub.output, when=mode.equals("fast"))
    dot = sub.render()
    assert "choose -> work [label=\"mode := 'fast'\"]" in dot
    assert "choose -> __end__ [label=\"mode: 'fast' → 'careful'\"]" in dot
    assert "work -> __end__ [label=\"if mode == 'fast'\"]" in dot
    assert "choose --> work: mode #58;= 'fast'" in sub.mermaid()
    svg = sub.svg()  # the real Graphviz `dot` lays the labels out
    assert "if mode ==" in svg and "mode := " in svg
    lab.close()


def test_a_renamed_visit_in_a_rerun_cell_drops_the_old_node(capsys: pytest.CaptureFixture[str]) -> None:
    """A subroutine is built cell by cell like any lab graph (issue 18): with the kernel extension, a cell
    re-run with a renamed visit drops the node it declared before, and an edge cell re-run replaces its edge."""
    from tests.unit.test_kernel_ext import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "kernel_ext")
    try:
        cells = [
            "from lab import Lab\nfrom lab.subroutine import Success\nlab = Lab(':memory:')\n"
            "sub = lab.subroutine('cells', input=int, output=int)",
            "@sub.node\nasync def first(n: int, state, context):\n    return Success(n + 1)\n",
            "sub.edge(sub.input, 'first')\nsub.edge('first', sub.output)",
        ]
        for i, cell in enumerate(cells):
            assert ip.run_cell(cell, cell_id=f"sub-{i}").success
        sub = ip.user_ns["sub"]
        assert list(sub.nodes) == ["first"] and sub.start(1).run().output == 2
        renamed = cells[1].replace("def first", "def begin")
        assert ip.run_cell(renamed, cell_id="sub-1").success
        assert "this cell used to declare first and now declares begin" in capsys.readouterr().err
        assert list(sub.nodes) == ["begin"]
        edges = cells[2].replace("'first'", "'begin'")
        assert ip.run_cell(edges, cell_id="sub-2").success
        assert sorted(sub.definition.edges) == [("Input", "begin"), ("begin", "Output")]
        assert sub.start(1).run().output == 2
    finally:
        ip.run_line_magic("unload_ext", "kernel_ext")
        lab = ip.user_ns.pop("lab", None)
        if lab is not None:
            lab.close()
        for name in ("sub", "Success", "Lab"):
            ip.user_ns.pop(name, None)


def test_visits_must_return_success_and_feature_visits_feature_success() -> None:
    """Seed: "A visit receives its edge-specific Input and, except for a Feature visit, returns Success.output."
    and "It returns FeatureSuccess and preserves the payload." """
    lab = Lab(":memory:")
    sub = lab.subroutine("returns", input=int, output=int)
    mode = sub.feature("mode", ("a", "b"))
    assert sub.feature("mode", ("a", "b")) is mode  # a re-run feature cell keeps the edges built on it
    seen: list[object] = []

    @sub.feature_node
    async def pick(n: int, context) -> FeatureSuccess:
        seen.append(dict(context.features))
        return Success(output=n)  # type: ignore[return-value]

    @sub.node
    async def plain(n: int, state, context) -> Success:
        return FeatureSuccess()  # type: ignore[return-value]

    sub.edge(sub.input, pick)
    sub.edge(pick, plain, effect=mode.unconstrained())
    sub.edge(plain, sub.output)
    run = sub.start(1).run()
    assert run.status == "failed" and "Feature visit pick returned Success" in run.error["message"]
    assert seen == [{"mode": None}]  # context.features: the feature state before the visit, read-only
    sub.feature_node(name="pick")(lambda n, context: FeatureSuccess())
    run = sub.start(1).run()
    assert run.status == "failed" and "visit plain returned FeatureSuccess" in run.error["message"]
    other = sub.feature(
        "mode", ("a", "b", "c")
    )  # a new domain: edges built on the old one must be re-declared
    assert other is not mode
    assert any("re-run the cell that declares this edge" in p for p in sub.definition.problems())
    lab.close()
