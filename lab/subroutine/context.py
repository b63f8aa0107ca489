"""What a visit gets besides its input and state: `context.params`, the node's name, deps, `invoke`, `consent`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..events import running_run
from ..gates import ConsentRequired, Verdict, current_station, station_context
from .errors import SubroutineError
from .sessions import current

if TYPE_CHECKING:
    from .compile import SubroutineGraph

__all__ = ("VisitContext",)


@dataclass
class VisitContext:
    """The context of one visit.

    `params` are the invocation's params (a copy: a visit cannot change them for later visits);
    `features` is the feature state before the visit (read-only; Feature visits use
    `FeatureState`); `await context.invoke(child, input)` calls a child and returns its output;
    `context.consent(prompt)` parks the run at a consent gate and returns the person's verdict.
    """

    params: Any
    node: str
    deps: Any
    graph: SubroutineGraph
    feature_values: Mapping[str, Any]
    gate: bool = False
    """Whether the node is a consent gate (`@sub.node(gate=True)`), so its visit may ask `consent`."""
    _calls: int = field(default=0, repr=False)
    _asked: bool = field(default=False, repr=False)

    @property
    def session(self) -> Any:
        """The invocation's provider conversation resource (`sub.session(factory)`): made at its entry,
        the same object in every visit of the invocation, closed at its exit, never checkpointed."""
        station = station_context.get()
        run = station.run if station is not None and station.run is not None else running_run.get()
        return current(run, self.graph.definition)

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

    def consent(self, prompt: str = "Approve?", details: Any = None) -> Verdict:
        """A consent gate inside this visit: park the run until a person approves or denies; the `Verdict`.

        The first time the visit runs, the run parks waiting for consent (`run.wait.kind ==
        "consent"`, `prompt` and the JSON `details` shown in the widget's consent panel). After
        `run.approve(note)` or `run.deny(note)` the visit runs again from the top and this call
        returns the verdict (`verdict.approved`, `verdict.note`): code before it runs twice, and the
        visit routes on the verdict through its returned output and state. One consent per visit:
        a second question needs a node of its own.
        """
        station = current_station("context.consent()")
        if not self.gate:
            raise SubroutineError(
                f"visit {self.node} asks for consent, but node {self.node} is not a gate; declare it with "
                f"@sub.node(..., gate=True) (or @sub.feature_node(gate=True)) so the run can park there"
            )
        if self._asked:
            raise SubroutineError(
                f"visit {self.node} asked for consent twice; one visit asks once (its verdict answers it): "
                "put the second question in a node of its own"
            )
        self._asked = True
        if station.verdict is None:
            raise ConsentRequired(prompt, details, prior=list(station.answers))
        return station.verdict
