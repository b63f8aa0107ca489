"""Retry policies: a station tried again inside the same step (seed 003 "Failures and retries").

`@g.node(retry=Retry(max_attempts=3, backoff=0.5, on=(ValueError,)))` (or per station by name,
`lab.adopt(graph, name=..., retry={"fetch": Retry(...)})`) lets a flaky station fail and be
tried again before the run fails. The tries happen inside the same step, on the same state
(a serial run restores the head's state before each try), are not checkpointed, and do not
count toward the step limit; each failed try that is followed by another is a `retry` event
with its error and try number. A step that runs again after a resume or `run.retry()` gives
each station all its tries again.

Never retried, whatever `on` says: a wait (a gate, `interrupt()`, a capability request: the
run parks instead), cancellation, Ctrl-C, and the lab's own contract errors (a successor the
manifest does not permit, a value that cannot be checkpointed, a bound of the run): trying
again could not change them. A station's own `timeout=` (`NodeTimeout`) is retried. An error that
reports a failure from elsewhere names that failure's classes in `retry_as` (a delegated agent
station's FAILED job: the agent's error; TIMED_OUT: `TimeoutError`), and `on` is matched against
those: the station delegates again, as a new job.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .engine.blocking import set_blocking
from .errors import ArgumentError, GraphDefinitionError, LabError, NodeTimeout, RetryPolicyError
from .gates import StationContext, WaitSignal
from .limits import check_timeout

if TYPE_CHECKING:
    from .engine.tasks import Task
    from .run import Run

__all__ = ("Retry", "Retries", "StationPolicies", "check_policies", "check_timeouts")


def _seconds(value: Any) -> bool:
    """Whether `value` is a usable wait: a finite number >= 0 (not a bool, not NaN, not infinity)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


def _exception_types(on: Any) -> tuple[type[BaseException], ...]:
    types = on if isinstance(on, tuple) else (on,)
    if not types or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise ArgumentError(f"Retry(on={on!r}): on is an exception class or a tuple of them, e.g. on=(ValueError, TimeoutError)")
    return types


@dataclass(frozen=True, slots=True)
class Retry:
    """How often, on what, and how far apart a station is tried (LangGraph's `RetryPolicy`).

    The wait before try n+1 is `backoff * factor**(n-1)` seconds, at most `max_backoff`; or
    `backoff(n)` when `backoff` is a function of the number of failed tries.
    """

    max_attempts: int = 3
    """Tries in all, the first included (1: no retry)."""
    backoff: float | Callable[[int], float] = 0.0
    """Seconds before the second try (then multiplied by `factor`), or a function of the failed tries."""
    factor: float = 2.0
    max_backoff: float = 60.0
    on: type[BaseException] | tuple[type[BaseException], ...] = field(default=(Exception,))
    """Exception classes worth another try (default: any `Exception`, but see the module docs)."""

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ArgumentError(f"Retry(max_attempts={self.max_attempts!r}): the number of tries, a whole number of at least 1")
        if not callable(self.backoff) and not _seconds(self.backoff):
            raise ArgumentError(
                f"Retry(backoff={self.backoff!r}): seconds before the next try, a finite number >= 0, or a function "
                "of the number of failed tries that returns one"
            )
        for name in ("factor", "max_backoff"):
            value = getattr(self, name)
            if not _seconds(value):
                raise ArgumentError(f"Retry({name}={value!r}): a finite number >= 0")
        object.__setattr__(self, "on", _exception_types(self.on))

    def retries(self, error: BaseException, failed_tries: int) -> bool:
        """Whether a station that failed `failed_tries` times, the last with `error`, gets another try."""
        if failed_tries >= self.max_attempts or not isinstance(error, Exception):
            return False
        if isinstance(error, WaitSignal):
            return False
        names = getattr(error, "retry_as", None)
        if names is not None:  # a failure reported from elsewhere (a delegated agent's job): `on` matches its classes
            return any(f"{t.__module__}.{t.__qualname__}" in names for t in self.on)  # type: ignore[union-attr]
        if isinstance(error, LabError) and not isinstance(error, NodeTimeout):
            return False
        return isinstance(error, self.on)

    def delay(self, failed_tries: int) -> float:
        """Seconds to wait before the next try, after `failed_tries` failed ones."""
        if callable(self.backoff):
            value = self.backoff(failed_tries)  # what it raises, the run records as the station's failure
            if not _seconds(value):
                raise ArgumentError(f"it returned {value!r}, not a finite number of seconds >= 0")
            return float(value)
        if not self.backoff:
            return 0.0
        try:
            wait = float(self.backoff) * float(self.factor) ** (failed_tries - 1)
        except OverflowError:  # many tries with a large factor: the cap applies
            return float(self.max_backoff)
        return min(wait, float(self.max_backoff))

    def to_json(self) -> dict[str, Any]:
        """What an event or a view shows of the policy."""
        return {
            "max_attempts": self.max_attempts,
            "backoff": getattr(self.backoff, "__name__", repr(self.backoff)) if callable(self.backoff) else self.backoff,
            "on": [t.__qualname__ for t in self.on],  # type: ignore[union-attr]
        }


