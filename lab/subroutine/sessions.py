"""Provider conversation state: a resource that lives one invocation (seed 000 "State").

Seed 000: "Provider conversation state has a separate lifetime, determined by the selected session
resource." A subroutine declares the resource with `sub.session(factory)`; `factory(params)` makes
it (a client, a provider conversation, a socket: anything, nothing of it is JSON). Its lifetime is
one invocation in one process:

- created at entry: before the first visit this process runs of the invocation (the invocation's
  first visit, or the first one after the run was taken over by a new process);
- shared by every visit of that invocation (`context.session`), across revisits and parks in this
  process; a child invocation (a Subroutine or Workflow call) has its own;
- closed at exit: right after the visit that routes to the Output port returns, before the run
  settles at End (`close()`, `aclose()`, or the exit of a context manager the factory returned);
  a run handle dropped before its exit closes it too (`close()` only);
- never checkpointed: it is not in the run's state, so no checkpoint, fork or history holds it; a
  resume in another process creates a new one ("messages needed after a park are serialized first").
"""

from __future__ import annotations

import inspect
import logging
import weakref
from typing import TYPE_CHECKING, Any

from .errors import SubroutineError

if TYPE_CHECKING:
    from ..run import Run
    from .definition import Definition

__all__ = ("enter", "current", "leave", "is_open")

log = logging.getLogger(__name__)


class _Held:
    """One invocation's resource and how to close it."""

    __slots__ = ("value", "exit", "closed")

    def __init__(self, value: Any, exit: Any):
        self.value = value
        self.exit = exit
        self.closed = False


_open: weakref.WeakKeyDictionary[Run, _Held] = weakref.WeakKeyDictionary()


async def enter(run: Run, definition: Definition, params: Any) -> None:
    """Make the invocation's resource if its definition declares one and this process has none yet."""
    factory = definition.session_factory
    if factory is None or run in _open:
        return
    made = factory(params)
    if inspect.isawaitable(made):
        made = await made
    exit: Any = None
    if hasattr(made, "__aenter__") and hasattr(made, "__aexit__"):
        value = await made.__aenter__()
        exit = made.__aexit__
    elif hasattr(made, "__enter__") and hasattr(made, "__exit__"):
        value = made.__enter__()
        exit = made.__exit__
    else:
        value = made
    held = _Held(value, exit)
    _open[run] = held
    weakref.finalize(run, _close_dropped, held)


def current(run: Run | None, definition: Definition) -> Any:
    """The invocation's resource (`context.session`)."""
    if definition.session_factory is None:
        raise SubroutineError(
            f"subroutine {definition.name!r} declares no session resource; declare one with "
            f"sub.session(factory), where factory(params) makes it"
        )
    held = _open.get(run) if run is not None else None
    if held is None:
        raise SubroutineError("context.session is read inside a visit of a running invocation")
    return held.value


def is_open(run: Run) -> bool:
    return run in _open


async def leave(run: Run) -> None:
    """Close the invocation's resource at its exit (a failure to close is logged, never raised:
    the invocation's output is already committed)."""
    held = _open.pop(run, None)
    if held is None or held.closed:
        return
    held.closed = True
    try:
        if held.exit is not None:
            done = held.exit(None, None, None)
            if inspect.isawaitable(done):
                await done
        elif callable(getattr(held.value, "aclose", None)):
            await held.value.aclose()
        elif callable(getattr(held.value, "close", None)):
            done = held.value.close()
            if inspect.isawaitable(done):
                await done
    except Exception:
        log.exception("the session resource of run %s failed to close", run.id)


def _close_dropped(held: _Held) -> None:
    """A run handle went away before its invocation exited: close what can be closed synchronously."""
    if held.closed:
        return
    held.closed = True
    try:
        if held.exit is not None and not inspect.iscoroutinefunction(held.exit):
            held.exit(None, None, None)
        elif callable(getattr(held.value, "close", None)) and not inspect.iscoroutinefunction(held.value.close):
            held.value.close()
    except Exception:
        log.exception("a dropped invocation's session resource failed to close")
