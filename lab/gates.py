"""What a node uses to park a run: gate stations, `interrupt()`, capability requests.

A station parks by raising a `WaitSignal`; the serial engine catches it, the run writes a
waiting checkpoint and a wait record, and nothing stays resident (seed 001 "Durable Stasis").
When the wait is answered the same station runs again from the top with the answer in its
`StationContext`: a gate's `decide` gets the verdict, `interrupt()` returns the answers in
order (LangGraph semantics), `granted()` returns what a capability grant handed over.

This module knows nothing of the store or of any view; the engine sets the context per station.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic_graph import BaseNode, GraphRunContext
from typing_extensions import TypeVar

from .errors import GraphDefinitionError, RunStateError

if TYPE_CHECKING:
    from .manifest import Station
    from .records import WaitKind

__all__ = (
    "Gate",
    "Verdict",
    "interrupt",
    "consent",
    "CapabilityRequired",
    "granted",
    "warn",
    "WaitSignal",
    "StationContext",
    "station_context",
    "child_slot",
    "slot_child",
    "current_station",
    "mirrors_subgraph",
    "asks_tool_approval",
    "refuse_misplaced_consent",
)

StateT = TypeVar("StateT", default=None)
DepsT = TypeVar("DepsT", default=None)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A person's answer at a gate: approved or denied, with an optional note."""

    approved: bool
    note: str | None = None
    owner: str = ""
    """The wait this verdict answered."""
    at: datetime | None = None

    @property
    def denied(self) -> bool:
        return not self.approved


class WaitSignal(Exception):
    """Raised inside a station to park the run. Not an error: the engine never records it as one."""

    kind: ClassVar[WaitKind]
    prior: list[Any]
    """What the station consumed of its answer log before it parked: the wait keeps it, so the
    station running again after the answer finds its earlier answers in the same order."""

    def __init__(self, prompt: str | None, details: Any = None, *, prior: list[Any] | None = None):
        super().__init__(prompt or self.kind)
        self.prompt = prompt
        self.details = details
        self.prior = list(prior or [])

    # Hooks for waits that start work outside the run (a delegated agent job): no-ops here.

    ride: Sequence[dict[str, Any]] = ()
    """Journal rows `before_park` made that travel in the park's own write (a delegated job's QUEUED row)."""

    def check(self, run: Any, node_id: str) -> None:
        """Before anything is written: raise a `LabError` to fail the station instead of parking."""

    def before_park(self, run: Any, wait: Any) -> Any:
        """Before the park is written, with its wait record: persist what must precede it; the wait's details."""
        return wait.details

    def after_park(self, run: Any, wait: Any) -> None:
        """The park is durable: start what the wait waits for."""


class ConsentRequired(WaitSignal):
    """A gate station reached without a verdict."""

    kind = "consent"


class InterruptRequested(WaitSignal):
    """`interrupt(value)` found no answer yet; `prior` are the answers already consumed."""

    kind = "interrupt"

    def __init__(self, value: Any, prior: list[Any]):
        super().__init__(None, value, prior=prior)


class CapabilityRequired(WaitSignal):
    """Raise inside a node when it needs a capability the process does not have ("gpu").

    The run checkpoints and waits until `run.grant(name)` or a provider registered with
    `lab.provide(name, fn)` grants it; then the node runs again and `granted(name)` returns the
    granted value. Budgets (seed 001): 8 capability resumes per run, 3 consecutive requests
    for one capability.
    """

    kind = "capability"

    def __init__(self, capability: str, details: Any = None):
        if not isinstance(capability, str) or not capability:
            raise TypeError(f"CapabilityRequired needs a capability name (a non-empty str), got {capability!r}")
        super().__init__(f"capability {capability!r} required", details)
        self.capability = capability


@dataclass(slots=True)
class StationContext:
    """What the engine hands the station it is about to run: the answers to its last wait."""

    node_id: str
    verdict: Verdict | None = None
    answers: list[Any] = field(default_factory=list)
    """The station's answer log, in the order its calls asked: an answer per `interrupt()`, a
    `child_slot` per `run_subgraph()` (naming the child run that call started)."""
    grants: dict[str, Any] = field(default_factory=dict)
    used: int = 0
    """How many of `answers` this attempt's `interrupt()` and `run_subgraph()` calls consumed so far."""
    notes: list[dict[str, Any]] = field(default_factory=list)
    """Warnings `warn()` recorded; the run writes them as `warning` events when the station settles."""
    run: Any = None
    """The run stepping this station (a subroutine's child calls record themselves on it)."""
    job: dict[str, Any] | None = None
    """A delegated station's adopted job outcome: `{"request_id", "status", "output", "error", "by"}`."""
    consented: bool = False
    """Whether this try of the station called `consent()` already (one question per gate visit)."""
    effects: int = 0
    """How many `IdempotentOp` calls this try of the station made (a call's key counts them)."""
    task: int | None = None
    """The parallel task this context runs (a super-step's frontier entry), None on the serial engine."""
    calls: Any = None
    """This try's call recorder (lab.recording), made by its first recorded call."""


