"""How each input of `lab.map` starts its run, for a graph of any kind.

An input is, in this order of reading:

- with `entry=Node()`: the state of a run that starts at (a copy of) that node;
- a `(node, state)` pair: a run that starts at `node` with `state`;
- `StartWith(node=..., inputs=..., state=...)`: what `graph.start` takes, in the words
  `run_subgraph(graph, ...)` uses for a child, so any kind's start is expressible;
- anything else: the `inputs` of a run that starts at the graph's start node, as
  `graph.start(inputs=item)` (steps and edges, adopted graphs, subroutines, workflows).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from pydantic_graph import BaseNode

from ..errors import ArgumentError, GraphDefinitionError

__all__ = ("StartWith", "start_input")


@dataclass(frozen=True)
class StartWith:
    """One run of a batch, spelled as `graph.start` takes it: a `node` to begin at, or the start
    node's `inputs`, and the run's `state` (None: the graph's default)."""

    node: Any = None
    inputs: Any = None
    state: Any = None


def _as_start(item: Any, entry: BaseNode[Any, Any, Any] | None) -> StartWith:
    if entry is not None:
        return StartWith(node=copy.deepcopy(entry), state=item)
    if isinstance(item, StartWith):
        return item
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], BaseNode):
        return StartWith(node=item[0], state=item[1])
    return StartWith(inputs=item)


def start_input(graph: Any, item: Any, index: int, *, entry: BaseNode[Any, Any, Any] | None, tags: dict[str, Any]) -> Any:
    """Create (not drive) the run of input `index`; its `started` event carries `tags`."""
    call = _as_start(item, entry)
    kwargs: dict[str, Any] = {"tags": tags}
    if call.state is not None:
        kwargs["state"] = call.state
    try:
        if call.node is not None:
            return graph.start(call.node, **kwargs)
        return graph.start(inputs=call.inputs, **kwargs)
    except GraphDefinitionError as exc:
        if call.node is not None or entry is not None:
            raise
        raise ArgumentError(
            f"lab.map: input {index} is {item!r}, and graph {graph.name!r} does not start from inputs ({exc}); "
            "pass entry=Node() and states as inputs, (node, state) pairs, or StartWith(node=..., state=...)"
        ) from None
