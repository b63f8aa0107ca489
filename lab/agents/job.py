"""`AgentJob`: a handle on one stored job (what `run.job` and `lab.agents.job(id)` return).

Every read goes to the store, so a handle never shows stale truth; the actions go through the
board, which records them as events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engine.loop import run_sync

if TYPE_CHECKING:
    from ..records import JobEventRecord, JobRecord
    from .board import AgentBoard

__all__ = ("AgentJob",)


class AgentJob:
    """A delegated request's job: status, messages, tokens, result; retry / cancel / provide when LOST."""

    def __init__(self, board: AgentBoard, request_id: str, known: JobRecord | None = None):
        self._board = board
        self.request_id = request_id
        self.known = known
        """The record as it was when this handle was made, if the maker had it (`record` reads it anew)."""

    @property
    def record(self) -> JobRecord:
        rec = self._board.store.job(self.request_id)
        assert rec is not None, self.request_id
        return rec

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def output(self) -> Any:
        """The agent's result as JSON once SUCCEEDED (the station validates it against its result type)."""
        return self.record.output

    @property
    def error(self) -> dict[str, Any] | None:
        return self.record.error

    @property
    def usage(self) -> dict[str, Any]:
        """Tokens and requests used: the final count, or the latest reported while it runs."""
        rec = self.record
        if rec.usage:
            return rec.usage
        last = [e.payload for e in self.events() if e.kind == "usage"]
        return {k: v for k, v in last[-1].items() if k != "line"} if last else {}

    def events(self) -> list[JobEventRecord]:
        """Every transition and observation, in order (what `lab.sql("select * from job_events")` shows)."""
        return self._board.store.job_events(self.request_id)

    def transitions(self) -> list[str]:
        """The statuses it went through, in order: `["QUEUED", "ADMITTED", ...]`."""
        return [e.to_status for e in self.events() if e.kind == "transition" and e.to_status]  # type: ignore[misc]

    def messages(self) -> list[dict[str, Any]]:
        """The agent's messages as they arrived: `{"role", "parts": [{"kind", "content" | "tool", "args"}]}`."""
        return [{k: v for k, v in e.payload.items() if k != "line"} for e in self.events() if e.kind == "message"]

    def cancel(self, note: str | None = None) -> AgentJob:
        """Stop the job's runner, then record CANCELLED (a LOST job: LOST -> CANCELLED); its station fails."""
        return self._board.cancel(self.request_id, note)

    def retry(self) -> AgentJob:
        """Submit a LOST job's request again, as a new job with a new request id; returns the new job."""
        return self._board.retry(self.request_id)

    def provide(self, result: Any, note: str | None = None) -> AgentJob:
        """Answer a LOST job's station with `result` given by hand (validated against its result type when it routes)."""
        return self._board.provide(self.request_id, result, note)

    def wait(self, timeout: float | None = 60) -> AgentJob:
        """Block until the job has ended (any terminal)."""
        import asyncio

        async def _wait() -> None:
            await asyncio.wait_for(asyncio.wrap_future(self._board.completion(self.request_id)), timeout)

        run_sync(_wait())
        return self

    def __repr__(self) -> str:
        rec = self.record
        tokens = (rec.usage or {}).get("total_tokens")
        return f"<AgentJob {self.request_id} {rec.runtime} {rec.status}" + (f" tokens={tokens}" if tokens else "") + ">"
