"""Gate expressions: the inline conditions of exits and steps (seed 004 "The rule of determinism").

    expr    := or
    or      := and ( "||" and )*
    and     := compare ( "&&" compare )*
    compare := unary ( ("==" | "!=" | ">" | "<" | ">=" | "<=") unary )?
    unary   := "!" unary | primary
    primary := IDENT | NUMBER | STRING | true | false | null | "(" expr ")"

A bare identifier is tested for truthiness (null, false, 0, "", [] and {} are false). A name the
bag lacks reads as null. `==` / `!=` compare JSON values (a boolean never equals a number);
`<`, `>`, `<=`, `>=` order two numbers or two strings, are false when either side is null, and
are an error for other mixes. Comparisons do not chain (`a < b < c` asks for parentheses).
`&&` and `||` short-circuit and give booleans. As in C and JavaScript, `!` binds tighter than a
comparison (`!a == b` is `(!a) == b`). Every error names the 1-based column.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ExpressionError

__all__ = (
    "Expr",
    "Name",
    "Literal_",
    "Not",
    "Compare",
    "Logic",
    "CompareOp",
    "parse",
    "evaluate",
    "truthy",
    "names",
    "unparse",
)

CompareOp = Literal["==", "!=", ">", "<", ">=", "<="]
COMPARE_OPS: tuple[CompareOp, ...] = ("==", "!=", ">=", "<=", ">", "<")


@dataclass(frozen=True, slots=True)
class Name:
    """A variable of the bag, read by name."""

    name: str
    column: int


@dataclass(frozen=True, slots=True)
class Literal_:
    """A number, string, `true`, `false` or `null`."""

    value: Any
    column: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expr
    column: int


@dataclass(frozen=True, slots=True)
class Compare:
    op: CompareOp
    left: Expr
    right: Expr
    column: int
    """The operator's column (where an evaluation error points)."""


@dataclass(frozen=True, slots=True)
class Logic:
    op: Literal["&&", "||"]
    left: Expr
    right: Expr
    column: int


Expr = Name | Literal_ | Not | Compare | Logic

# -- tokens --------------------------------------------------------------------------------

TokKind = Literal["ident", "literal", "op", "lparen", "rparen", "end"]


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokKind
    text: str
    value: Any
    column: int


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_KEYWORDS: dict[str, Any] = {"true": True, "false": False, "null": None}
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}
_OPERAND_END = ("ident", "literal", "rparen")


