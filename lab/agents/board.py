"""`lab.agents`: runtimes by exact name, the jobs of delegated stations, and what a person may do with them.

One board per open store. It records every job transition in the store (`jobs`, `job_events`),
runs jobs in the lab's process (asyncio tasks on the lab loop) or in worker subprocesses it
watches, adopts the first terminal of each job, and keeps later ones inert. A job whose runner
died is LOST: it is never submitted again on its own; `retry()` (a new request id), `cancel()`
or `provide(result)` is a person's choice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..engine.loop import lab_loop, run_sync
from ..errors import RunStateError
from ..records import JobRecord, WaitRecord
from ..store.jobs import JobTables
from .cancelling import KILL_WAIT, POLL, Cancelling
from .errors import AgentJobStateError, AgentRequestConflict, AgentRuntimeError
from .files import JobFiles, alive, process_identity
from .folders import jobs_folder
from .job import AgentJob
from .lifecycle import TERMINALS, allowed_from, request_digest, request_id_for
from .node import check_result
from .observations import Observations
from .outcomes import error_json, outcome_of, stored_outcome
from .recovering import Recovering, admitted_by
from .runtime import binding_for, check_binding
from .worker_calls import adopt_calls, shipped_recordings
from .workers import exit_description, start_worker

if TYPE_CHECKING:
    from ..lab import Lab
    from ..run import Run
    from .runtime import Runtime

__all__ = ("AgentBoard", "board_for", "recover_jobs")

log = logging.getLogger(__name__)

_orphans: list[Any] = []
"""Workers still running when their watch ended (a lab closed under them): kept so they are not reaped noisily."""


def board_for(lab: Lab) -> AgentBoard:
    """The board of `lab`'s store (every Lab on one store shares it)."""
    store = lab.store
    if not isinstance(store, JobTables):
        raise AgentRuntimeError(
            f"the store {type(store).__name__} keeps no agent jobs (it does not implement lab.store.jobs.JobTables); "
            "delegated agent stations need a store that does: Lab('path.duckdb') or Lab('postgresql://...') (docs/agents.md)"
        )
    board = getattr(store, "agent_board", None)
    if board is None:
        board = AgentBoard(lab)
        store.agent_board = board  # type: ignore[attr-defined]
    return board


def recover_jobs(lab: Lab) -> None:
    """On open: adopt results that workers wrote while no lab watched, and mark dead runners' jobs LOST."""
    if not isinstance(lab.store, JobTables) or all(j.terminal for j in lab.store.jobs()):
        return
    board_for(lab).recover()