station_context: contextvars.ContextVar[StationContext | None] = contextvars.ContextVar(
    "graph_lab_station", default=None
)
"""Set by the serial engine around each station; pydantic-graph's task copies it."""


_CHILD_SLOT = "graph_lab:subgraph_run"


def child_slot(run_id: str) -> dict[str, str]:
    """The entry a `run_subgraph()` call keeps in its station's answer log: the child run it started."""
    return {_CHILD_SLOT: run_id}


def slot_child(entry: Any) -> str | None:
    """The child run an answer-log entry names, or None for an answer to an `interrupt()`."""
    if isinstance(entry, dict) and len(entry) == 1 and isinstance(entry.get(_CHILD_SLOT), str):
        return entry[_CHILD_SLOT]
    return None


def _current(what: str) -> StationContext:
    ctx = station_context.get()
    if ctx is None:
        raise RunStateError(
            f"{what} was called outside a running station; call it inside a node's run() while a lab "
            "run steps it (run.step() / run.run())"
        )
    return ctx


def current_station(what: str) -> StationContext:
    """The station running now, for a kind's own station API (a delegated station's run); `what` names
    the call in the error raised when no station runs."""
    return _current(what)


def interrupt(value: Any = None) -> Any:
    """Park the run, showing `value`; when resumed with `run.resume_with(answer)`, return it.

    The node runs again from the top on resume, so code before `interrupt` runs twice and the
    state the node received is what was saved. Several calls in one node resume in order.
    """
    ctx = _current("interrupt()")
    if ctx.used < len(ctx.answers):
        answer = ctx.answers[ctx.used]
        if slot_child(answer) is not None:
            raise RunStateError(
                f"station {ctx.node_id} calls interrupt() where it called run_subgraph() before it parked "
                f"(call {ctx.used + 1} of its run); a node asks its questions and runs its subgraphs in the same "
                "order every time it runs: make that order depend on the state, not on anything that changes"
            )
        ctx.used += 1
        return answer
    raise InterruptRequested(value, list(ctx.answers))


def consent(prompt: str = "Approve?", details: Any = None) -> Verdict:
    """Inside a gate step (`@g.step(gate=True)`): park the run until a person approves or denies; the `Verdict`.

    The first time the step runs, the run parks waiting for consent (`run.wait.kind ==
    "consent"`; `prompt` and the JSON `details` show in the widget's consent panel). After
    `run.approve(note)` or `run.deny(note)` the step runs again from the top and this call returns
    the verdict (`verdict.approved`, `verdict.note`): code before it runs twice, and the step acts
    on the verdict through what it returns. The step function form of a `Gate` node class. One
    call per visit: a second raises (the kernel also refuses consent() from a station not declared a gate).
    """
    ctx = _current("consent()")
    if ctx.consented:
        raise RunStateError(
            f"gate {ctx.node_id} called consent() twice in one visit; a gate asks once and its verdict "
            "answers that one call: keep the verdict in a variable, or put the second question in a gate of its own"
        )
    ctx.consented = True
    if ctx.verdict is None:
        raise ConsentRequired(prompt, details, prior=list(ctx.answers))
    return ctx.verdict


def asks_tool_approval(details: Any) -> bool:
    """Whether a consent wait's `details` list tool calls a delegated station's agent asks to make
    (lab.agents.approvals): a delegated station holds such a wait, answered like a gate's."""
    return isinstance(details, dict) and isinstance(details.get("tool_approvals"), list)


def mirrors_subgraph(details: Any) -> bool:
    """Whether a wait's `details` mirror a parked subgraph's wait (lab.subgraph): any station may hold
    such a consent wait, not only a gate (the question is the child's)."""
    return isinstance(details, dict) and isinstance(details.get("subgraph"), dict)


_DECLARE_GATE = {
    "step": ("step", "declare it @g.step(gate=True)"),
    "node": (
        "node",
        "make its class a gate: subclass lab.Gate and act on the verdict in decide(self, ctx, verdict) "
        "(a subroutine's node: declare it @sub.node(..., gate=True) and ask with context.consent())",
    ),
}


