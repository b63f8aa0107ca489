"""Gate expressions (seed 004 "The rule of determinism"): the parser, its errors, and property tests.

Scenarios: every operator of the seed's grammar on examples; errors that name the column; and
hypothesis properties that parse random expressions, rendered minimally (precedence matters) and
fully parenthesised, and compare the lab's evaluation with a small reference evaluator written
here independently of `lab.workflow.expressions`.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lab.workflow.errors import ExpressionError
from lab.workflow.expressions import evaluate, names, parse, unparse

GRAMMAR = (
    "An exit's when is the inline gate expression a step uses: comparisons with ==, !=, >, <, >= and <=, "
    "bare identifier truthiness, unary !, and && / || with parentheses."
)

BAG = {"n": 3, "m": 3.5, "z": 0, "s": "abc", "e": "", "t": True, "f": False, "nil": None, "xs": [1], "o": {}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("n == 3", True),
        ("n != 3", False),
        ("m > n", True),
        ("n < m", True),
        ("n >= 3", True),
        ("n <= 2", False),
        ("s == 'abc'", True),
        ('s > "abb"', True),
        ("t", True),
        ("f", False),
        ("z", False),
        ("e", False),
        ("xs", True),
        ("o", False),
        ("nil", False),
        ("absent", False),
        ("!f", True),
        ("!!t", True),
        ("t && f", False),
        ("t || f", True),
        ("f || t && f", False),
        ("(f || t) && t", True),
        ("!f == t", True),
        ("n == 3.0", True),
        ("t == 1", False),
        ("nil == null", True),
        ("absent == null", True),
        ("absent > 1", False),
        ("n > -4", True),
        ("xs == xs", True),
    ],
)
def test_each_operator_of_the_grammar(text: str, expected: bool) -> None:
    """An exit's when is the inline gate expression a step uses: comparisons with ==, !=, >, <, >= and
    <=, bare identifier truthiness, unary !, and && / || with parentheses."""
    assert evaluate(text, BAG) is expected


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("a >", 4, "expected an operand after '>'"),
        ("a = b", 3, "did you mean '=='"),
        ("a & b", 3, "did you mean '&&'"),
        ("a | b", 3, "did you mean '||'"),
        ("(a && b", 8, "expected ')' to close the '(' at column 1"),
        ("a b", 3, "after a complete expression"),
        ("", 1, "empty"),
        ("a < b < c", 7, "do not chain"),
        ("x == 'abc", 6, "never closed"),
        ("()", 2, "empty parentheses"),
        ("a && || b", 6, "expected an operand after '&&'"),
        ("a #", 3, "unexpected character '#'"),
        ("a)", 2, "after a complete expression"),
        ("!", 2, "expected an operand after '!'"),
        ("s == 'a\\q'", 8, "unknown escape"),
    ],
)
def test_errors_point_at_the_column(text: str, column: int, fragment: str) -> None:
    """A real parser with errors that point at the column (issue 19, gate expressions)."""
    with pytest.raises(ExpressionError) as info:
        parse(text)
    err = info.value
    assert err.column == column, str(err)
    assert fragment in str(err)
    caret_line = str(err).splitlines()[-1]
    assert caret_line.index("^") - 4 == column - 1  # the caret sits under the column


def test_ordering_a_string_against_a_number_is_an_error_at_the_operator() -> None:
    """Comparisons with >, <, >= and <= order numbers or strings; a mix is the author's bug, named."""
    with pytest.raises(ExpressionError) as info:
        evaluate("t && s > n", BAG)
    assert info.value.column == 8
    assert "not a string and a number" in str(info.value)


def test_names_lists_the_variables_read() -> None:
    assert [(n.name, n.column) for n in names(parse("a > 1 && (!b || c == 'x')"))] == [
        ("a", 1),
        ("b", 12),
        ("c", 17),
    ]


def test_non_string_expression_is_refused() -> None:
    with pytest.raises(ExpressionError, match="is a string"):
        parse(3)  # type: ignore[arg-type]


# -- properties against a reference evaluator ----------------------------------------------

VARS = ["a", "b", "c", "k", "q", "w", "missing"]
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([0.5, -1.5, 2.0]),
    st.text(alphabet="xyz", max_size=3),
)
bags = st.fixed_dictionaries({v: values for v in VARS if v != "missing"})
leaves = st.one_of(st.tuples(st.just("var"), st.sampled_from(VARS)), st.tuples(st.just("lit"), values))
OPS = ["==", "!=", ">", "<", ">=", "<="]


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.tuples(st.just("not"), children),
        st.tuples(st.just("and"), children, children),
        st.tuples(st.just("or"), children, children),
        st.tuples(st.just("cmp"), st.sampled_from(OPS), children, children),
    )


