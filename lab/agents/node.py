"""`DelegatedAgentNode`: one typed, opaque station that hands its work to an agent and routes on the result.

The graph owns the purpose and the routing of the result, not the agent's own loop, tools or
events (seed 001 "Delegated Agent Macro-Nodes"). The station declares a request: the exact
runtime adapter by name, a bounded prompt built from state, immutable inputs (JSON) and a
result type; its `run` parks the run durably on a `delegate` wait and the lab submits an
`AgentJob`. When the job's first terminal is adopted the station runs again from the top: on
SUCCEEDED its `route(ctx, result)` gets the typed result; on any other terminal it fails,
naming that terminal (a FAILED one names the agent's error, so a `Retry` policy can try again).
A succeeded outcome enters the station's answer log (`outcomes.py`), so an `interrupt()` in
`route` parks and, answered, routes on the same result without a new job.

This module needs no pydantic-ai: only the runtime that runs the job does.
"""

from __future__ import annotations

import inspect
import json
import types
import weakref
from typing import Any, ClassVar, Literal, get_type_hints

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python
from pydantic_graph import BaseNode, GraphRunContext
from typing_extensions import TypeVar

from ..gates import WaitSignal, current_station
from ..recording import surface_job_calls
from .approvals import MAX_APPROVAL_ROUNDS, ToolApprovalRequired, pending_approvals, resume_of, take_verdict
from .errors import AgentResultError, AgentRuntimeError, ApprovalRoundsExceeded, DelegatedJobFailed
from .outcomes import retry_names, take_outcome

__all__ = ("DelegatedAgentNode", "DelegationRequired", "Containment", "result_adapter", "result_type_of")

StateT = TypeVar("StateT", default=None)
DepsT = TypeVar("DepsT", default=None)

Containment = Literal["read", "candidate", "verify"]
"""What the delegated work may do (seed 001): read only, produce a candidate, or verify one. Recorded
with the request; the lab enforces no workspace effects itself."""

MAX_PROMPT_CHARS = 20_000


class DelegationRequired(WaitSignal):
    """Raised by a delegated station without an adopted job outcome: park and submit the request."""

    kind = "delegate"

    def __init__(self, node: DelegatedAgentNode[Any, Any], request: dict[str, Any], *, prior: list[Any] | None = None):
        super().__init__(f"agent {node.runtime!r} at work", request, prior=prior)
        self.node = node
        self.request = request
        self.job: Any = None
        """The job's record as `before_park` stored it (QUEUED), admitted by `after_park` without a read."""
        self.ride: list[dict[str, Any]] = []
        """The job's journal rows, when the store puts them in the park's write (`JobTables.insert_job`)."""

    def check(self, run: Any, node_id: str) -> None:
        run.lab.agents.runtime(self.node.runtime)  # exact name, else AgentRuntimeError: the station fails

    def before_park(self, run: Any, wait: Any) -> Any:
        agents = run.lab.agents
        self.ride = []
        job = self.job = agents.queue_for_wait(run, wait, self.node.runtime, self.request, self.ride)
        # with its binding, and, when the job starts as a task right after the park, who starts it: the
        # park is then what makes that start durable (its ADMITTED is recorded with its first observations)
        return {**job.request, "request_id": job.request_id, "runtime": self.node.runtime, **agents.admission_mark(self.node.runtime)}

    def after_park(self, run: Any, wait: Any) -> None:
        run.lab.agents.admit(wait.details["request_id"], self.job, deferred="admitted_by" in wait.details, announce=bool(self.ride))