def refuse_misplaced_consent(node_id: str, station: Station | None, signal: WaitSignal) -> None:
    """Raise `GraphDefinitionError` for a consent wait asked by a station whose manifest kind is not "gate".

    Only a gate's consent wait can be answered (`run.approve()` hands the verdict to a gate station):
    the kernel refuses the park of any other, for every kind, before anything is written. A wait that
    mirrors a parked subgraph's gate is the child's question: any station may hold it.
    """
    station_kind = station.kind if station is not None else None
    if signal.kind != "consent" or station_kind == "gate" or mirrors_subgraph(signal.details):
        return
    if station_kind == "delegated" and asks_tool_approval(signal.details):
        return  # a delegated station's agent asks approval for its tool calls (one wait per model round)
    noun, how = _DECLARE_GATE.get(
        station_kind or "",
        (
            "station",
            f"a {station_kind or 'missing'} station cannot be a gate: put a gate before it (a lab.Gate node "
            "class, a @g.step(gate=True) step, a subroutine's @sub.node(..., gate=True))",
        ),
    )
    raise GraphDefinitionError(
        f"{noun} {node_id} called consent() but is not declared a gate (its manifest kind is "
        f"{station_kind!r}), so no verdict could reach it; {how} (its consent wait is then answered with "
        "run.approve() / run.deny()), or ask with interrupt() instead. The run was not parked"
    )


def granted(capability: str) -> Any:
    """The value `run.grant(capability, value)` (or a provider) handed this station, else None."""
    return _current("granted()").grants.get(capability)


def warn(message: str, **details: Any) -> None:
    """Record a warning for the running station: a `warning` event, written when it settles.

    Warnings observe (a step manifest that misses a step, say); they never change the route.
    `details` must be JSON.
    """
    if not isinstance(message, str) or not message:
        raise TypeError(f"warn() needs a message (a non-empty str), got {message!r}")
    _current("warn()").notes.append({"message": message, **details})


class Gate(BaseNode[StateT, DepsT, Any]):
    """A station that parks the run until a person approves or denies (seed 001 consent).

    Subclass it as a dataclass, set `prompt` (a string, or a method of `ctx` returning one) and
    optionally `details` (JSON, or a method of `ctx` returning JSON), and route in `decide`:

        @g.node
        @dataclass
        class ConfirmSend(Gate[State]):
            prompt = "Send the draft to the customer?"
            async def decide(self, ctx, verdict: Verdict) -> Send | Revise:
                return Send() if verdict.approved else Revise(note=verdict.note)

    `decide`'s return hint gives the gate's edges, as `run`'s does for other nodes.
    """

    prompt: ClassVar[Any] = "Approve?"
    details: ClassVar[Any] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        decide = cls.__dict__.get("decide")
        if decide is not None and "run" not in cls.__dict__:
            cls.run = _run_for(decide)  # type: ignore[method-assign]

    async def run(self, ctx: GraphRunContext[StateT, DepsT]) -> Any:
        return await _gate_run(self, ctx)

    async def decide(self, ctx: GraphRunContext[StateT, DepsT], verdict: Verdict) -> Any:
        raise NotImplementedError(
            f"gate {type(self).__name__} has no decide(self, ctx, verdict) method; define one that returns "
            "the next node for an approval or a denial"
        )


async def _gate_run(gate: Gate[Any, Any], ctx: GraphRunContext[Any, Any]) -> Any:
    station = _current(f"{type(gate).__name__}.run()")
    if station.verdict is None:
        raise ConsentRequired(_gate_value(gate, "prompt", ctx), _gate_value(gate, "details", ctx))
    return await gate.decide(ctx, station.verdict)


def _gate_value(gate: Gate[Any, Any], name: str, ctx: GraphRunContext[Any, Any]) -> Any:
    """A gate's `prompt` or `details`: the class attribute, or what the method of that name returns for `ctx`."""
    value = getattr(gate, name)
    return value(ctx) if callable(value) else value


async def _run_template(self, ctx, *, _impl=_gate_run):  # type: ignore[no-untyped-def]
    return await _impl(self, ctx)


def _run_for(decide: Any) -> Any:
    """A gate subclass's `run`, annotated with `decide`'s return hint in `decide`'s module.

    pydantic-graph's `GraphBuilder.node` reads a node's edges from `run`'s return hint, so an
    adopted graph that contains a gate sees the edges its `decide` declares.
    """
    t = _run_template
    fn = types.FunctionType(t.__code__, decide.__globals__, "run", t.__defaults__, t.__closure__)
    fn.__kwdefaults__ = dict(t.__kwdefaults__ or {})
    fn.__qualname__ = decide.__qualname__.rsplit(".", 1)[0] + ".run"
    fn.__module__ = decide.__module__
    fn.__annotations__ = {"return": getattr(decide, "__annotations__", {}).get("return", Any)}
    return fn
