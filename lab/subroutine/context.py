"""What a visit gets besides its input and state: `context.params`, the node's name, deps, `invoke`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compile import SubroutineGraph

__all__ = ("VisitContext",)


@dataclass
class VisitContext:
    """The context of one visit.

    `params` are the invocation's params (a copy: a visit cannot change them for later visits);
    `features` is the feature state before the visit (read-only; Feature visits use
    `FeatureState`); `await context.invoke(child, input)` calls a child and returns its output.
    """

    params: Any
    node: str
    deps: Any
    graph: SubroutineGraph
    feature_values: Mapping[str, Any]
    _calls: int = field(default=0, repr=False)

    @property
    def features(self) -> Mapping[str, Any]:
        return MappingProxyType(dict(self.feature_values))

    async def invoke(self, child: Any, input: Any = None, *, params: Any = None) -> Any:
        """Invoke a child and return its output (never its state).

        `child` is a subroutine (`lab.subroutine(...)`, or `Subroutine(child)`): it runs in this
        process as its own run in the same store. `Workflow(child)` runs it in a separate process
        with its own store. Either way the child initialises its own node-local and feature state.
        If this visit is evaluated again (a retry, a resume after the process died), the same call
        continues the same durable child invocation instead of starting another.
        """
        from .calls import invoke

        self._calls += 1
        return await invoke(self, child, input, params=params, index=self._calls)
