"""`RecordedModel`: a pydantic-ai `WrapperModel` that records a station's model requests and replays them.

pydantic-ai sends every model request of an agent run through `Model.request` (the agent graph's
model request node), so a wrapper model is the one point that sees each request whole (messages,
settings, tool and output definitions) and can answer it without calling the wrapped model. The
same wrapper serves an agent called from a node's code (`lab.recorded(agent)`) and a delegated
station's agent (the job's task wraps it with `agent.override(model=...)` around the run, in
`recording_job`). The protocol is lab/recording.py's; docs/replay.md.
"""

from __future__ import annotations

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
    job_calls,
    job_started_here,
    jsonable,
    station_calls,
)

__all__ = ("RecordedModel", "record_agent", "recording_job")

VOLATILE = frozenset(
    {"timestamp", "request_timestamp", "duration", "run_id", "conversation_id", "provider_response_id"}
)
"""Keys of a dumped message that change from one run to the next without changing what is asked."""


def _steady(message: dict[str, Any]) -> dict[str, Any]:
    """A dumped message without what varies between two runs asking the same (`VOLATILE`), on it and its parts."""
    out = {k: v for k, v in message.items() if k not in VOLATILE}
    parts = out.get("parts")
    if isinstance(parts, list):
        out["parts"] = [
            {k: v for k, v in p.items() if k not in VOLATILE} if isinstance(p, dict) else p for p in parts
        ]
    return out


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
    ) -> dict[str, Any]:
        """What a request asks, as JSON: the model, the messages (times left out), the settings and the
        request parameters (tools, output schema). Secrets are scrubbed by the recorder."""
        parameters = jsonable(model_request_parameters)
        return {
            "model": self.wrapped.model_name,
            "system": self.wrapped.system,
            "messages": [
                _steady(m) for m in ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
            ],
            "settings": jsonable(model_settings),
            "parameters": {k: v for k, v in parameters.items() if not k.startswith("_")}
            if isinstance(parameters, dict)
            else parameters,
        }

    async def request(
        self, messages: list[Any], model_settings: Any, model_request_parameters: ModelRequestParameters
    ) -> ModelResponse:
        rec = station_calls()
        if rec is None:
            return await self.wrapped.request(messages, model_settings, model_request_parameters)
        plan = rec.begin(
            "model",
            self.wrapped.model_name,
            self.request_json(messages, model_settings, model_request_parameters),
            self.replay,
            clean=True,
        )
        if plan.replayed is not None:
            return ModelMessagesTypeAdapter.validate_python([rec.finish_replayed(plan)])[0]  # type: ignore[return-value]
        response = await self.wrapped.request(messages, model_settings, model_request_parameters)
        usage = response.usage
        rec.finish_live(
            plan,
            ModelMessagesTypeAdapter.dump_python([response], mode="json")[0],
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            clean=True,
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
        plan = rec.begin(
            "model",
            self.wrapped.model_name,
            self.request_json(messages, model_settings, model_request_parameters),
            self.replay,
            clean=True,
        )
        if plan.replayed is not None:
            response = ModelMessagesTypeAdapter.validate_python([rec.finish_replayed(plan)])[0]
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
                ModelMessagesTypeAdapter.dump_python([response], mode="json")[0],
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
                clean=True,
            )


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
    model = agent.model if isinstance(agent.model, RecordedModel) else RecordedModel(agent.model)
    run = store.live_runs.get(job.run_id)
    mode = getattr(run, "replay", "auto")
    job_started_here(job.run_id, job.node_id)  # its calls kept in memory for the station's take-in
    token = job_calls.set(StationCalls(store, job.run_id, job.node_id, job.checkpoint_seq, mode=mode))
    try:
        with agent.override(model=model):
            yield
    finally:
        job_calls.reset(token)