class DelegatedAgentNode(BaseNode[StateT, DepsT, Any]):
    """A station whose work an agent does. Subclass it as a dataclass:

        @g.node
        @dataclass
        class Outline(DelegatedAgentNode[Essay]):
            runtime = "planner"                      # lab.agents.register("planner", agent)
            def prompt(self, ctx) -> str:
                return f"Outline an essay about {ctx.state.topic}"
            async def route(self, ctx, result: Plan) -> Review:
                ctx.state.plan = result.points
                return Review()

    `route`'s `result` annotation is the result type (or set `result_type`); its return hint gives
    the station's edges, as `run`'s does for other nodes.
    """

    runtime: ClassVar[str] = ""
    """The exact name of a runtime adapter registered with `lab.agents.register(name, agent)`."""
    result_type: ClassVar[Any] = None
    """The result's type; None reads it from `route`'s `result` annotation."""
    containment: ClassVar[Containment] = "read"
    timeout: ClassVar[float | None] = None
    """Seconds the job may run before it is stopped and recorded TIMED_OUT; None: no limit."""
    max_prompt_chars: ClassVar[int] = MAX_PROMPT_CHARS
    """A prompt longer than this fails the station (the request is bounded)."""
    max_approval_rounds: ClassVar[int] = MAX_APPROVAL_ROUNDS
    """Chained model rounds whose tool calls wait for a person's approval (one consent wait each) before the
    station fails with `ApprovalRoundsExceeded` (docs/agents.md "Tool approvals")."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        route = cls.__dict__.get("route")
        if route is not None and "run" not in cls.__dict__:
            cls.run = _run_for(route)  # type: ignore[method-assign]

    def prompt(self, ctx: GraphRunContext[StateT, DepsT]) -> str:
        raise NotImplementedError(
            f"delegated station {type(self).__name__} has no prompt(self, ctx) method; define one that returns "
            "the prompt (a str) built from the state"
        )

    def inputs(self, ctx: GraphRunContext[StateT, DepsT]) -> Any:
        """Immutable inputs for the agent (JSON), frozen into the request; None for none."""
        return None

    async def route(self, ctx: GraphRunContext[StateT, DepsT], result: Any) -> Any:
        raise NotImplementedError(
            f"delegated station {type(self).__name__} has no route(self, ctx, result) method; define one that "
            "returns the next node for the agent's result"
        )

    async def run(self, ctx: GraphRunContext[StateT, DepsT]) -> Any:
        return await _delegated_run(self, ctx)

    def build_request(self, ctx: GraphRunContext[StateT, DepsT]) -> dict[str, Any]:
        """The request this station submits: bounded prompt, frozen inputs, result type, containment, timeout."""
        name = type(self).__name__
        if not isinstance(self.runtime, str) or not self.runtime:
            raise AgentRuntimeError(
                f"delegated station {name} names no runtime; set `runtime = \"name\"` on the class and register it "
                "with lab.agents.register(name, agent)"
            )
        prompt = self.prompt(ctx)
        if not isinstance(prompt, str) or not prompt.strip():
            raise TypeError(f"{name}.prompt() must return a non-empty str, got {prompt!r}")
        if len(prompt) > self.max_prompt_chars:
            raise ValueError(
                f"{name}.prompt() returned {len(prompt)} characters; a delegated request is bounded to "
                f"{self.max_prompt_chars} (set max_prompt_chars on the class, or pass less state into the prompt)"
            )
        try:
            inputs = json.loads(json.dumps(to_jsonable_python(self.inputs(ctx))))  # a detached, frozen copy
        except (PydanticSerializationError, TypeError, ValueError) as exc:
            raise TypeError(f"{name}.inputs() must return JSON (dicts, lists, str, numbers): {exc}") from None
        rtype = result_adapter(type(self))[0]
        return {
            "prompt": prompt,
            "inputs": inputs,
            "result_type": _type_name(rtype),
            "containment": self.containment,
            "timeout": self.timeout,
        }


async def _delegated_run(node: DelegatedAgentNode[Any, Any], ctx: GraphRunContext[Any, Any]) -> Any:
    station = current_station(f"{type(node).__name__}.run()")
    name = type(node).__name__
    request = node.build_request(ctx)  # every time: an interrupt() in prompt() gets its answer in order
    round_no = 0
    while True:  # one pass per model round: a round that asks for tool approvals is answered, then continued
        outcome = take_outcome(station, name)
        if outcome is None:
            raise DelegationRequired(node, request, prior=list(station.answers))  # the wait keeps the answers so far
        surface_job_calls(station.run, name)  # its job's calls become `recorded` events
        pending = pending_approvals(outcome.get("output")) if outcome.get("status") == "SUCCEEDED" else None
        if pending is None:
            break
        round_no += 1
        if round_no > node.max_approval_rounds:
            raise ApprovalRoundsExceeded(
                f"station {name}'s agent asked for tool approval in round {round_no} (job {outcome.get('request_id')}), "
                f"but {name} allows {node.max_approval_rounds} chained approval rounds (max_approval_rounds); raise "
                "it on the class if the work needs more, or give the agent fewer tools that need approval. "
                "run.retry() starts the agent again from its prompt"
            )
        verdict = take_verdict(station, name)
        if verdict is None:
            raise ToolApprovalRequired(
                name, pending["calls"], round_no=round_no, max_rounds=node.max_approval_rounds,
                request_id=outcome.get("request_id"), prior=list(station.answers),
            )  # fmt: skip
        request = {**request, "resume": resume_of(pending, verdict)}  # the next round: a new job, the same station
    status = outcome.get("status")
    rid = outcome.get("request_id")
    if status != "SUCCEEDED":
        error = outcome.get("error") or {}
        why = f": {error.get('message')}" if error.get("message") else ""
        raise DelegatedJobFailed(
            f"station {type(node).__name__}'s agent job {rid} ended {status}{why}; run.retry() submits the "
            "request again as a new job (a Retry policy on the station does so by itself)",
            request_id=str(rid),
            status=str(status),
            retry_as=retry_names(outcome),
        )
    rtype, adapter = result_adapter(type(node))
    try:
        result = adapter.validate_python(outcome.get("output")) if adapter is not None else outcome.get("output")
    except ValidationError as exc:
        raise AgentResultError(
            f"agent job {rid}'s result does not fit {type(node).__name__}'s result type {_type_name(rtype)}: "
            f"{exc.errors()[0].get('msg')} at {exc.errors()[0].get('loc')}; fix the agent's output type, or "
            "the station's route() annotation"
        ) from None
    return await node.route(ctx, result)


_stations: weakref.WeakKeyDictionary[type, tuple[Any, Any, Any, TypeAdapter[Any] | None]] = weakref.WeakKeyDictionary()
"""A station class -> (its `result_type`, its `route`, the result type, its `TypeAdapter`): read once per class
(a re-declared class is a new key; either attribute replaced on the class is read again)."""


def result_adapter(cls: type) -> tuple[Any, TypeAdapter[Any] | None]:
    """The station's result type and a `TypeAdapter` of it (None for Any), made once per class: reading the
    annotation and making the adapter cost a station about a millisecond."""
    declared, route = getattr(cls, "result_type", None), getattr(cls, "route", None)
    known = _stations.get(cls)
    if known is not None and known[0] is declared and known[1] is route:
        return known[2], known[3]
    rtype = result_type_of(cls)
    adapter = None if rtype is Any else TypeAdapter(rtype)
    _stations[cls] = (declared, route, rtype, adapter)
    return rtype, adapter


def result_type_of(cls: type) -> Any:
    """The station's result type: `result_type`, else `route`'s `result` annotation, else Any."""
    declared = getattr(cls, "result_type", None)
    if declared is not None:
        return declared
    route = getattr(cls, "route", None)
    if route is None or route is DelegatedAgentNode.route:
        return Any
    return _annotated_result(cls, route)


def _annotated_result(cls: type, route: Any) -> Any:
    try:
        params = list(inspect.signature(route).parameters)
        raw = route.__annotations__.get(params[2], Any) if len(params) >= 3 else Any
        holder = lambda: None  # noqa: E731 - only the result's annotation (the return hint may name later nodes)
        holder.__annotations__ = {"result": raw}
        return get_type_hints(holder, globalns=route.__globals__).get("result", Any)
    except NameError as exc:
        raise AgentResultError(
            f"{cls.__name__}.route's result annotation names {exc.name!r}, which its module does not define; "
            f"import it there, or set result_type = ... on {cls.__name__}"
        ) from None
    except (TypeError, ValueError, AttributeError):
        return Any


def _type_name(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


async def _run_template(self, ctx, *, _impl=_delegated_run):  # type: ignore[no-untyped-def]
    return await _impl(self, ctx)


def _run_for(route: Any) -> Any:
    """A subclass's `run`, annotated with `route`'s return hint in `route`'s module (its edges)."""
    t = _run_template
    fn = types.FunctionType(t.__code__, route.__globals__, "run", t.__defaults__, t.__closure__)
    fn.__kwdefaults__ = dict(t.__kwdefaults__ or {})
    fn.__qualname__ = route.__qualname__.rsplit(".", 1)[0] + ".run"
    fn.__module__ = route.__module__
    fn.__annotations__ = {"return": getattr(route, "__annotations__", {}).get("return", Any)}
    return fn


def check_result(run: Any, rec: Any, output: Any) -> None:
    """A result given by hand (`job.provide`) must fit the station's result type before it answers the wait.

    `run` is the live handle of the job's run in this process, or None (nothing to check against).
    """
    cls = run.built.nodes.get(rec.node_id) if run is not None else None
    if cls is None:
        return
    rtype, adapter = result_adapter(cls)
    if adapter is None:
        return
    try:
        adapter.validate_python(output)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise AgentResultError(
            f"the result for {rec.node_id} does not fit its result type {getattr(rtype, '__qualname__', rtype)}: "
            f"{first.get('msg')} at {list(first.get('loc', ()))}; nothing was recorded, give a result of that shape"
        ) from None
