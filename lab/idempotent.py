"""`IdempotentOp`: run a side effect once per station visit, across retries, resumes and crashes.

Seed 002 ("All-or-nothing steps"): a discarded step does not undo what a node did to the outside
world, so on a resume "it can happen again. Checkpoints give at-least-once execution; making an
effect exactly-once is the effect's own job", with "the IdempotentOp primitive". This is it:

    charge = IdempotentOp("charge", lambda amount: bank.charge(amount))

    class Pay(BaseNode[Order]):
        async def run(self, ctx) -> Ship:
            ctx.state.receipt = charge(ctx.state.amount)   # `await charge.acall(...)` for async effects
            return Ship()

Before the effect runs, its key is committed to the store (`effects` table, lab/store/effects.py);
after it returns, its JSON result. The key names the station visit: the run, the checkpoint the
station entered from (a park inside the station, an `interrupt()` or a gate, keeps its visit's
key), the node, the op's name and which call of it this is in the visit. So when the station runs
again for the same visit (a retry policy, `run.retry()`, a resume after the process died), a
finished call returns its recorded result without running the effect, and a call whose effect
raised runs again. A call that was started and never finished (the process died between the two
writes) is *in doubt*: the lab cannot know whether the effect happened, so it raises
`EffectInDoubtError` (the station fails, the run stops) unless the op was declared
`safe_to_repeat=True`. A person settles it with `lab.settle_effect(key, result)` or
`lab.settle_effect(key, rerun=True)` and retries the run. A later visit of the same station (a
loop that comes back to it) is a new visit, so its effects run again.

Time travel: `run.rewind(seq)` keeps the run, so a station entered again from the same checkpoint
is the same visit and gets its recorded results (the effect happened in the world; rewinding the
run does not undo it); `run.fork(seq)` is a new run, whose visits are its own and run their
effects. Records are JSON in the store's `effects` table (docs/store.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter

from .errors import ArgumentError, EffectInDoubtError, RunStateError, UnstorableEffectError
from .events import running_run
from .gates import current_station
from .records import EffectRecord

__all__ = ("IdempotentOp", "visit_origin", "settle_effect")

T = TypeVar("T")


def visit_origin(store: Any, run_id: str, head: int | None, node_id: str | None = None, task: int | None = None) -> int | None:
    """The checkpoint the station visit running from `head` entered from: `head` itself, or an earlier
    one when `head` continues the same visit: a waiting checkpoint written by a park inside it, or (a
    parallel `task`) a checkpoint whose parent already held that task of that node pending (its step
    settled its siblings and kept it, say after it failed)."""
    seq = head
    while seq is not None:
        cp = store.checkpoint(run_id, seq)
        if cp is None or cp.parent_seq is None:
            return seq
        if cp.status != "waiting" and (task is None or not _holds_task(store.checkpoint(run_id, cp.parent_seq), node_id, task)):
            return seq
        seq = cp.parent_seq
    return seq


def _holds_task(cp: Any, node_id: str | None, task: int) -> bool:
    return cp is not None and any(p.node_id == node_id and (p.meta or {}).get("task") == task for p in cp.next)


class IdempotentOp(Generic[T]):
    """A side effect a station runs at most once per visit; its result is recorded as JSON.

    `name` tells this op's records apart within a station (unique per node). `safe_to_repeat=True`
    says running the effect again after a crash mid-effect does no harm (an upsert, a PUT with its
    own key): then an in-doubt call runs again instead of failing. `result_type` (a pydantic-able
    type) encodes and decodes the result; without it the result must be plain JSON.
    """

    def __init__(
        self,
        name: str,
        effect: Callable[..., T] | Callable[..., Awaitable[T]],
        *,
        safe_to_repeat: bool = False,
        result_type: Any = None,
    ):
        if not isinstance(name, str) or not name or "/" in name or "#" in name:
            raise ArgumentError(f"IdempotentOp needs a name (a non-empty str without '/' or '#'), got {name!r}")
        if not callable(effect):
            raise ArgumentError(f"IdempotentOp({name!r}, effect): the effect must be callable, got {effect!r}")
        self.name = name
        self.effect = effect
        self.safe_to_repeat = bool(safe_to_repeat)
        self._adapter: TypeAdapter[Any] | None = TypeAdapter(result_type) if result_type is not None else None

    def __repr__(self) -> str:
        return f"IdempotentOp({self.name!r}, safe_to_repeat={self.safe_to_repeat})"

    def __call__(self, *args: Any, **kwargs: Any) -> T:
        """Run a synchronous effect once for this station visit (or return its recorded result)."""
        if inspect.iscoroutinefunction(self.effect):
            raise ArgumentError(f"{self!r} wraps an async effect: call it with `await op.acall(...)`")
        key, store, record, go = self._begin()
        if not go:
            return self._recorded(key, record)
        try:
            value = self.effect(*args, **kwargs)
        except Exception as exc:  # a cancellation or an exit mid-effect leaves it started: in doubt
            self._failed(store, key, exc)
            raise
        return self._done(store, key, value)

    async def acall(self, *args: Any, **kwargs: Any) -> T:
        """Run an effect (async or not) once for this station visit (or return its recorded result)."""
        key, store, record, go = self._begin()
        if not go:
            return self._recorded(key, record)
        try:
            value = self.effect(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            self._failed(store, key, exc)
            raise
        return self._done(store, key, value)  # type: ignore[arg-type]

    # -- the protocol ----------------------------------------------------------------------------

    def _begin(self) -> tuple[str, Any, EffectRecord, bool]:
        ctx = current_station(f"{self!r}")
        run = ctx.run if ctx.run is not None else running_run.get()
        if run is None:
            raise RunStateError(f"{self!r} was called outside a lab run; call it inside a node while a run steps it")
        store = run.lab.store
        if not hasattr(store, "begin_effect"):
            raise RunStateError(f"{self!r}: the store {store.path} keeps no effect records")
        ctx.effects += 1
        origin = visit_origin(store, run.id, run.head, ctx.node_id, ctx.task)
        station = ctx.node_id if ctx.task is None else f"{ctx.node_id}~t{ctx.task}"  # a parallel step's task
        key = f"{run.id}/{origin}/{station}/{self.name}#{ctx.effects}"
        record, go = store.begin_effect(
            key, run_id=run.id, node_id=ctx.node_id, checkpoint_seq=origin, name=self.name,
            repeat_started=self.safe_to_repeat,
        )  # fmt: skip
        return key, store, record, go

    def _recorded(self, key: str, record: EffectRecord) -> T:
        if record.status == "done":
            return record.result if self._adapter is None else self._adapter.validate_python(record.result)
        why = (record.error or {}).get("message")
        raise EffectInDoubtError(
            f"the effect {key!r} was started (try {record.tries}) and its result was never recorded"
            + (f" ({why})" if why else "")
            + ": it may or may not have happened, so it is not run again on its own. Check the outside "
            f"world, then lab.settle_effect({key!r}, result) if it happened or "
            f"lab.settle_effect({key!r}, rerun=True) if it did not, and run.retry(); declare the op "
            "IdempotentOp(..., safe_to_repeat=True) if running it twice is harmless",
            key=key,
        )

    def _done(self, store: Any, key: str, value: Any) -> T:
        try:
            encoded = value if self._adapter is None else self._adapter.dump_python(value, mode="json")
            store.finish_effect(key, result=encoded)
        except (TypeError, ValueError) as exc:
            # the effect happened but its result cannot be kept: the record stays started (in doubt)
            raise UnstorableEffectError(
                f"the effect {key!r} ran but its result {type(value).__name__} is not JSON ({exc}); it is recorded "
                "in doubt. Give IdempotentOp a result_type= that pydantic can dump, or return plain JSON",
                key=key,
            ) from None
        return value

    def _failed(self, store: Any, key: str, exc: BaseException) -> None:
        """The effect raised: the op's own code says it did not complete, so the next try runs it again."""
        store.finish_effect(key, error={"type": type(exc).__name__, "message": str(exc)[:500]})


def settle_effect(store: Any, key: str, result: Any = None, *, rerun: bool = False) -> EffectRecord:
    """A person's word on an in-doubt effect: it happened with `result` (JSON), or (`rerun=True`)
    it did not and the next try runs it. Only a started (in-doubt) record can be settled."""
    record = store.effect(key)
    if record is None:
        raise ArgumentError(f"no effect {key!r} in the store; lab.effects(run_id) lists a run's effects")
    if record.status != "started":
        raise RunStateError(
            f"the effect {key!r} is {record.status}, not in doubt: only a started effect whose result was "
            "never recorded can be settled"
        )
    if rerun:
        store.finish_effect(key, error={"type": "Rerun", "message": "a person said it did not happen"}, by="person")
    else:
        try:
            store.finish_effect(key, result=result, by="person")
        except TypeError as exc:
            raise ArgumentError(f"lab.settle_effect({key!r}, result): the result must be JSON ({exc})") from None
    return store.effect(key)
