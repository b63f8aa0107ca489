"""`RecordedModel`: a pydantic-ai `WrapperModel` that records a station's model requests and replays them.

pydantic-ai sends every model request of an agent run through `Model.request` (the agent graph's
model request node), so a wrapper model is the one point that sees each request whole (messages,
settings, tool and output definitions) and can answer it without calling the wrapped model. The
same wrapper serves an agent called from a node's code (`lab.recorded(agent)`) and a delegated
station's agent (the job's task wraps it with `agent.override(model=...)` around the run, in
`recording_job`). The protocol is lab/recording.py's; docs/replay.md.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel

from ..errors import ArgumentError
from ..recording import (
    ReplayMode,
    StationCalls,
    check_mode,
    encode,
    has_marker,
    job_calls,
    job_started_here,
    station_calls,
)
from ..store.journal import Encoded
from .recorded_json import KNOWN_MESSAGES, SERIALIZERS, STEADY, VOLATILE

__all__ = ("RecordedModel", "record_agent", "recording_job", "recording_agent", "SERIALIZERS", "STEADY", "VOLATILE")


class RecordedModel(WrapperModel):
    """Wraps a model: inside a station its requests are recorded and, on a re-run, replayed.

    Outside a station (or a delegated job) it is the wrapped model. `replay` overrides the run's
    `run.replay` for this model's requests. A streamed request (`agent.run_stream`, `request_stream`)
    is recorded once its stream is read to the end, and replayed as a stream of the recorded parts.
    """

    def __init__(self, wrapped: Model | str, *, replay: ReplayMode | None = None):
        super().__init__(wrapped)
        self.replay = check_mode(replay, "RecordedModel")

    def request_json(
        self, messages: list[Any], model_settings: Any, model_request_parameters: ModelRequestParameters
    ) -> bytes:
        """What a request asks, as one JSON text written in one pass: `{"model", "system", "messages" (their
        `VOLATILE` keys left out), "settings", "parameters" (tools, output schema; no private fields)}`.
        Secrets are left out by the recorder, over this text."""
        head, parameters = self.request_parts(messages, model_settings, model_request_parameters)
        return head + parameters + b"}"

    def request_parts(
        self, messages: list[Any], model_settings: Any, model_request_parameters: ModelRequestParameters
    ) -> tuple[bytes, bytes]:
        """`request_json` in two pieces, the text up to `"parameters":` and the parameters' (the piece that
        is the same request after request, secret-checked once: `Serializers.clean`); `}` closes them."""
        wrapped = self.wrapped
        if all(type(m) in KNOWN_MESSAGES for m in messages):
            body = SERIALIZERS.messages(messages)
        else:  # a message class this wrapper does not know: the adapter's own serializer
            body = ModelMessagesTypeAdapter.dump_json(list(messages), exclude={"__all__": STEADY})
        text = SERIALIZERS.text
        head = b"".join((
            b'{"model":', text(wrapped.model_name), b',"system":', text(wrapped.system), b',"messages":', body,
            b',"settings":', b"null" if model_settings is None else encode(model_settings), b',"parameters":',
        ))  # fmt: skip
        return head, SERIALIZERS.parameters(model_request_parameters)

    @staticmethod
    def response_of(recorded: Any) -> ModelResponse:
        """The `ModelResponse` a recording holds: its JSON text (`Encoded`), or its JSON data (read from the store)."""
        if type(recorded) is Encoded:
            return ModelMessagesTypeAdapter.validate_json(b"[" + recorded.data + b"]")[0]  # type: ignore[return-value]
        return ModelMessagesTypeAdapter.validate_python([recorded])[0]  # type: ignore[return-value]

    def begin(
        self, rec: StationCalls, messages: list[Any], model_settings: Any, model_request_parameters: ModelRequestParameters
    ) -> Any:
        """The recorder's plan for this request (replay a recording, or call and record): streamed or not alike."""
        head, parameters = self.request_parts(messages, model_settings, model_request_parameters)
        clean = SERIALIZERS.clean(parameters) and not has_marker(head)
        return rec.begin("model", self.wrapped.model_name, head + parameters + b"}", self.replay, clean=clean)

    async def request(
        self, messages: list[Any], model_settings: Any, model_request_parameters: ModelRequestParameters
    ) -> ModelResponse:
        rec = station_calls()
        if rec is None:
            return await self.wrapped.request(messages, model_settings, model_request_parameters)
        plan = self.begin(rec, messages, model_settings, model_request_parameters)
        if plan.replayed is not None:
            return self.response_of(rec.finish_replayed(plan))
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        usage = response.usage
        rec.finish_live(
            plan, SERIALIZERS.response(response), input_tokens=usage.input_tokens, output_tokens=usage.output_tokens
        )
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[Any],
        model_settings: Any,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncIterator[StreamedResponse]:
        """A streamed request: replayed as a stream of the recorded response's parts (each part whole), or
        streamed live and recorded when the reader has read it to the end (a stream left half read records
        nothing). A stream and a plain request asking the same are the same call: either replays the other."""
        rec = station_calls()
        if rec is None:
            async with self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as s:
                yield s
            return
        plan = self.begin(rec, messages, model_settings, model_request_parameters)
        if plan.replayed is not None:
            response = self.response_of(rec.finish_replayed(plan))
            yield CompletedStreamedResponse(
                response,  # type: ignore[arg-type]
                model_request_parameters=model_request_parameters,
                replay_events=True,
            )
            return
        async with self.wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as stream:
            yield stream
        response = stream.get()
        if response.state == "complete":
            rec.finish_live(
                plan,
                SERIALIZERS.response(response),
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            )