class StationPolicies:
    """Mixed into graph handles (declared and adopted): retry policies and time limits by station.

    Read by a run each time a station fails or starts, so changing them takes effect at once;
    they are not part of the graph's revision (the graph's shape and code are).
    """

    retry_policies: dict[str, Retry]
    """Retry policies by station (`@g.node(retry=Retry(...))`)."""
    node_timeouts: dict[str, float]
    """Seconds each try of a station may run (`@g.node(timeout=...)`) before it fails with `NodeTimeout`."""

    def set_policy(
        self,
        node_id: str,
        *,
        retry: Retry | None = None,
        timeout: float | None = None,
        blocking: bool | None = None,
        where: str = "",
    ) -> None:
        """Give station `node_id` a retry policy and a time limit per try (None: none); replaces what it had.

        `blocking=True` runs it on a thread of its own, False back on the loop (None: unchanged).
        """
        where = where or f"set_policy({node_id!r})"
        stations = self._policy_stations()
        if stations is not None and node_id not in stations:
            raise GraphDefinitionError(f"{where}: the graph has no station {node_id!r}; its stations are {sorted(stations)}")
        if retry is not None and not isinstance(retry, Retry):
            raise ArgumentError(f"{where}: retry={retry!r}; pass lab.Retry(max_attempts=..., backoff=..., on=...)")
        seconds = check_timeout(timeout, where)
        if retry is None:
            self.retry_policies.pop(node_id, None)
        else:
            self.retry_policies[node_id] = retry
        if seconds is None:
            self.node_timeouts.pop(node_id, None)
        else:
            self.node_timeouts[node_id] = seconds
        if blocking is not None:
            target = self._station_object(node_id)
            if target is None:
                raise GraphDefinitionError(f"{where}: blocking= needs station {node_id!r} declared first")
            set_blocking(target, bool(blocking))

    def _policy_stations(self) -> Any:
        """The stations a policy may name (None: any, while a graph is being declared)."""
        return None

    def _station_object(self, node_id: str) -> Any:
        """The node class or step that runs station `node_id` (what `blocking` wraps), or None."""
        return None


def check_policies(retry: Mapping[str, Any] | None, stations: Any, where: str) -> dict[str, Retry]:
    """`{station: Retry}` naming real stations, or an error saying which name is wrong."""
    if retry is None:
        return {}
    if not isinstance(retry, Mapping):
        raise ArgumentError(f"{where}: retry={retry!r}; pass a dict of station name -> Retry(...)")
    out: dict[str, Retry] = {}
    for name, policy in retry.items():
        if name not in stations:
            raise GraphDefinitionError(f"{where}: retry names station {name!r}, which the graph does not have; its stations are {sorted(stations)}")
        if not isinstance(policy, Retry):
            raise ArgumentError(f"{where}: retry[{name!r}]={policy!r}; pass Retry(max_attempts=..., backoff=..., on=...)")
        out[name] = policy
    return out


def check_timeouts(timeouts: Mapping[str, Any] | None, stations: Any, where: str) -> dict[str, float]:
    """`{station: seconds}` naming real stations, or an error saying which name or value is wrong."""
    if timeouts is None:
        return {}
    if not isinstance(timeouts, Mapping):
        raise ArgumentError(f"{where}: node_timeouts={timeouts!r}; pass a dict of station name -> seconds")
    out: dict[str, float] = {}
    for name, seconds in timeouts.items():
        if name not in stations:
            raise GraphDefinitionError(
                f"{where}: node_timeouts names station {name!r}, which the graph does not have; its stations are {sorted(stations)}"
            )
        value = check_timeout(seconds, where, f"node_timeouts[{name!r}]")
        assert value is not None
        out[name] = value
    return out


