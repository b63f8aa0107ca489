"""A subroutine's declarations, cell by cell: nodes (visits), features, edges with conditions and effects.

A `Definition` belongs to no lab: it can live in a module, so a Workflow call can import it in a
child process. `lab.subroutine(...)` compiles one onto the lab's engine (`compile.py`). Each
declaration is kept by its name (an edge by its source and target), so re-running a cell
replaces it; listeners (the compiled graph) hear every change.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, get_type_hints

from ..limits import check_timeout
from ..retry import Retry
from .errors import SubroutineDefinitionError
from .features import Condition, Effect, Feature
from .routing import INPUT, OUTPUT, EdgeDecl
from .values import NoState, check_state_type

__all__ = ("Definition", "NodeDecl", "INPUT", "OUTPUT", "define", "caller_module")

Visit = Callable[..., Any]


@dataclass(frozen=True)
class NodeDecl:
    """One executable node: its visit function, whether it is a Feature node, its input and state types."""

    name: str
    fn: Visit
    feature: bool
    input_type: Any
    state_type: type | None
    """None for a Feature node (it has no node-local state)."""
    retry: Retry | None = None
    """The station's retry policy (`@sub.node(retry=Retry(...))`): tries inside one step, as `@g.node`'s."""
    timeout: float | None = None
    """Seconds each try of the visit may run before it fails with `NodeTimeout` (None: no limit)."""
    gate: bool = False
    """A consent gate (`@sub.node(gate=True)`): its visit may ask `context.consent(...)`."""


class Definition:
    """The declarations of one subroutine: `@sub.node`, `@sub.feature_node`, `sub.feature`, `sub.edge`."""

    input = INPUT
    """The enter port: `sub.edge(sub.input, "first_node")`."""
    output = OUTPUT
    """The exit port: `sub.edge("last_node", sub.output)`; the payload arriving there is the output."""

    def __init__(self, name: str, *, input: Any = Any, output: Any = Any, params: Any = None):
        if not isinstance(name, str) or not name:
            raise SubroutineDefinitionError(f"a subroutine needs a name (a non-empty str), got {name!r}")
        self.name = name
        self.input_type = input
        self.output_type = output
        self.params_type = params
        self.nodes: dict[str, NodeDecl] = {}
        self.features: dict[str, Feature] = {}
        self.edges: dict[tuple[str, str], EdgeDecl] = {}
        self.module: str = caller_module(1)
        self._listeners: list[Callable[[], None]] = []
        self.session_factory: Callable[[Any], Any] | None = None
        """Makes the invocation's provider conversation resource (`session`); None: no resource."""

    # -- declaring ----------------------------------------------------------------------------

    def session(self, factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Declare the invocation's provider conversation resource: `factory(params)` makes it at the
        invocation's entry, visits read it as `context.session`, it is closed at the exit and never
        checkpointed (lab/subroutine/sessions.py). Usable as a decorator."""
        if not callable(factory):
            raise SubroutineDefinitionError(f"sub.session(factory): factory(params) makes the resource; got {factory!r}")
        self.session_factory = factory
        return factory

    def feature(self, name: str, domain: Any) -> Feature:
        """Declare (or re-declare) a feature: None at the start of each invocation, values in `domain`."""
        feature = Feature.declare(name, domain)
        old = self.features.get(name)
        if old is not None and old.domain_text == feature.domain_text:
            return old  # a re-run cell: the edges other cells built on it stay valid
        self.features[name] = feature
        self._changed()
        return feature

    def node(
        self,
        fn: Visit | None = None,
        *,
        state: type | None = None,
        input: Any = None,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
        gate: bool = False,
    ) -> Any:
        """Declare a node: `async def visit(input, state, context) -> Success(output=..., state=...)`.

        `state` is the node-local state type (a frozen, slotted dataclass with defaults); the
        input type is `input=` or the first parameter's annotation. `retry=Retry(...)` and
        `timeout=` (seconds per try) are the station's policies, as `@g.node(retry=..., timeout=...)`.
        `gate=True` makes the node a consent gate: its visit asks `context.consent(prompt)`.
        """

        def declare(f: Visit) -> Visit:
            if state is not None:
                check_state_type(state, node=name or getattr(f, "__name__", "?"))
            self._declare(
                f,
                feature=False,
                state=state or NoState,
                input=input,
                name=name,
                retry=retry,
                timeout=timeout,
                gate=gate,
            )
            return f

        return declare(fn) if fn is not None else declare

    def feature_node(
        self,
        fn: Visit | None = None,
        *,
        input: Any = None,
        name: str | None = None,
        retry: Retry | None = None,
        timeout: float | None = None,
        gate: bool = False,
    ) -> Any:
        """Declare a Feature node: `async def visit(input, context) -> FeatureSuccess()`, proposing
        feature values with `FeatureState.replace(FEATURE, value)`; the payload passes through.
        `retry=`, `timeout=` and `gate=` as for `node` (a Feature gate proposes features from the verdict)."""

        def declare(f: Visit) -> Visit:
            self._declare(
                f, feature=True, state=None, input=input, name=name, retry=retry, timeout=timeout, gate=gate
            )
            return f

        return declare(fn) if fn is not None else declare

    def edge(
        self,
        src: str | Visit,
        dst: str | Visit,
        *,
        when: Condition | None = None,
        effect: Effect | Iterable[Effect] | None = None,
    ) -> EdgeDecl:
        """Declare (or replace) the edge `src` -> `dst` with its condition and the effects it admits."""
        s, d = _name(src), _name(dst)
        if s == OUTPUT or d == INPUT:
            raise SubroutineDefinitionError(
                f"edge {s} → {d}: edges leave Input and reach Output, not the other way"
            )
        if when is not None and not isinstance(when, Condition):
            raise SubroutineDefinitionError(
                f"edge {s} → {d}: when= takes a Condition built from a feature (MODE.equals('fast')), got {when!r}"
            )
        effects = (effect,) if isinstance(effect, Effect) else tuple(effect or ())
        seen: set[str] = set()
        for e in effects:
            if not isinstance(e, Effect):
                raise SubroutineDefinitionError(
                    f"edge {s} → {d}: effect= takes effects built from a feature (MODE.assign('fast')), got {e!r}"
                )
            if e.feature.name in seen:
                raise SubroutineDefinitionError(
                    f"edge {s} → {d} has two effects on feature {e.feature.name!r}; keep one"
                )
            seen.add(e.feature.name)
        if s == INPUT and (when is not None or effects):
            raise SubroutineDefinitionError(
                f"edge Input → {d}: the enter port's edge takes no condition or effect (every feature is still None)"
            )
        decl = EdgeDecl(s, d, when, effects)
        self.edges[(s, d)] = decl
        self._changed()
        return decl

    def remove(self, name: str) -> None:
        """Drop a node, a feature, or an edge given as "src -> dst" (a deleted cell)."""
        if name in self.nodes:
            del self.nodes[name]
        elif name in self.features:
            del self.features[name]
        elif "->" in name and tuple(p.strip() for p in name.split("->", 1)) in self.edges:
            del self.edges[tuple(p.strip() for p in name.split("->", 1))]  # type: ignore[arg-type]
        else:
            raise SubroutineDefinitionError(
                f"subroutine {self.name!r} has no node, feature or edge {name!r} (edges are named 'src -> dst')"
            )
        self._changed()

    # -- reading ------------------------------------------------------------------------------

    def outgoing(self, node: str) -> list[EdgeDecl]:
        return [e for (s, _), e in self.edges.items() if s == node]

    @property
    def entry(self) -> str | None:
        entries = self.outgoing(INPUT)
        return entries[0].dst if len(entries) == 1 else None

    def problems(self) -> list[str]:
        """What stops the declarations from building, each saying what to do."""
        out: list[str] = []
        entries = self.outgoing(INPUT)
        if len(entries) != 1:
            out.append(
                f"the enter port needs exactly one edge (sub.edge(sub.input, 'first_node')); it has {len(entries)}"
            )
        for (s, d), e in self.edges.items():
            for end in (s, d):
                if end not in (INPUT, OUTPUT) and end not in self.nodes:
                    out.append(f"edge {s} → {d} names {end}, which is not a declared node")
            for f in [*(e.when.features if e.when else ()), *(x.feature for x in e.effects)]:
                if self.features.get(f.name) is not f:
                    out.append(
                        f"edge {s} → {d} uses feature {f.name!r} as it was declared before (its domain changed "
                        "since, or it belongs to another subroutine); re-run the cell that declares this edge"
                    )
        for n in self.nodes:
            if not self.outgoing(n):
                out.append(
                    f"node {n} has no outgoing edge; add sub.edge({n!r}, ...) (to sub.output to finish)"
                )
        return list(dict.fromkeys(out))

    def on_change(self, callback: Callable[[], None]) -> None:
        self._listeners.append(callback)

    def _changed(self) -> None:
        for cb in list(self._listeners):
            cb()

    def _declare(
        self,
        fn: Visit,
        *,
        feature: bool,
        state: type | None,
        input: Any,
        name: str | None,
        retry: Retry | None = None,
        timeout: float | None = None,
        gate: bool = False,
    ) -> None:
        if not callable(fn):
            raise SubroutineDefinitionError(f"@sub.node decorates a visit function, got {fn!r}")
        node = name or getattr(fn, "__name__", "")
        if not node.isidentifier() or node in (INPUT, OUTPUT):
            raise SubroutineDefinitionError(
                f"a node's name must be an identifier other than Input and Output, got {node!r}; pass name=..."
            )
        if retry is not None and not isinstance(retry, Retry):
            raise SubroutineDefinitionError(
                f"node {node}: retry={retry!r}; pass lab.Retry(max_attempts=..., backoff=..., on=...)"
            )
        seconds = check_timeout(timeout, f"node {node}")
        if not isinstance(gate, bool):
            raise SubroutineDefinitionError(f"node {node}: gate={gate!r}; pass gate=True for a consent gate")
        arity = 2 if feature else 3
        params = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if len(params) != arity:
            shape = "(input, context)" if feature else "(input, state, context)"
            raise SubroutineDefinitionError(
                f"node {node}: a {'Feature ' if feature else ''}visit takes {shape}, got {len(params)} parameters"
            )
        if input is None:
            try:
                hints = get_type_hints(fn)
            except Exception:
                hints = {}
            input = hints.get(params[0].name, Any)
        self.nodes[node] = NodeDecl(node, fn, feature, input, state, retry, seconds, gate)
        self._changed()

    def __repr__(self) -> str:
        return f"<Definition {self.name!r} nodes={list(self.nodes)} features={list(self.features)} edges={len(self.edges)}>"


def _name(end: str | Visit) -> str:
    if isinstance(end, str):
        return end
    name = getattr(end, "__name__", None)
    if not name:
        raise SubroutineDefinitionError(f"an edge end is a node's name or its visit function, got {end!r}")
    return name


def define(name: str, *, input: Any = Any, output: Any = Any, params: Any = None) -> Definition:
    """A subroutine definition that belongs to no lab (a module can hold it, for Workflow calls)."""
    definition = Definition(name, input=input, output=output, params=params)
    definition.module = caller_module(1)
    return definition


def caller_module(depth: int) -> str:
    """The `__name__` of the module whose code called the function `depth` frames above this call's
    caller (`caller_module(1)` inside `f`: the module that called `f`); `"__main__"` when unknown."""
    frame = inspect.currentframe()
    try:
        for _ in range(depth + 1):
            frame = frame.f_back if frame is not None else None
        return frame.f_globals.get("__name__", "__main__") if frame is not None else "__main__"
    finally:
        del frame