# pydantic-ai's `Model.__init_subclass__` wraps a subclass's own `request` in boundary wrappers (special tokens
# restored, a download budget opened, the request timed) that act only for a model that answers requests itself;
# a RecordedModel passes each request on or hands back what its wrapped model answered before
# (`_answers_requests_itself` is False for every `WrapperModel`), so for it they only cost (~20 Python calls a
# request). Its own function is put back; tests/agents/test_replay_parameters.py checks that the wrappers left
# out are these three.
RecordedModel.request = inspect.unwrap(RecordedModel.request)  # type: ignore[method-assign]


def record_agent(target: Any, *, replay: ReplayMode | None = None) -> Any:
    """`lab.recorded(agent)`: wrap the agent's model in a `RecordedModel` (once) and return the agent;
    `lab.recorded(model)`: a `RecordedModel` around it."""
    if isinstance(target, Model):
        return (
            target
            if isinstance(target, RecordedModel) and replay is None
            else RecordedModel(target, replay=replay)
        )
    model = getattr(target, "model", None)
    if not hasattr(target, "override") or model is None:
        raise ArgumentError(
            f"lab.recorded({target!r}): give it a pydantic-ai Agent that has a model (Agent(model, ...)), a Model, "
            "or a function"
        )
    if isinstance(model, RecordedModel):
        if replay is not None:
            model.replay = replay
        return target
    target.model = RecordedModel(model, replay=replay)
    return target


@contextmanager
def recording_job(agent: Any, store: Any, job: Any) -> Iterator[None]:
    """Record (and replay) the model requests of delegated job `job` (a `JobRecord`) while inside: its
    agent's model is wrapped for the run (`agent.override`), and the recorder names the job's run,
    station and checkpoint. When this process holds the run (`store.live_runs`), its `run.replay`
    applies. The calls are rows of `calls`, not events of the parked run (its job's messages are in
    `job_events`). A job with no run (submitted by hand), or a store without calls, runs as is."""
    if (
        job.run_id is None
        or job.node_id is None
        or not hasattr(store, "record_call")
        or getattr(agent, "model", None) is None
    ):
        yield
        return
    run = store.live_runs.get(job.run_id)
    mode = getattr(run, "replay", "auto")
    job_started_here(job.run_id, job.node_id)  # its calls kept in memory for the station's take-in
    with recording_agent(agent, StationCalls(store, job.run_id, job.node_id, job.checkpoint_seq, mode=mode)):
        yield


@contextmanager
def recording_agent(agent: Any, recorder: StationCalls) -> Iterator[None]:
    """While inside, `agent`'s model requests go through a `RecordedModel` (its own, when `lab.recorded`
    wrapped it) to `recorder`: an in-process job's (`recording_job`) or a subprocess worker's
    (lab/agents/worker_calls.py)."""
    model = agent.model if isinstance(agent.model, RecordedModel) else RecordedModel(agent.model)
    token = job_calls.set(recorder)
    try:
        with agent.override(model=model):
            yield
    finally:
        job_calls.reset(token)