class Retries:
    """Mixed into `Run`: the engines' `retrying` hooks, which apply the graph's policies."""

    _retry_attempt: int | None = None
    """The attempt of the serial station whose next try the run waits for (its backoff)."""

    async def back_off(self: Run, seconds: float) -> None:  # type: ignore[misc]
        """Wait before a serial station's next try. Ctrl-C (or another cancellation) here ends the run
        `interrupted`, as in the station itself; `cancel()` and a timeout are recorded by the drive."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            if not self._cancel_requested and self._timed_out is None and self.next_stations:
                reason = "cancelled (Ctrl-C) while waiting for the next try of a retry policy"
                self.aborted(attempt=self._retry_attempt or 0, node_id=self.next_stations[0], reason=reason)
            raise

    def _policy_for(self: Run, node_id: str) -> Retry | None:  # type: ignore[misc]
        policies = getattr(self.graph, "retry_policies", None)
        return policies.get(node_id) if policies else None

    def retrying(self: Run, *, attempt: int, node_id: str, error: Exception) -> float | None:  # type: ignore[misc]
        """Serial: another try of the pending station from the head, on the head's state; or None."""
        policy = self._policy_for(node_id)
        if policy is None:
            return None
        tries = self._tries.get(node_id, 0) + 1
        if not policy.retries(error, tries):
            return None
        try:
            delay = policy.delay(tries)
        except Exception as exc:  # the policy's own fault: the station fails with it (the engine goes no further)
            self.failed(attempt=attempt, node_id=node_id, error=_policy_error(policy, tries, node_id, error, exc))
            return 0.0  # `Run._drive` sees the run failed and stops
        self._tries[node_id] = tries
        self._retry_attempt = attempt
        station, self._station = self._station, None
        self._restore_head_state()  # "on the same state" (seed 003): what the failed try changed is dropped
        # the next try gets what this one was given (a verdict, answers, grants), never a breakpoint
        self._resume = (
            StationContext(node_id, station.verdict, list(station.answers), dict(station.grants), run=self)
            if station
            else StationContext(node_id, run=self)
        )
        return self._note_retry(policy, tries, delay, attempt, node_id, error, task=None)

    def task_retrying(self: Run, task: Task, attempt: int, error: Exception, failed_tries: int) -> float | None:  # type: ignore[misc]
        """Parallel: another try of one task inside its super-step (the step's shared state), or None."""
        policy = self._policy_for(task.node_id)
        if policy is None or not policy.retries(error, failed_tries):
            return None
        try:
            delay = policy.delay(failed_tries)
        except Exception as exc:  # raised inside the task's try: the task (and its step) fails with it
            raise _policy_error(policy, failed_tries, task.node_id, error, exc) from exc
        return self._note_retry(policy, failed_tries, delay, attempt, task.node_id, error, task=task.task_id)

    def _note_retry(  # type: ignore[misc]
        self: Run, policy: Retry, tries: int, delay: float, attempt: int, node_id: str, error: Exception, task: int | None
    ) -> float:
        payload: dict[str, Any] = {
            "by": "policy",
            "try": tries,
            "of": policy.max_attempts,
            "delay": delay,
            "error": {"type": f"{type(error).__module__}.{type(error).__qualname__}", "message": str(error)},
        }
        if task is not None:
            payload["task"] = task
        self._write([self._event_row("retry", node_id=node_id, attempt=attempt, checkpoint_seq=self._head, payload=payload)], sync=True)
        return delay


def _policy_error(policy: Retry, tries: int, node_id: str, error: Exception, exc: Exception) -> RetryPolicyError:
    """The station's failure when its policy cannot say how long to wait (a backoff function that raised)."""
    name = getattr(policy.backoff, "__qualname__", None) or repr(policy.backoff)
    why = str(exc) if isinstance(exc, ArgumentError) else f"it raised {type(exc).__name__}: {exc}"
    failure = RetryPolicyError(
        f"station {node_id} failed and its retry policy could not say when to try again: the backoff function "
        f"{name}({tries}) failed ({why}). The station's own error was {type(error).__name__}: {error}. The backoff "
        "function gets the number of failed tries and returns the seconds to wait (a finite number >= 0)",
        node_id=node_id,
        original=error,
    )
    failure.__cause__ = exc
    return failure
