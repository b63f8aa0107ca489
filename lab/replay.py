"""`lab.recorded`: mark what a station's calls go through, so they are recorded and replayed (docs/replay.md).

The kinds' side of lab/recording.py: a function becomes a recorded function there; a pydantic-ai
`Agent` or `Model` gets a `RecordedModel` (lab/agents/recorded_model.py), imported only then, so
pydantic-ai stays an optional extra.
"""

from __future__ import annotations

from typing import Any

from .recording import ReplayMode, check_mode, recorded_function

__all__ = ("recorded",)


def recorded(
    target: Any = None,
    /,
    *,
    name: str | None = None,
    replay: ReplayMode | None = None,
    result_type: Any = None,
) -> Any:
    """Record a station's calls of `target` and replay them when the station runs again (docs/replay.md).

    - `@lab.recorded` (or `@lab.recorded(name=..., replay=..., result_type=...)`) on a function, sync
      or async: a tool, an HTTP client call. Its arguments are the request, its return value (JSON, or
      what `result_type` / its return annotation dumps) the response.
    - `lab.recorded(agent)`: the pydantic-ai `Agent`'s model is wrapped so every model request it makes
      inside a station is recorded (returns the agent). `lab.recorded(model)` wraps a `Model`.

    `replay=` ("auto", "strict", "off") overrides the run's `run.replay` for these calls.
    """
    check_mode(replay, "lab.recorded")
    if target is None:
        return lambda fn: recorded(fn, name=name, replay=replay, result_type=result_type)
    if any(c.__module__.startswith("pydantic_ai") for c in type(target).__mro__):
        from .agents.recorded_model import (
            record_agent,  # pydantic-ai is imported only for an agent or a model
        )

        return record_agent(target, replay=replay)
    return recorded_function(target, name=name, replay=replay, result_type=result_type)