trees = st.recursive(leaves, _extend, max_leaves=12)


class Mix(Exception):
    """The reference's 'cannot order these two values'."""


def ref_truth(v: Any) -> bool:
    if v is None or isinstance(v, bool):
        return bool(v)
    if isinstance(v, int | float):
        return v != 0
    return len(v) > 0


def ref_eq(a: Any, b: Any) -> bool:
    kind = lambda v: "b" if isinstance(v, bool) else "n" if isinstance(v, int | float) else type(v).__name__  # noqa: E731
    return kind(a) == kind(b) and a == b


def ref_eval(tree: Any, bag: dict[str, Any]) -> Any:
    """The reference: values for leaves and comparisons' operands, booleans for the rest."""
    tag = tree[0]
    if tag == "var":
        return bag.get(tree[1])
    if tag == "lit":
        return tree[1]
    if tag == "not":
        return not ref_truth(ref_eval(tree[1], bag))
    if tag == "and":
        return ref_truth(ref_eval(tree[1], bag)) and ref_truth(ref_eval(tree[2], bag))
    if tag == "or":
        return ref_truth(ref_eval(tree[1], bag)) or ref_truth(ref_eval(tree[2], bag))
    op, a, b = tree[1], ref_eval(tree[2], bag), ref_eval(tree[3], bag)
    if op == "==":
        return ref_eq(a, b)
    if op == "!=":
        return not ref_eq(a, b)
    if a is None or b is None:
        return False
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if not numbers and not (isinstance(a, str) and isinstance(b, str)):
        raise Mix(op)
    return {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[op]


def lit(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


LEVEL = {"or": 1, "and": 2, "cmp": 3, "not": 4, "var": 5, "lit": 5}


def render(tree: Any, *, full: bool, need: int = 0) -> str:
    """Text for `tree`: `full` parenthesises every compound; else only where precedence needs it."""
    tag = tree[0]
    if tag == "var":
        return tree[1]
    if tag == "lit":
        return lit(tree[1])
    if tag == "not":
        text = "!" + render(tree[1], full=full, need=4)
    elif tag == "cmp":
        text = f"{render(tree[2], full=full, need=4)} {tree[1]} {render(tree[3], full=full, need=4)}"
    else:
        op = "&&" if tag == "and" else "||"
        level = LEVEL[tag]
        text = f"{render(tree[1], full=full, need=level)} {op} {render(tree[2], full=full, need=level + 1)}"
    return f"({text})" if full and tag != "not" or LEVEL[tag] < need else text


def outcome(fn: Any) -> Any:
    try:
        return ("value", fn())
    except (Mix, ExpressionError):
        return ("mix",)


def as_bool(tree: Any, v: Any) -> Any:
    return ref_truth(v) if tree[0] in ("var", "lit") else v


@settings(max_examples=400, deadline=None)
@given(trees, bags, st.booleans())
def test_parser_agrees_with_the_reference_evaluator(tree: Any, bag: dict[str, Any], full: bool) -> None:
    """An exit's when is the inline gate expression a step uses: comparisons with ==, !=, >, <, >= and
    <=, bare identifier truthiness, unary !, and && / || with parentheses."""
    text = render(tree, full=full)
    expected = outcome(lambda: as_bool(tree, ref_eval(tree, bag)))
    assert outcome(lambda: evaluate(text, bag)) == expected, text


@settings(max_examples=300, deadline=None)
@given(trees)
def test_unparse_round_trips(tree: Any) -> None:
    """The tree a text parses to is the tree its unparsed text parses to (precedence kept)."""
    text = render(tree, full=False)
    once = unparse(parse(text))
    assert unparse(parse(once)) == once
    assert unparse(parse(render(tree, full=True))) == once


@settings(max_examples=300, deadline=None)
@given(trees, st.data())
def test_a_stray_character_is_reported_at_its_column(tree: Any, data: st.DataObject) -> None:
    """A real parser with errors that point at the column: a stray `#` anywhere outside a string.

    Splitting a two-character token (`=#=`, `&#&`, `-#1`) leaves its first half stray, one column
    to the left: that is the column then."""
    text = render(tree, full=False)
    pos = data.draw(st.integers(0, len(text)))
    assume(text[:pos].count('"') % 2 == 0)
    broken = text[:pos] + "#" + text[pos:]
    with pytest.raises(ExpressionError) as info:
        parse(broken)
    col = info.value.column
    assert col == pos + 1 or (col == pos and text[pos - 1] in "=&|-"), broken