def _tokens(text: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        col = i + 1
        two = text[i : i + 2]
        if ch.isspace():
            i += 1
            continue
        if two in ("==", "!=", ">=", "<=", "&&", "||"):
            out.append(Token("op", two, None, col))
            i += 2
        elif ch in "<>!":
            out.append(Token("op", ch, None, col))
            i += 1
        elif ch in "()":
            out.append(Token("lparen" if ch == "(" else "rparen", ch, None, col))
            i += 1
        elif ch in "'\"":
            value, i = _string(text, i)
            out.append(Token("literal", text[col - 1 : i], value, col))
        elif (m := _NUMBER.match(text, i)) and not (ch == "-" and out and out[-1].kind in _OPERAND_END):
            raw = m.group()
            out.append(Token("literal", raw, float(raw) if any(c in raw for c in ".eE") else int(raw), col))
            i = m.end()
        elif m := _IDENT.match(text, i):
            word = m.group()
            out.append(
                Token("literal", word, _KEYWORDS[word], col)
                if word in _KEYWORDS
                else Token("ident", word, None, col)
            )
            i = m.end()
        else:
            raise ExpressionError(_stray(text, i), text, col)
    out.append(Token("end", "", None, n + 1))
    return out


def _stray(text: str, i: int) -> str:
    ch = text[i]
    if ch == "=":
        return "a single '=' is not an operator (did you mean '=='?)"
    if ch == "&":
        return "a single '&' is not an operator (did you mean '&&'?)"
    if ch == "|":
        return "a single '|' is not an operator (did you mean '||'?)"
    return f"unexpected character {ch!r}"


def _string(text: str, start: int) -> tuple[str, int]:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\\":
            nxt = text[i + 1 : i + 2]
            if nxt not in _ESCAPES:
                raise ExpressionError(f"unknown escape '\\{nxt}' in a string", text, i + 1)
            out.append(_ESCAPES[nxt])
            i += 2
            continue
        out.append(ch)
        i += 1
    raise ExpressionError(f"the string opened here is never closed (add a closing {quote})", text, start + 1)


# -- parsing -------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def fail(self, reason: str, tok: Token | None = None) -> ExpressionError:
        return ExpressionError(reason, self.text, (tok or self.tok).column)

    def take(self) -> Token:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def parse(self) -> Expr:
        if self.tok.kind == "end":
            raise self.fail("the expression is empty")
        expr = self.or_()
        if self.tok.kind != "end":
            raise self.fail(
                f"unexpected {_what(self.tok)} after a complete expression (missing '&&' or '||'?)"
            )
        return expr

    def or_(self) -> Expr:
        left = self.and_()
        while self.tok.kind == "op" and self.tok.text == "||":
            op = self.take()
            left = Logic("||", left, self.operand_after(op, self.and_), op.column)
        return left

    def and_(self) -> Expr:
        left = self.compare()
        while self.tok.kind == "op" and self.tok.text == "&&":
            op = self.take()
            left = Logic("&&", left, self.operand_after(op, self.compare), op.column)
        return left

    def operand_after(self, op: Token, rule: Any) -> Expr:
        if self.tok.kind in ("end", "rparen") or (self.tok.kind == "op" and self.tok.text not in ("!",)):
            raise self.fail(f"expected an operand after '{op.text}', found {_what(self.tok)}")
        return rule()

    def unary(self) -> Expr:
        if self.tok.kind == "op" and self.tok.text == "!":
            op = self.take()
            return Not(self.operand_after(op, self.unary), op.column)
        return self.primary()

    def compare(self) -> Expr:
        left = self.unary()
        if self.tok.kind == "op" and self.tok.text in COMPARE_OPS:
            op = self.take()
            right = self.operand_after(op, self.unary)
            if self.tok.kind == "op" and self.tok.text in COMPARE_OPS:
                raise self.fail("comparisons do not chain; group them with parentheses and '&&'")
            return Compare(op.text, left, right, op.column)  # type: ignore[arg-type]
        return left

    def primary(self) -> Expr:
        tok = self.tok
        if tok.kind == "ident":
            self.take()
            return Name(tok.text, tok.column)
        if tok.kind == "literal":
            self.take()
            return Literal_(tok.value, tok.column)
        if tok.kind == "lparen":
            self.take()
            if self.tok.kind == "rparen":
                raise self.fail("empty parentheses: expected an expression")
            inner = self.or_()
            if self.tok.kind != "rparen":
                raise self.fail(
                    f"expected ')' to close the '(' at column {tok.column}, found {_what(self.tok)}"
                )
            self.take()
            return inner
        raise self.fail(f"expected a name, a value or '(', found {_what(tok)}")


def _what(tok: Token) -> str:
    return "the end of the expression" if tok.kind == "end" else repr(tok.text)


def parse(text: str) -> Expr:
    """Parse a gate expression, or raise `ExpressionError` pointing at the offending column."""
    if not isinstance(text, str):
        raise ExpressionError(f"a gate expression is a string, got {type(text).__name__}", str(text), 1)
    return _Parser(text).parse()


# -- evaluation ----------------------------------------------------------------------------


def truthy(value: Any) -> bool:
    """Truthiness of a bag value: null, false, 0, "", [] and {} are false."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float | str | list | dict):
        return bool(value)
    return True


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: a boolean never equals a number; 1 == 1.0; lists and objects compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if _is_number(v):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v), type(v).__name__)


def _value(expr: Expr, bag: Mapping[str, Any], text: str) -> Any:
    if isinstance(expr, Name):
        return bag.get(expr.name)
    if isinstance(expr, Literal_):
        return expr.value
    return _test(expr, bag, text)


def _test(expr: Expr, bag: Mapping[str, Any], text: str) -> bool:
    if isinstance(expr, Logic):
        left = _test(expr.left, bag, text)
        if expr.op == "&&":
            return left and _test(expr.right, bag, text)
        return left or _test(expr.right, bag, text)
    if isinstance(expr, Not):
        return not _test(expr.operand, bag, text)
    if isinstance(expr, Compare):
        a, b = _value(expr.left, bag, text), _value(expr.right, bag, text)
        if expr.op == "==":
            return json_equal(a, b)
        if expr.op == "!=":
            return not json_equal(a, b)
        if a is None or b is None:
            return False
        if not ((_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str))):
            raise ExpressionError(
                f"'{expr.op}' orders two numbers or two strings, not a {_kind(a)} and a {_kind(b)}",
                text,
                expr.column,
            )
        return {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b}[expr.op]
    return truthy(_value(expr, bag, text))


def evaluate(expr: Expr | str, bag: Mapping[str, Any], *, text: str | None = None) -> bool:
    """Whether the expression holds for `bag` (a name the bag lacks reads as null)."""
    if isinstance(expr, str):
        text, expr = expr, parse(expr)
    return _test(expr, bag, text if text is not None else unparse(expr))


def names(expr: Expr) -> list[Name]:
    """Every variable the expression reads, in order of appearance."""
    if isinstance(expr, Name):
        return [expr]
    if isinstance(expr, Literal_):
        return []
    if isinstance(expr, Not):
        return names(expr.operand)
    return [*names(expr.left), *names(expr.right)]


_PREC = {"||": 1, "&&": 2}


def unparse(expr: Expr) -> str:
    """Expression text that parses back to the same tree (parenthesised only where needed)."""
    return _unparse(expr, 0)


def _literal_text(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return (
            '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
        )
    return repr(v)


def _unparse(expr: Expr, ctx: int) -> str:
    if isinstance(expr, Name):
        return expr.name
    if isinstance(expr, Literal_):
        return _literal_text(expr.value)
    if isinstance(expr, Not):
        inner = _unparse(expr.operand, 4)
        return "!" + inner
    if isinstance(expr, Compare):
        text = f"{_unparse(expr.left, 4)} {expr.op} {_unparse(expr.right, 4)}"
        return f"({text})" if ctx >= 3 else text
    prec = _PREC[expr.op]
    # left-associative: the right operand of the same operator needs parentheses
    text = f"{_unparse(expr.left, prec)} {expr.op} {_unparse(expr.right, prec + 0.5)}"  # type: ignore[arg-type]
    return f"({text})" if ctx > prec else text
