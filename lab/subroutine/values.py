"""What a visit returns, and the contract of node-local state types (seed 000 "State").

A node-local state type is a frozen, slotted dataclass with direct fields, immutable defaults and
a generated initializer: the runtime constructs it with no arguments before the enter port runs.
`check_state_type` refuses anything else at declaration, naming the field; `check_returned_state`
refuses, when a visit returns, a state that is not exactly the declared type or that holds a
mutable value anywhere inside it, naming the path to that value.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import decimal
import enum
import fractions
import inspect
import uuid
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import NodeStateTypeError, NodeStateValueError

__all__ = (
    "Success",
    "FeatureSuccess",
    "NoState",
    "check_state_type",
    "check_returned_state",
    "immutable_problem",
    "isolated",
)

OutputT = TypeVar("OutputT")
StateT = TypeVar("StateT")


@dataclass(frozen=True, slots=True)
class Success(Generic[OutputT, StateT]):
    """What a (non-Feature) visit returns: the payload for the next visit and its node's new state.

    `state` replaces the node's node-local state if the commit rule accepts the visit; a node
    declared without a state type may leave it out.
    """

    output: OutputT
    state: StateT | None = None


@dataclass(frozen=True, slots=True)
class FeatureSuccess:
    """What a Feature visit returns. The payload passes through unchanged; the feature values it
    proposed with `FeatureState.replace` are checked by the outgoing edges' effects."""


@dataclass(frozen=True, slots=True)
class NoState:
    """The node-local state of a node declared without one."""


_SCALARS: tuple[type, ...] = (
    type(None), bool, int, float, complex, str, bytes, range, enum.Enum, decimal.Decimal, fractions.Fraction,
    datetime.date, datetime.time, datetime.timedelta, datetime.timezone, uuid.UUID,
)  # fmt: skip


def immutable_problem(value: Any, path: str) -> str | None:
    """Where `value` holds something mutable (`path.items[1] is a list`), or None if it is immutable all through."""
    if isinstance(value, _SCALARS):
        return None
    if isinstance(value, tuple | frozenset):
        for i, item in enumerate(value if isinstance(value, tuple) else sorted(value, key=repr)):
            problem = immutable_problem(item, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if not type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return f"{path} is a {type(value).__qualname__}, a dataclass that is not frozen"
        for f in dataclasses.fields(value):
            problem = immutable_problem(getattr(value, f.name), f"{path}.{f.name}")
            if problem:
                return problem
        return None
    return f"{path} is a {type(value).__qualname__} ({value!r:.60}), which is mutable or not a plain value"


_ATOMIC = frozenset({type(None), bool, int, float, complex, str, bytes})


def isolated(value: Any) -> Any:
    """A copy of `value` a visit may change without touching the run's state (its pending payload, the
    invocation's params). An immutable value is its own copy: a deep copy costs more than a visit."""
    if type(value) in _ATOMIC:
        return value
    if _flat_mutable(value):  # a mutable dataclass of immutable parts (the usual params): a shallow copy is a deep one
        return copy.copy(value)
    if immutable_problem(value, "") is None:
        return value
    return copy.deepcopy(value)


def _flat_mutable(value: Any) -> bool:
    """Whether `value` is a plain, not frozen dataclass whose every field holds an immutable value."""
    cls = type(value)
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or params.frozen or isinstance(value, type) or hasattr(cls, "__deepcopy__") or hasattr(cls, "__copy__"):
        return False
    return all(immutable_problem(getattr(value, f.name), "") is None for f in dataclasses.fields(value))


def check_state_type(tp: Any, *, node: str) -> None:
    """Refuse, at declaration, a node-local state type the runtime could not construct safely."""
    where = f"node {node}: its state type"
    if not (inspect.isclass(tp) and dataclasses.is_dataclass(tp)):
        raise NodeStateTypeError(
            f"{where} {tp!r} is not a dataclass; declare it as @dataclass(frozen=True, slots=True) with defaults"
        )
    name = tp.__qualname__
    params = tp.__dataclass_params__  # type: ignore[attr-defined]
    if not params.frozen:
        raise NodeStateTypeError(
            f"{where} {name} is not frozen; declare it with @dataclass(frozen=True, slots=True)"
        )
    if "__slots__" not in tp.__dict__:
        raise NodeStateTypeError(
            f"{where} {name} is not slotted; declare it with @dataclass(frozen=True, slots=True)"
        )
    init = tp.__dict__.get("__init__")
    if (
        not params.init
        or init is None
        or getattr(init, "__code__", None) is None
        or init.__code__.co_filename != "<string>"
    ):
        raise NodeStateTypeError(
            f"{where} {name} does not have the initializer @dataclass generates; remove its own __init__ "
            "(the runtime constructs it with no arguments)"
        )
    own = tp.__dict__.get("__annotations__", {})
    for f in dataclasses.fields(tp):
        if f.name not in own:
            owner = next(
                (b.__qualname__ for b in tp.__mro__[1:] if f.name in b.__dict__.get("__annotations__", {})),
                "a base",
            )
            raise NodeStateTypeError(
                f"{where} {name} field {f.name!r} is inherited from {owner}; inherited fields are rejected: "
                f"declare {f.name!r} directly on {name}"
            )
        if f.default_factory is not dataclasses.MISSING:
            raise NodeStateTypeError(
                f"{where} {name} field {f.name!r} has a default factory; default factories are rejected: give it "
                "an immutable default (a tuple instead of a list, a frozenset instead of a set)"
            )
        if f.default is dataclasses.MISSING:
            raise NodeStateTypeError(
                f"{where} {name} field {f.name!r} has no default; the runtime constructs the state with no "
                "arguments, so every field needs an immutable default"
            )
        problem = immutable_problem(f.default, f"the default of {f.name!r}")
        if problem:
            raise NodeStateTypeError(
                f"{where} {name} field {f.name!r}: {problem}; defaults must be immutable"
            )


def check_returned_state(value: Any, tp: type, *, node: str) -> Any:
    """`value` if it is exactly `tp` with recursively immutable contents, else an error naming what is wrong."""
    if tp is NoState and value is None:
        return NoState()
    if type(value) is not tp:
        raise NodeStateValueError(
            f"node {node}'s visit returned Success(state={value!r:.80}) of type {type(value).__qualname__}; "
            f"it must be exactly {tp.__qualname__} (not a subclass, not a copy of another type)"
        )
    problem = immutable_problem(value, "state")
    if problem:
        raise NodeStateValueError(
            f"node {node}'s visit returned a state whose contents are not immutable: {problem}; use tuples, "
            "frozensets and frozen dataclasses"
        )
    return value
