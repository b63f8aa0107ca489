"""What goes wrong with delegated agent stations, in words that say what to do."""

from __future__ import annotations

from ..errors import ArgumentError, LabError, RunStateError, WaitError

__all__ = ("AgentRuntimeError", "AgentRequestConflict", "DelegatedJobFailed", "AgentJobStateError", "AgentResultError", "ApprovalRoundsExceeded")


class AgentRuntimeError(LabError, LookupError):
    """A request names a runtime adapter that is not registered (selection is by exact name, no fallback)."""


class AgentRequestConflict(ArgumentError):
    """A request id (the idempotency key) was reused for a different request."""


class DelegatedJobFailed(LabError, RuntimeError):
    """A delegated station's job ended FAILED, CANCELLED, TIMED_OUT (or LOST then cancelled): the station fails, naming it."""

    def __init__(self, message: str, *, request_id: str, status: str, retry_as: tuple[str, ...] | None = None):
        super().__init__(message)
        self.request_id = request_id
        self.status = status
        self.retry_as = retry_as
        """The class names of the agent's error (a FAILED job; `TimeoutError`'s for TIMED_OUT): what a station's
        `Retry(on=...)` policy is matched against. None (CANCELLED, LOST): never retried."""


class AgentJobStateError(WaitError):
    """A job action (retry, cancel, provide) that the job's state does not allow."""


class AgentResultError(RunStateError, ValueError):
    """An agent's result (or one provided by hand) does not fit the station's result type."""


class ApprovalRoundsExceeded(RunStateError):
    """A delegated station's agent asked for tool approval in more chained rounds than the station allows."""
