"""Usage errors raised from the caller's frame (issue 25 item 9).

`run.step()`, `run.run()` and `run.retry()` drive the run on the lab's own event loop; an error
they raise comes back through that loop, and its traceback ran 30-73 lines through asyncio and
the engine before the message. A usage error (a finished run stepped again, a bad argument, a
run another process owns, a changed graph) is about the call, not the engine: it is raised again
here with the loop's frames dropped, so a notebook shows the call and the message. Station
failures (`NodeExecutionError`, with the station's traceback as `__cause__`) keep theirs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ArgumentError, RevisionMismatchError, RunStateError

__all__ = ("USAGE_ERRORS", "raised_from_caller")

USAGE_ERRORS: tuple[type[BaseException], ...] = (ArgumentError, RunStateError, RevisionMismatchError)
"""What a wrong call raises: the message says what to do; the engine's frames say nothing more."""

F = TypeVar("F", bound=Callable[..., Any])


def raised_from_caller(fn: F) -> F:
    """Re-raise `USAGE_ERRORS` from `fn` with the frames inside it dropped (the message first)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # IPython and pytest leave this frame out of what they show
        try:
            return fn(*args, **kwargs)
        except USAGE_ERRORS as exc:
            raise exc.with_traceback(None)  # noqa: B904 - the same error, only its inner frames go

    return call  # type: ignore[return-value]