class AgentBoard(Recovering, Cancelling):
    """Register runtimes, submit requests, read jobs, and act on them (`lab.agents`)."""

    def __init__(self, lab: Lab):
        self._lab = lab
        self.store = lab.store
        self._runtimes: dict[str, Runtime] = {}
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        """Jobs this process runs or watches, by request id."""
        self._procs: dict[str, Any] = {}
        """Worker handles (a forked job, or a Popen), by request id."""
        self._done: dict[str, concurrent.futures.Future[dict[str, Any] | None]] = {}
        """Each job's completion; its result is the outcome when this process recorded the terminal that won."""
        self._cancelling: set[str] = set()
        self._runs_here: set[str] = set()
        """Jobs admitted to run as a task of this process, until that task ends: it resolves their completion."""
        self._bindings: dict[tuple[str, str], dict[str, Any]] = {}
        """(run id, runtime name) -> the binding of the run's jobs under that name (`binding`)."""
        self._unrecorded: dict[str, Observations] = {}
        """Jobs started here whose admission (ADMITTED, PREPARING, RUNNING) is not recorded yet (`admit(deferred=True)`)."""
        self._lock = threading.RLock()
        self._listeners: list[Callable[[str], None]] = []
        self._folder: str | None = None

    @property
    def folder(self) -> str:
        """Where subprocess jobs keep their files: beside the store file, under the user's cache folder
        for a PostgreSQL store, a temporary folder for `:memory:` (lab/agents/folders.py)."""
        if self._folder is None:
            self._folder = jobs_folder(self.store.path)
        return self._folder

    # -- runtimes ------------------------------------------------------------------------------

    def register(self, name: str, agent: Any = None, *, target: str | None = None, runner: str = "task") -> Runtime:
        """Name an agent for delegated stations: `lab.agents.register("planner", agent)`.

        `runner="subprocess"` runs each job in a worker process that survives a kernel restart; the
        worker imports the agent from `target` ("package.module:attribute"). Registering a name again
        replaces it (a re-run cell) for new runs; a run keeps the binding its first job recorded.
        """
        from .runtime import Runtime

        if not isinstance(name, str) or not name:
            raise AgentRuntimeError(f"lab.agents.register: a runtime name is a non-empty str, got {name!r}")
        if runner not in ("task", "subprocess"):
            raise AgentRuntimeError(f"lab.agents.register({name!r}, runner={runner!r}): runner is 'task' or 'subprocess'")
        if runner == "subprocess" and not target:
            raise AgentRuntimeError(
                f"lab.agents.register({name!r}, runner='subprocess') needs target='package.module:attribute': the "
                "worker process imports the agent, so it must live in a module, not a notebook cell"
            )
        if agent is None and not target:
            raise AgentRuntimeError(f"lab.agents.register({name!r}) needs the agent (or target='module:attribute')")
        if agent is not None and not hasattr(agent, "iter"):
            raise AgentRuntimeError(f"lab.agents.register({name!r}, {agent!r}): expected a pydantic_ai.Agent")
        rt = Runtime(name=name, agent=agent, target=target, runner=runner)  # type: ignore[arg-type]
        self._runtimes[name] = rt
        return rt

    def runtime(self, name: str) -> Runtime:
        """The runtime registered under exactly `name` (there is no fallback)."""
        rt = self._runtimes.get(name)
        if rt is None:
            known = ", ".join(sorted(self._runtimes)) or "none yet"
            raise AgentRuntimeError(
                f"no agent runtime is registered as {name!r} (registered: {known}); register it with "
                f"lab.agents.register({name!r}, agent) before the station runs"
            )
        return rt

    @property
    def runtimes(self) -> dict[str, Runtime]:
        return dict(self._runtimes)

    # -- jobs ----------------------------------------------------------------------------------

    def submit(
        self,
        request_id: str,
        runtime: str,
        request: dict[str, Any],
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        wait_owner: str | None = None,
        checkpoint_seq: int | None = None,
        retry_of: str | None = None,
        start: bool = True,
        new_run: bool = False,
        ride: list[dict[str, Any]] | None = None,
    ) -> AgentJob:
        """Store a request as a QUEUED job and (with `start`) admit and run it.

        The request id is the idempotency key: the same id with the same request returns the
        existing job (not run again); with a different request it is refused. `new_run`: `run_id`
        was created by this process (it has no job this board did not store). `ride` (with `new_run`):
        the rows of the park that waits on the job, written next; the store may put the job's rows
        there (`JobTables.insert_job`), and the job is announced once `admit(announce=True)` runs after it.
        """
        rt = self.runtime(runtime)
        if not isinstance(request, dict) or not isinstance(request.get("prompt"), str):
            raise AgentRequestConflict(f"a request is a dict with a 'prompt' str, got {request!r}")
        if "binding" not in request:
            request = {**request, "binding": self.binding(run_id, runtime, new_run=new_run)}
        digest = request_digest(runtime, request)
        riding = len(ride) if ride is not None else -1
        rec, inserted = self.store.insert_job(
            JobRecord(
                request_id=request_id, runtime=runtime, runner=rt.runner, request=request, digest=digest,
                status="QUEUED", run_id=run_id, node_id=node_id, wait_owner=wait_owner,
                checkpoint_seq=checkpoint_seq, retry_of=retry_of,
            ),  # fmt: skip
            ride=ride if new_run else None,
        )
        if not inserted and rec.digest != digest:
            raise AgentRequestConflict(
                f"request id {request_id!r} already names another request (runtime {rec.runtime!r}, prompt "
                f"{rec.request.get('prompt', '')[:60]!r}); a request id is an idempotency key: use a new id for a new request"
            )
        if run_id is not None and isinstance(rec.request.get("binding"), dict):
            self._bindings.setdefault((run_id, runtime), rec.request["binding"])  # the run's, from now on
        if ride is None or len(ride) == riding:  # stored now (its rows did not go into the park's)
            self._notify(request_id)
        if inserted and start:
            self.admit(request_id, rec)
        return AgentJob(self, request_id, rec if not start else None)

    def binding(self, run_id: str | None, runtime: str, *, new_run: bool = False) -> dict[str, Any]:
        """The runtime profile a new job of `run_id` is bound to (`runtime.binding_for`): read from its
        jobs once per run and name (none to read for a run this process created), then remembered."""
        bound = self._bindings.get((run_id, runtime)) if run_id is not None else None
        if bound is not None:
            return bound
        return binding_for(self.store.jobs(run_id=run_id) if run_id is not None and not new_run else [], self.runtime(runtime))

    def check_binding(self, rec: JobRecord) -> None:
        """Raise `AgentRuntimeError` if `rec`'s name is registered now as another runtime than its run bound."""
        check_binding(rec, self.runtime(rec.runtime))

    def job(self, request_id: str) -> AgentJob:
        if self.store.job(request_id) is None:
            raise AgentJobStateError(f"no agent job {request_id!r} in this store; lab.agents.jobs() lists them")
        return AgentJob(self, request_id)

    def jobs(self, *, run_id: str | None = None, status: str | None = None) -> list[AgentJob]:
        return [AgentJob(self, r.request_id) for r in self.store.jobs(run_id=run_id, status=status)]

    def on_change(self, callback: Callable[[str], None]) -> None:
        """Call `callback(request_id)` after anything about a job is recorded (views use it)."""
        self._listeners.append(callback)

    def _notify(self, request_id: str) -> None:
        for cb in list(self._listeners):
            try:
                cb(request_id)
            except Exception:
                log.exception("agent job listener failed on %s", request_id)

    def _record(self, request_id: str, kind: str, payload: dict[str, Any]) -> None:
        self.store.add_job_events(request_id, [(kind, payload)])
        self._notify(request_id)

    def _record_many(self, request_id: str, items: list[tuple[str, dict[str, Any]]]) -> None:
        self.store.add_job_events(request_id, items)
        self._notify(request_id)

    def _move(self, request_id: str, to: str, **fields: Any) -> bool:
        applied = self.store.transition_job(request_id, to, allowed_from=allowed_from(to), **fields)
        self._notify(request_id)
        return applied

    def deliver(
        self, request_id: str, status: str, *, output: Any = None, error: dict[str, Any] | None = None,
        usage: dict[str, Any] | None = None, by: str = "runner", seen: list[tuple[str, dict[str, Any]]] | None = None,
        admitted: list[Any] | None = None,
    ) -> bool:  # fmt: skip
        """Record a terminal for a job. The first admitted terminal wins; a later one is kept as an
        `inert` event and never applied. Returns True if this one won. `seen`: observations not
        yet recorded, written first in the same transaction; `admitted`: its admission's moves not
        yet recorded (a job started here, `admit(deferred=True)`), written before them."""
        if status not in TERMINALS:
            raise AgentJobStateError(f"{status!r} is not a terminal; a job ends {', '.join(sorted(TERMINALS))}")
        moves = [*(admitted or ()), (status, allowed_from(status), True, {"by": by}, {"output": output, "error": error, "usage": usage})]
        applied = self.store.advance_job(request_id, moves, observations=seen or (), observed_after=len(moves) - 1) == len(moves)
        with self._lock:
            done = self._done.get(request_id)
        if done is not None and not done.done() and (applied or self.store.job(request_id).terminal):  # type: ignore[union-attr]
            # not while CANCELLING: the cancel closes it once CANCELLED commits. The terminal that won here
            # is the job's for good (only LOST changes again), so its outcome rides on the future, as stored
            won = applied and status != "LOST"
            done.set_result(stored_outcome(request_id, status, output, error) if won else None)
        self._notify(request_id)
        return applied

    def completion(self, request_id: str) -> concurrent.futures.Future[dict[str, Any] | None]:
        """A future that is done when the job `request_id` has ended (any terminal), from any thread.

        Its result is the job's outcome (`outcomes.outcome_of`) when this process recorded the terminal that won."""
        with self._lock:
            fut = self._done.get(request_id)
            if fut is None:
                fut = self._done[request_id] = concurrent.futures.Future()
            elif fut.done() or request_id in self._runs_here:
                return fut  # ended, or run here: its task (or a cancel) resolves it, no read needed
            rec = self.store.job(request_id)
            if rec is not None and rec.terminal and not fut.done():
                fut.set_result(None)
            return fut

    # -- the run's side ------------------------------------------------------------------------

    def queue_for_wait(
        self, run: Run, wait: WaitRecord, runtime: str, request: dict[str, Any], ride: list[dict[str, Any]] | None = None
    ) -> JobRecord:
        """Before the park is written: the job, QUEUED, durable before it is admitted (seed 001: persisted
        before first submit): in a transaction of its own, or (`ride`, a run created here) in the park's rows."""
        from ..waits import task_of

        rid = request_id_for(run.id, wait.checkpoint_seq, task_of(wait.owner))
        return self.submit(
            rid, runtime, request, run_id=run.id, node_id=wait.node_id, wait_owner=wait.owner,
            checkpoint_seq=wait.checkpoint_seq, start=False, new_run=run.created_here, ride=ride,
        ).known or self.store.job(rid)  # type: ignore[return-value]  # fmt: skip

    def current(self, wait: WaitRecord) -> JobRecord | None:
        """The job that answers `wait` now: its latest (a retry replaces a LOST one)."""
        recs = self.store.jobs(wait_owner=wait.owner)
        return recs[-1] if recs else None

    def job_of_run(self, run: Run) -> AgentJob | None:
        wait = run.wait
        rec = self.current(wait) if wait is not None and wait.kind == "delegate" else None
        if rec is None:
            recs = self.store.jobs(run_id=run.id)
            rec = recs[-1] if recs else None
        return AgentJob(self, rec.request_id) if rec is not None else None

    def check_continuable(self, run: Run, wait: WaitRecord) -> None:
        rec = self.current(wait)
        if rec is not None and rec.status == "LOST":
            raise AgentJobStateError(
                f"run {run.id} waits at {wait.node_id}, whose agent job {rec.request_id} is LOST: its runner died "
                "and what the agent did is unknown, so it is never submitted again on its own. Choose: "
                "run.job.retry() (a new request), run.job.cancel(), or run.job.provide(result)"
            )

    async def settle(self, run: Run, wait: WaitRecord) -> bool:
        """Await the wait's job and adopt its terminal into the wait; False if it ended LOST."""
        rid = (wait.details or {}).get("request_id") if isinstance(wait.details, dict) else None
        if rid is not None and self._ran_here(rid):  # it answers the wait: no retry or LOST can have replaced it
            outcome = await self._completed(run, wait, rid)
            if outcome is not None:
                run.adopt_answer(wait, outcome)
                return True
        rec = self.current(wait)
        if rec is None:
            return False
        rid = rec.request_id
        if not rec.terminal:
            started = admitted_by(wait) if rec.status == "QUEUED" and rec.runner == "task" else None
            if rec.status == "QUEUED" and started is None:
                self.admit(rid, rec)  # parked, never submitted (the process stopped in between)
            elif rec.status == "QUEUED" and rid not in self._tasks:
                self.recover_one(rec, started)  # started by the process that parked it: judged like RUNNING
            elif rid not in self._tasks:
                self.recover_one(rec)
            await self._completed(run, wait, rid)
            rec = self.store.job(rid)
            assert rec is not None
        if rec.status == "LOST":
            return False
        run.adopt_answer(wait, outcome_of(rec))
        return True

    def _ran_here(self, rid: str) -> bool:
        """Job `rid` runs as a task of this process, or ended with a terminal recorded here that won (not LOST)."""
        with self._lock:
            done = self._done.get(rid)
        return rid in self._runs_here or (done is not None and done.done() and done.result() is not None)

    async def _completed(self, run: Run, wait: WaitRecord, rid: str) -> dict[str, Any] | None:
        """Await job `rid`'s end: its outcome if its winning terminal was recorded here (a cancelled run contains it)."""
        try:
            return await asyncio.wrap_future(self.completion(rid))
        except asyncio.CancelledError:
            if run.cancel_requested:  # cancelling the run contains its job first
                await _on_lab_loop(self.acancel(rid, note="the run was cancelled"))
                run.record_cancelled(node_id=wait.node_id)
            elif run.timed_out is not None:  # the run's timeout ran out: its job stops with it (issue 26)
                await _on_lab_loop(self.acancel(rid, note=f"the run's timeout of {run.timed_out:g} s ran out"))
            raise

    def contain(self, wait: WaitRecord) -> None:
        """The run was cancelled while parked: stop its job (no wait: called from any thread)."""
        rec = self.current(wait)
        if rec is None or rec.terminal:
            return
        fut = asyncio.run_coroutine_threadsafe(self.acancel(rec.request_id, note="the run was cancelled"), lab_loop())
        if not _on_loop_thread():
            try:
                fut.result(timeout=KILL_WAIT + 5)
            except AgentJobStateError:
                pass  # it ended meanwhile: its terminal stands

    # -- a person's choices ----------------------------------------------------------------------

    def cancel(self, request_id: str, note: str | None = None) -> AgentJob:
        """Record CANCELLING, contain the job's runner, record CANCELLED (also from LOST); answer its wait."""
        rec = run_sync(self.acancel(request_id, note=note))
        self._answer_wait(rec, "cancel")
        return AgentJob(self, request_id)

    def retry(self, request_id: str) -> AgentJob:
        """Submit a LOST job's request again as a new job (a new request id) for the same wait."""
        rec = self._lost(request_id, "retry")
        self.check_binding(rec)  # a retry runs the agent its run was bound to, or nothing
        n = len(self.store.jobs(wait_owner=rec.wait_owner)) + 1
        base = rec.retry_of or rec.request_id
        base = base.split(".r")[0]
        job = self.submit(
            f"{base}.r{n}", rec.runtime, rec.request, run_id=rec.run_id, node_id=rec.node_id,
            wait_owner=rec.wait_owner, checkpoint_seq=rec.checkpoint_seq, retry_of=rec.request_id,
        )  # fmt: skip
        self._record(request_id, "retried", {"by": "person", "new_request_id": job.request_id})
        return job

    def provide(self, request_id: str, result: Any, note: str | None = None) -> AgentJob:
        """Answer a LOST job's wait with a result given by hand; the job itself stays LOST (its truth is unknown)."""
        from pydantic_core import to_jsonable_python

        rec = self._lost(request_id, "provide a result for")
        output = to_jsonable_python(result)
        check_result(self.store.live_runs.get(rec.run_id or ""), rec, output)
        self._record(request_id, "provided", {"by": "person", "output": output, "note": note})
        self._answer_wait(rec, "provide", output=output)
        return AgentJob(self, request_id)

    def _lost(self, request_id: str, action: str) -> JobRecord:
        rec = self.store.job(request_id)
        if rec is None:
            raise AgentJobStateError(f"no agent job {request_id!r}; lab.agents.jobs() lists them")
        if rec.status != "LOST":
            raise AgentJobStateError(
                f"agent job {request_id} is {rec.status}, not LOST; you {action} a job only when its runner died "
                "(a failed job fails its station: run.retry() submits it again)"
            )
        wait_open = rec.wait_owner is None or any(
            w.owner == rec.wait_owner and w.resolution is None for w in self.store.waits(rec.run_id or "")
        )
        current = self.store.jobs(wait_owner=rec.wait_owner) if rec.wait_owner else [rec]
        if not wait_open or current[-1].request_id != request_id:
            raise AgentJobStateError(
                f"agent job {request_id} no longer answers its station's wait (it was retried or answered); act on "
                "the run's current job: run.job"
            )
        return rec

    def _answer_wait(self, rec: JobRecord, action: str, output: Any = None) -> None:
        """Answer the job's wait on the run's handle: the run goes on with this outcome on its next step."""
        if rec.run_id is None or rec.wait_owner is None:
            return
        run = self.store.live_runs.get(rec.run_id)
        if run is None or run.busy:
            return  # a run awaiting the job adopts it itself; a run not open here adopts it on lab.resume
        if action == "provide":
            outcome = {"request_id": rec.request_id, "status": "SUCCEEDED", "output": output, "error": None, "by": "person"}
        else:
            now = self.store.job(rec.request_id)
            assert now is not None
            outcome = outcome_of(now, by="person")
        wait = run.wait
        if run.status != "waiting" or wait is None or wait.owner != rec.wait_owner or wait.resolution is not None:
            return  # the run that awaited the job adopted it already
        try:
            run.answer("delegate", outcome, owner=rec.wait_owner, action=action)
        except RunStateError:
            if action == "provide":
                raise  # a person's result must reach the run, or they must hear why not

    # -- runners ---------------------------------------------------------------------------------

    def admit(self, request_id: str, rec: JobRecord | None = None, *, deferred: bool = False, announce: bool = False) -> None:
        """QUEUED -> ADMITTED, then start the job where its runtime runs.

        In this process (a `task` runtime) the job's task moves it on: its first step loads the
        agent and records ADMITTED, PREPARING and RUNNING in one transaction (each its own event),
        so the job is RUNNING only once a task exists that a cancel can stop. `deferred` (a station
        whose park recorded `admission_mark`): that transaction is not made before the agent starts;
        the moves ride with its first observations, at most `observations.EVERY` later, or with its
        terminal (issue 27 item 4: one job transaction fewer per station). `announce`: tell the listeners
        of the job first (its rows rode in the park just written, `submit(ride=)`).
        """
        if announce:
            self._notify(request_id)
        rec = rec or self.store.job(request_id)
        assert rec is not None
        rt = self.runtime(rec.runtime)
        try:
            self.check_binding(rec)
        except AgentRuntimeError as exc:  # re-registered since its run admitted it: the job is not run elsewhere
            self.deliver(request_id, "FAILED", error=error_json(exc), by="admission")
            return
        except Exception:
            pass  # the agent does not load: its runner records that failure
        files = JobFiles(os.path.join(self.folder, request_id))
        worker: dict[str, Any] = {"admitted_by": process_identity()}  # who owns it until a runner reports
        with self._lock:
            self._done.setdefault(request_id, concurrent.futures.Future())
        if rt.runner == "task":
            self._runs_here.add(request_id)
            self._start(request_id, self._run_task(rec, rt, worker, deferred))
            return
        worker["folder"] = str(files.folder)
        if not self._move(request_id, "ADMITTED", worker=worker):
            return  # someone else admitted it
        self._start(request_id, self._run_worker(rec, rt, files))

    def _start(self, request_id: str, coro: Any) -> None:
        loop = lab_loop()

        def start() -> None:
            self._tasks[request_id] = loop.create_task(coro)

        if _on_loop_thread():
            start()
        else:
            ready = threading.Event()
            loop.call_soon_threadsafe(lambda: (start(), ready.set()))
            ready.wait()

    async def _run_task(self, rec: JobRecord, rt: Runtime, worker: dict[str, Any], deferred: bool = False) -> None:
        from .recorded_model import recording_job
        from .runtime import run_request

        rid = rec.request_id
        moves: list[Any] = [
            ("ADMITTED", allowed_from("ADMITTED"), False, None, {"worker": worker}),
            ("PREPARING", allowed_from("PREPARING"), False, None, {"worker": process_identity()}),
        ]
        seen = Observations(lambda held, items: self._observe(rid, held, items))
        try:
            try:
                agent = rt.load()
            except Exception as exc:
                if deferred:
                    self.deliver(rid, "FAILED", error=error_json(exc), admitted=moves)
                elif self.store.advance_job(rid, moves) == len(moves):
                    self.deliver(rid, "FAILED", error=error_json(exc))
                else:
                    await self._not_mine(rid)
                self._notify(rid)
                return
            moves.append(("RUNNING", allowed_from("RUNNING"), False, None, {}))
            if deferred:  # held from the agent's start, with its observations: its park says who started it
                seen = self._unrecorded[rid] = Observations(lambda held, items: self._observe(rid, held, items), moves)
            else:
                applied = self.store.advance_job(rid, moves)
                self._notify(rid)
                if applied < len(moves):  # someone else admitted it, or it was ended meanwhile
                    await self._not_mine(rid)
                    return
                seen = Observations(lambda held, items: self._observe(rid, held, items))  # held from the agent's start
            timeout = rec.request.get("timeout")
            try:
                with recording_job(agent, self.store, rec):  # its model requests recorded and replayed (docs/replay.md)
                    coro = run_request(agent, rec.request, seen.emit)
                    output, usage = await (asyncio.wait_for(coro, timeout) if timeout else coro)
            except TimeoutError:
                self._end(rid, "TIMED_OUT", seen, error={"message": f"the agent ran longer than {timeout} s"})
                return
            self._end(rid, "SUCCEEDED", seen, output=output, usage=usage)
        except asyncio.CancelledError:
            if rid not in self._cancelling and not self.store.closed:
                self._end(rid, "CANCELLED", seen, error={"message": "the agent task was cancelled"})
            raise
        except Exception as exc:
            if self.store.closed:  # the lab closed under the job: the next Lab() records it LOST
                log.warning("agent job %s ended after its lab closed; its outcome was not recorded", rid)
                return
            self._end(rid, "FAILED", seen, error=error_json(exc))
        finally:
            seen.take()  # nothing is recorded after the terminal (or after the lab closed)
            self._unrecorded.pop(rid, None)
            self._runs_here.discard(rid)
            self._tasks.pop(rid, None)

    def _end(self, rid: str, status: str, seen: Observations, **fields: Any) -> None:
        """The terminal of a job run here, with what it has not recorded yet (its admission, its observations)."""
        held, items = seen.take()
        self.deliver(rid, status, seen=items, admitted=held, **fields)

    def _observe(self, rid: str, held: list[Any], items: list[tuple[str, dict[str, Any]]]) -> None:
        """Record a running job's observations, after its admission's moves when those are still held."""
        self.store.advance_job(rid, held, observations=items, observed_after=len(held))
        self._notify(rid)

    def record_admission(self, rid: str) -> None:
        """Record now what job `rid`, started here, holds (its admission, its observations): before a cancel."""
        held = self._unrecorded.get(rid)
        if held is not None:
            held.flush()

    async def _not_mine(self, rid: str) -> None:
        """Job `rid` was not admitted here after all (another process did, or it ended): follow its row."""
        self._runs_here.discard(rid)
        await self._follow(rid)

    async def _run_worker(self, rec: JobRecord, rt: Runtime, files: JobFiles) -> None:
        rid = rec.request_id
        recording = shipped_recordings(self.store, rec)  # what its station may replay (docs/replay.md)
        files.write_json(files.request, {"request_id": rid, "target": rt.target, "request": rec.request, "recording": recording})
        try:  # forked from this store's warm fork server (lab/agents/workers.py)
            proc = start_worker(files, self.folder, lambda: self.store.closed)
        except OSError as exc:
            self.deliver(rid, "FAILED", error=error_json(exc))
            return
        self._procs[rid] = proc
        try:
            await self._watch(rec, files, proc)
            deadline = time.monotonic() + KILL_WAIT
            while proc.poll() is None and time.monotonic() < deadline:  # it exits once its result is written
                await asyncio.sleep(POLL)
        finally:
            self._tasks.pop(rid, None)
            self._procs.pop(rid, None)
            if proc.poll() is None:  # cancelled while it ran: it outlives this watch (never left unreaped)
                _orphans.append(proc)

    async def _watch(self, rec: JobRecord, files: JobFiles, proc: Any) -> None:
        """Follow a worker's folder: its transitions, messages and usage, then its result or its death."""
        rid = rec.request_id
        timeout = rec.request.get("timeout")
        deadline = time.monotonic() + timeout if timeout else None
        line = self._lines_ingested(rid)
        identity: dict[str, Any] | None = None
        while not self.store.closed:  # a closed lab stops watching; the next open adopts the result
            line = self._ingest(rid, files, line)
            result = files.read_json(files.result)
            if result is not None:
                self._ingest(rid, files, line)
                self._deliver_result(rid, result)
                return
            identity = identity or files.read_json(files.worker)
            dead = proc.poll() is not None if proc is not None else alive(identity) is False
            if dead:
                if rid in self._cancelling:
                    return  # a person's cancel killed it: the cancel records CANCELLED once it is gone
                if files.read_json(files.result) is not None:
                    continue  # it finished as it exited
                how = exit_description(proc)
                adopt_calls(self.store, rec, self.folder)  # the calls it made before it died: a retry replays them
                self.deliver(rid, "LOST", error={"message": f"the worker process ({how}) died without a result"}, by="watcher")
                return
            if deadline is not None and time.monotonic() > deadline:
                await self._contain(self.store.job(rid) or rec)
                adopt_calls(self.store, rec, self.folder)
                self.deliver(rid, "TIMED_OUT", error={"message": f"the agent ran longer than {timeout} s"})
                return
            await asyncio.sleep(POLL)

    def _deliver_result(self, rid: str, result: dict[str, Any]) -> None:
        now = self.store.job(rid)
        adopt_calls(self.store, now, self.folder)  # the calls its worker recorded, before its terminal (docs/replay.md)
        if now is not None and now.terminal and now.status == result.get("status") and now.output == result.get("output"):
            with self._lock:  # another process adopted this very result already: nothing new arrived
                done = self._done.get(rid)
            if done is not None and not done.done():
                done.set_result(None)
            return
        self.deliver(
            rid, result["status"], output=result.get("output"), error=result.get("error"),
            usage=result.get("usage"), by="worker",
        )  # fmt: skip

    def _lines_ingested(self, request_id: str) -> int:
        lines = [e.payload.get("line") for e in self.store.job_events(request_id) if "line" in e.payload]
        return max(lines) + 1 if lines else 0

    def _ingest(self, rid: str, files: JobFiles, start: int) -> int:
        lines = files.progress_lines(start)
        batch: list[tuple[str, dict[str, Any]]] = []
        for i, item in enumerate(lines, start):
            status = item.get("status")
            if status in ("PREPARING", "RUNNING"):
                if batch:
                    self._record_many(rid, batch)
                    batch = []
                now = self.store.job(rid)
                if now is None or now.status not in allowed_from(status):
                    continue  # recorded already (another process follows the same worker), or it ended
                extra = {"worker": {**(self.store.job(rid).worker or {}), **item["worker"]}} if "worker" in item else {}  # type: ignore[union-attr]
                self.store.transition_job(rid, status, allowed_from=allowed_from(status), payload={"line": i}, **extra)
                self._notify(rid)
            elif item.get("kind") in ("message", "usage"):
                batch.append((item["kind"], {**item["payload"], "line": i}))
        if batch:
            self._record_many(rid, batch)
        return start + len(lines)

    def __repr__(self) -> str:
        return f"<AgentBoard runtimes={sorted(self._runtimes)} jobs in flight={sorted(self._tasks)}>"


def _on_loop_thread() -> bool:
    try:
        return asyncio.get_running_loop() is lab_loop()
    except RuntimeError:
        return False


async def _on_lab_loop(coro: Any) -> Any:
    if _on_loop_thread():
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, lab_loop()))
