"""Field reducers of the super-step model (seed 002/003): how a step's partial updates fold into the state.

`lab.graph(..., model="superstep", reducers={"messages": append, "total": add})`. A reducer is
`reducer(current, update) -> new`: the field's value before the update and the value a node
returned for it. A field without a reducer takes the last update (`last`). The step folds its
nodes' updates in the fixed node order, so non-commutative reducers (`append`, `last`) give the
same result on every run, and commutative ones (`add`, `union`) would anyway.

`"*"` names the graph's own reducer, `merge(a, b) -> state`, which merges the nodes that return
a whole state object (seed 003 "the Reducer merges the nodes that returned a whole state")
before the partial updates are applied; without one a later whole state replaces an earlier one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .errors import ArgumentError

__all__ = ("append", "last", "add", "union", "Reducer", "NAMED", "WHOLE_STATE", "check_reducers", "state_fields")

Reducer = Callable[[Any, Any], Any]

WHOLE_STATE = "*"
"""The key of the graph's reducer for whole-state returns."""


def append(current: Any, update: Any) -> list[Any]:
    """A list grows: a list or tuple update extends it, any other value is appended as one item."""
    items = list(current) if current is not None else []
    if isinstance(update, (list, tuple)):
        items.extend(update)
    else:
        items.append(update)
    return items


def last(current: Any, update: Any) -> Any:
    """The update replaces the value (the default for a field without a reducer)."""
    return update


def add(current: Any, update: Any) -> Any:
    """`current + update`: counters sum, lists concatenate."""
    return update if current is None else current + update


def union(current: Any, update: Any) -> set[Any] | frozenset[Any]:
    """A set grows by the update's items (a single hashable value is one item); the result keeps `current`'s set type."""
    items = update if isinstance(update, (set, frozenset, list, tuple)) else (update,)
    merged = set(current or ()) | set(items)
    return frozenset(merged) if isinstance(current, frozenset) else merged


NAMED: dict[str, Reducer] = {"append": append, "last": last, "add": add, "union": union}


def state_fields(state_type: Any) -> tuple[str, ...] | None:
    """The fields of a dataclass or pydantic state type; None when the type does not say."""
    if dataclasses.is_dataclass(state_type) and isinstance(state_type, type):
        return tuple(f.name for f in dataclasses.fields(state_type))
    fields = getattr(state_type, "model_fields", None)
    if isinstance(fields, Mapping):
        return tuple(fields)
    return None


def check_reducers(reducers: Any, state_type: Any, where: str) -> dict[str, Reducer]:
    """The reducers by field, each a callable: names (`"append"`) resolved, fields checked against the state type."""
    if reducers is None:
        return {}
    if not isinstance(reducers, Mapping):
        raise ArgumentError(f"{where}: reducers={reducers!r} must be a dict of field name -> reducer (append, last, add, union or a callable)")
    fields = state_fields(state_type)
    out: dict[str, Reducer] = {}
    for name, reducer in reducers.items():
        if not isinstance(name, str):
            raise ArgumentError(f"{where}: reducers keys are state field names, got {name!r}")
        if name != WHOLE_STATE and fields is not None and name not in fields:
            raise ArgumentError(
                f"{where}: reducers names field {name!r}, which the state type {getattr(state_type, '__qualname__', state_type)} "
                f"does not have; its fields are {list(fields)}"
            )
        if isinstance(reducer, str):
            if reducer not in NAMED:
                raise ArgumentError(f"{where}: reducers[{name!r}] = {reducer!r} is not a reducer; use one of {sorted(NAMED)} or a callable")
            reducer = NAMED[reducer]
        if not callable(reducer):
            raise ArgumentError(
                f"{where}: reducers[{name!r}] = {reducer!r} is not callable; give append, last, add, union "
                "(from lab.reducers) or a function (current, update) -> new value"
            )
        out[name] = reducer
    return out


def check_model_options(
    name: str, state_type: Any, model: Any, reducers: Any, isolate_state: Any, max_node_concurrency: Any
) -> tuple[str | None, dict[str, Any], str, int | None]:
    """`lab.graph`'s super-step model options, checked (seed 002/003); what to fix when one is wrong."""
    where = f"lab.graph({name!r})"
    if model not in (None, "superstep"):
        raise ArgumentError(f"{where}: model={model!r}; use model='superstep' (nodes return updates folded by reducers) or leave it out")
    if isolate_state not in ("fanout", "always", "never"):
        raise ArgumentError(f"{where}: isolate_state={isolate_state!r}; use 'fanout' (the default), 'always' or 'never'")
    if max_node_concurrency is not None and (
        isinstance(max_node_concurrency, bool) or not isinstance(max_node_concurrency, int) or max_node_concurrency < 1
    ):
        raise ArgumentError(f"{where}: max_node_concurrency={max_node_concurrency!r}; give a whole number of at least 1, or None for no bound")
    if model is None and (reducers or isolate_state != "fanout" or max_node_concurrency is not None):
        raise ArgumentError(
            f"{where}: reducers, isolate_state and max_node_concurrency belong to the super-step model; add model='superstep'"
        )
    return model, check_reducers(reducers, state_type, where), isolate_state, max_node_concurrency
