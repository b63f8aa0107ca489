"""An adopted graph's annotations, read one at a time with the names pydantic-graph saw.

pydantic-graph resolves a step's hints while `GraphBuilder.add` runs, with the locals of the
function that builds the graph, and keeps none of them. Under `from __future__ import
annotations` every hint is a string, so a graph adopted after its building function returned
(`lab.adopt(build())`) may name what only those locals held: `Literal` imported inside the
function, a class defined there (pydantic-graph's own `test_label_on_decision_branch`).

So the lab resolves:

- one annotation at a time, and only those it needs (a step's `ctx: StepContext[...]`, a return
  hint it reads a type from): an annotation it has no use for never stops a graph;
- against the function's module, its closure, the frames that called `lab.adopt` and, beneath
  those, the names of the objects the built graph itself holds: its state, deps, input and output
  types, its node classes, the types its decisions match on and every type and typing form
  (`Literal`, `Union`, ...) inside them. Those are the objects pydantic-graph resolved.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from typing import Any, get_args, get_origin, get_type_hints

from pydantic_graph import Graph
from pydantic_graph.decision import Decision
from pydantic_graph.join import Join
from pydantic_graph.step import NodeStep
from pydantic_graph.util import unpack_type_expression

__all__ = ("graph_names", "annotation", "NO_ANNOTATION", "return_hint", "union_args")

NO_ANNOTATION: Any = inspect.Parameter.empty
"""What `annotation` returns for a name the function does not annotate."""


def graph_names(native: Graph[Any, Any, Any, Any]) -> dict[str, Any]:
    """The names of the types and typing forms the built graph holds, for hints that name them."""
    out: dict[str, Any] = {}
    roots: list[Any] = [native.state_type, native.deps_type, native.input_type, native.output_type]
    for node in native.nodes.values():
        if isinstance(node, NodeStep):
            roots.append(node.node_type)
        elif isinstance(node, Decision):
            roots.extend(unpack_type_expression(branch.source) for branch in node.branches)
        elif isinstance(node, Join):
            factory = node.initial_factory
            if inspect.isclass(factory) or typing.get_origin(factory) is not None:
                roots.append(factory)
    for tp in roots:
        _collect(tp, out, 0)
    return out


def _collect(tp: Any, out: dict[str, Any], depth: int) -> None:
    if depth > 12 or tp is None:
        return
    origin = typing.get_origin(tp)
    if origin is None:
        if inspect.isclass(tp) and tp.__module__ != "builtins":
            out.setdefault(tp.__name__, tp)
        return
    for form in (getattr(tp, "_name", None), getattr(origin, "_name", None)):
        if isinstance(form, str) and getattr(typing, form, None) is not None:
            out.setdefault(form, getattr(typing, form))  # Literal, Union, Optional, List, ...
    if inspect.isclass(origin) and origin.__module__ != "builtins":
        out.setdefault(origin.__name__, origin)  # a generic class: Box[int] names Box
    for arg in get_args(tp):
        _collect(arg, out, depth + 1)


def annotation(fn: Any, name: str, localns: dict[str, Any]) -> Any:
    """`fn`'s annotation of `name` (a parameter, or "return"), resolved; `NO_ANNOTATION` if it has none.

    Raises `NameError` (or what evaluating the annotation raises) when it cannot be resolved.
    """
    target = getattr(fn, "__func__", fn)
    raw = getattr(target, "__annotations__", None)
    if not isinstance(raw, dict) or name not in raw:
        return NO_ANNOTATION
    holder = types.SimpleNamespace(__annotations__={name: raw[name]})
    return get_type_hints(holder, globalns=_module_names(target), localns=localns, include_extras=False)[name]


def _module_names(fn: Any) -> dict[str, Any]:
    names = getattr(fn, "__globals__", None)
    if isinstance(names, dict):
        return names
    module = sys.modules.get(getattr(fn, "__module__", "") or "")
    return vars(module) if module is not None else {}


def return_hint(run: Any, localns: dict[str, Any]) -> dict[str, Any]:
    """Resolve only `run`'s return annotation: parameter hints may name types we never need."""
    run = inspect.unwrap(run) if run is not None else run  # a blocking node's run is wrapped (lab.engine.blocking)
    raw = getattr(run, "__annotations__", {}).get("return", inspect.Signature.empty)
    if raw is inspect.Signature.empty:
        return {}
    holder = lambda: None  # noqa: E731 - a function whose only annotation is the return hint
    holder.__annotations__ = {"return": raw}
    return get_type_hints(holder, globalns=getattr(run, "__globals__", None), localns=localns, include_extras=True)


def union_args(tp: Any) -> tuple[Any, ...]:
    """The members of a union type (`A | B`, `Union[A, B]`), or `(tp,)` for any other type."""
    origin = get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return get_args(tp)
    return (tp,)
