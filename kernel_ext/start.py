"""`%lab start`: which graph a line starts, and with what (docs/magics.md, "`%lab start`").

Every kind of graph starts through its handle's own `start` (the same call a cell makes): a
graph of node classes at a node, an adopted graph or one declared with steps from its inputs, a
workflow, a subroutine or any other kind with the arguments its `start` takes. The magic only
picks the graph and checks the words against that `start`'s signature, so a wrong keyword is a
one-line `UsageError` naming what the graph's `start` accepts.

The line's forms, after it is evaluated as the arguments of a call:

- nothing: the current graph's default start (a graph of node classes: its first declared node);
- a node instance or class first: the graph that declares it (node classes), keywords
  `state=`, `deps=`, `durability=`;
- a graph handle first: ``GRAPH.start(rest...)`` with everything after it, for every kind;
- only keywords (or a first value a node-class graph would not take): the current graph's
  ``start(...)`` with them.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from IPython.core.error import UsageError
from pydantic_graph import BaseNode

from lab import LabGraph, Run
from lab.adopt import AdoptedGraph

__all__ = (
    "NODE_KEYWORDS",
    "INPUT_KEYWORDS",
    "starts_at_node",
    "starts_from_inputs",
    "is_graph_handle",
    "start_graph",
    "how_to_start",
    "start_at_first_node",
    "node_instance",
)

NODE_KEYWORDS = ("state", "deps", "durability")
"""What `%lab start NODE, ...` accepts after the node (a graph of node classes)."""

INPUT_KEYWORDS = ("inputs", "state", "deps", "durability")
"""What `%lab start inputs=...` accepts on a graph that starts from its inputs."""


def starts_at_node(g: Any) -> bool:
    """True for a graph of `@g.node` classes: its `start` takes the node the run begins at."""
    return isinstance(g, LabGraph) and type(g).start is LabGraph.start and not g.starts_from_inputs


def starts_from_inputs(g: Any) -> bool:
    """True for an adopted graph or one declared with steps and edges: it starts at its start node."""
    return isinstance(g, AdoptedGraph) or getattr(g, "starts_from_inputs", False) is True


def is_graph_handle(value: Any) -> bool:
    """True for a lab graph handle of any kind (declared, adopted, a workflow, a subroutine)."""
    return isinstance(value, LabGraph | AdoptedGraph)


def node_instance(node: Any) -> Any:
    """`node` itself, or its class instantiated with its defaults (`%lab start Inc`)."""
    if isinstance(node, type) and issubclass(node, BaseNode):
        try:
            return node()
        except TypeError as exc:
            raise UsageError(
                f"{node.__name__} needs fields to start ({exc}); say `%lab start {node.__name__}(...)`"
            ) from None
    return node


def start_at_first_node(g: LabGraph) -> Run:
    """A bare `%lab start` on a graph of node classes: its first declared node, default state."""
    if not g.nodes:
        raise UsageError(f"graph {g.name!r} has no nodes yet; declare some with {g.decorator}")
    first = next(iter(g.nodes.values()))
    try:
        node = first()
    except TypeError as exc:
        raise UsageError(
            f"%lab start with no argument starts at the first declared node, {first.__name__}, "
            f"which needs fields ({exc}); say `%lab start {first.__name__}(...)`"
        ) from None
    return g.start(node)


def start_graph(g: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Run:
    """``g.start(*args, **kwargs)``, after checking the words against the signature of `g.start`.

    A graph of node classes given a node class first gets an instance of it, as `%lab start Inc`.
    The graph's own refusals (a `LabError`) reach the magic, which shows them on one line.
    """
    if args and starts_at_node(g):
        args = (node_instance(args[0]), *args[1:])
    try:
        inspect.signature(g.start).bind(*args, **kwargs)
    except ValueError:  # a start without a readable signature: it judges the words itself
        pass
    except TypeError as exc:
        raise _refused(g, exc) from None
    try:
        return g.start(*args, **kwargs)
    except TypeError as exc:  # `**options` passed on to a `start` further down that refuses one
        if _CALL_REFUSED.search(str(exc)) is None:
            raise
        raise _refused(g, exc) from None


_CALL_REFUSED = re.compile(
    r"\bstart\(\) (got an unexpected|got multiple values|missing \d+ required|takes \d+)"
)
"""The words of Python's TypeError for a call to a `start` with arguments it does not take."""


def _refused(g: Any, exc: TypeError) -> UsageError:
    return UsageError(f"%lab start: graph {g.name!r} cannot take these arguments ({exc}); {how_to_start(g)}")


def how_to_start(g: Any) -> str:
    """One sentence: how `%lab start` starts graph `g` with its own `start`'s arguments."""
    try:
        shown = _shown(inspect.signature(g.start))
    except (TypeError, ValueError):
        shown = "(...)"
    return (
        f"start it through its handle, with what {type(g).__name__}.start{shown} takes: "
        f"`%lab start HANDLE, ...` where HANDLE is the notebook's name for lab.graphs[{g.name!r}]"
    )


def _shown(signature: inspect.Signature) -> str:
    """The signature without annotations or `self`: what a person types."""
    bare = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))
