"""A workflow definition compiled onto the lab's engine: one station per activity.

Each activity becomes a `BaseNode` class declared in a `WorkflowGraph` (a `LabGraph`), so a
workflow run is an ordinary run of the serial engine: the same checkpoints, events, time
travel, store and widget. The state is a `WorkflowState`: the variable bag (validated against
the declared schema whenever it is written, also by `run.edit_state`) and the trail of exits
taken. An activity station:

1. asks its checkpoints in order (each parks the run with `interrupt()`; the answer is one of
   the checkpoint's choices, and the choice's effects set variables or name an exit outright);
2. otherwise calls its worker (a Python function registered for the activity), writes the
   variables it returns (only those the activity declares it writes) and checks its step
   manifest, warn-only: each warning becomes a `warning` event;
3. tests its exits in declaration order (`exits.choose_exit`) and returns the station its
   `exit_destinations` name, or End with the bag.

The return hint of every station lists its destinations with the exits' `when` expressions as
edge labels, so the drawing shows them; the default exit's edge is dashed.
"""

from __future__ import annotations

import inspect
import json
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.basenode import Edge

from ..edge_style import DASHED
from ..errors import ArgumentError, GraphDefinitionError, RunStateError, WaitError
from ..gates import ConsentRequired, Gate, current_station, interrupt, slot_child, warn
from ..graph import LabGraph
from ..manifest import source_fingerprint
from .bag import Bag, repo_facts, seed
from .definition import END, Activity, Checkpoint, Definition, load
from .errors import BagError, ChoiceError
from .exits import ExitTaken, active_steps, check_manifest, choose_exit, holds
from .policy import CONSENT_OPTIONS, retry_policy
from .state import TrailEntry, WorkflowState
from .trail import trail_at

if TYPE_CHECKING:
    from ..lab import Lab
    from ..run import Run
    from .session import SessionFolder

__all__ = (
    "WorkflowState",
    "TrailEntry",
    "ActivityContext",
    "ActivityResult",
    "WorkflowGraph",
    "workflow_graph",
)

Worker = Callable[["ActivityContext"], Any]


@dataclass(frozen=True)
class ActivityContext:
    """What a worker gets: the activity, a read-only view of the bag, and the run's deps."""

    activity: Activity
    variables: Mapping[str, Any]
    deps: Any = None

    @property
    def user_request(self) -> str | None:
        return self.variables.get("user_request")

    @property
    def steps(self) -> tuple[str, ...]:
        """The activity's top-level steps to do: the ungated ones and the gated ones whose `when` holds
        on the bag this worker was handed (seed 004: step gates branch on the activation variables)."""
        return active_steps(self.activity, self.variables)


@dataclass(frozen=True)
class ActivityResult:
    """What a worker returns: the variables it determined and its step manifest."""

    variables: Mapping[str, Any] = field(default_factory=dict)
    step_manifest: Sequence[Any] | None = None
    documents: Sequence[str] = ()
    """The documents the worker produced (paths, as it names them; seed 004: "The worker reports the
    documents it produced"): listed in the run's trail, session.json and the README's Progress table."""


class ActivityNode(BaseNode[WorkflowState, Any, dict[str, Any]]):
    """Base of the generated activity stations (never declared itself)."""

    __workflow__: ClassVar[WorkflowGraph]
    __activity__: ClassVar[str]

    async def run(self, ctx: GraphRunContext[WorkflowState, Any]) -> Any:  # replaced per activity
        return await _run_activity(self, ctx)


async def _run_template(self, ctx):  # type: ignore[no-untyped-def]
    return await _run_activity(self, ctx)


async def _run_activity(node: ActivityNode, ctx: GraphRunContext[WorkflowState, Any]) -> Any:
    wf = type(node).__workflow__
    definition = wf.definition
    act = definition.activities[type(node).__activity__]
    bag = Bag(definition.variables, ctx.state.variables)
    taken: ExitTaken | None = None
    documents: tuple[str, ...] = ()
    for cp in act.checkpoints:
        if cp.when is not None and not holds(
            cp.when, bag.values, where=f"activity {act.id} checkpoint {cp.id}"
        ):
            continue
        details = checkpoint_details(act, cp)
        answer = _consent(cp, details) if cp.consent else interrupt(details)
        option = cp.option(answer)
        if option is None:
            raise ChoiceError(
                f"checkpoint {cp.id} of activity {act.id} was answered {answer!r}, which is not one of its "
                f"choices {[o.id for o in cp.options]}"
            )
        bag.write(option.set_variables, by=f"checkpoint {cp.id} choice {option.id}")
        if option.exit is not None:
            taken = ExitTaken(option.exit, "checkpoint")
            break
    if taken is None:
        worker = wf.workers.get(act.id)
        manifest: Sequence[Any] | None = None
        handed: dict[str, Any] | None = None
        if worker is not None:
            handed = dict(bag.values)  # the bag the worker is handed: step gates are evaluated on it
            result = worker(ActivityContext(act, MappingProxyType(dict(handed)), ctx.deps))
            if inspect.isawaitable(result):
                result = await result
            outcome = _outcome(act, result)
            bag.write(outcome.variables, by=f"activity {act.id}'s worker", allowed=act.writes)
            manifest = outcome.step_manifest
            documents = outcome.documents
        for message in check_manifest(act, manifest, handed):
            warn(message, activity=act.id, check="step_manifest")
        taken = choose_exit(act, bag.values) if act.exits else None
    dest = definition.destination(act.id, taken.exit) if taken is not None else END
    ctx.state.variables = bag.values
    # the latest exit and the count, not the whole trail: a checkpoint costs the same at any length (wf.trail(run))
    ctx.state.taken += 1  # (first: the state never holds more entries than its count)
    ctx.state.last = TrailEntry(
        activity=act.id,
        exit=taken.exit if taken else None,
        reason=taken.reason if taken else "last",
        to=dest,
        documents=documents,
    )
    if dest == END:
        return End(dict(bag.values))
    return wf.station(dest)()


def _consent(cp: Checkpoint, details: dict[str, Any]) -> str:
    """A consent checkpoint's answer: `approve` or `deny`, from the verdict of `run.approve()` /
    `run.deny()`; parks the run at a consent wait until there is one.

    The verdict is kept in the station's answer log (as the option it chose), in the place of
    this call, so a later checkpoint of the same activity that parks keeps it: when the activity
    runs again, this checkpoint replays its answer, as an `interrupt()` checkpoint does.
    """
    station = current_station(f"checkpoint {cp.id}")
    if station.used < len(station.answers):
        answer = station.answers[station.used]
        if slot_child(answer) is not None:
            raise RunStateError(
                f"checkpoint {cp.id} is asked where the activity ran a subgraph before it parked; a worker runs its "
                "subgraphs after the activity's checkpoints, in the same order every time"
            )
        station.used += 1
        return answer
    if station.verdict is not None:
        answer = CONSENT_OPTIONS[0] if station.verdict.approved else CONSENT_OPTIONS[1]
        station.answers.append(answer)
        station.used += 1
        station.verdict = None  # consumed: a later consent checkpoint asks for its own
        return answer
    raise ConsentRequired(cp.prompt, details, prior=list(station.answers))


def checkpoint_details(act: Activity, cp: Checkpoint) -> dict[str, Any]:
    """What the wait shows: the prompt and the choices (the widget offers them as buttons)."""
    return {
        "workflow_checkpoint": cp.id,
        "activity": act.id,
        "prompt": cp.prompt,
        "choices": [{"id": o.id, "label": o.label} for o in cp.options],
    }


def _outcome(act: Activity, result: Any) -> ActivityResult:
    if result is None:
        return ActivityResult()
    if isinstance(result, Mapping):
        unknown = set(result) - {"variables", "step_manifest", "documents"}
        if unknown:
            raise BagError(
                f"activity {act.id}'s worker returned keys {sorted(unknown)}; return "
                "{'variables': {...}, 'step_manifest': [...], 'documents': [...]} or an ActivityResult"
            )
        result = ActivityResult(result.get("variables") or {}, result.get("step_manifest"), result.get("documents") or ())
    if not isinstance(result, ActivityResult):
        raise BagError(
            f"activity {act.id}'s worker returned a {type(result).__name__}; return an ActivityResult, "
            "a dict {'variables': {...}, 'step_manifest': [...], 'documents': [...]}, or None"
        )
    docs = result.documents
    if isinstance(docs, str) or not all(isinstance(d, str) and d for d in docs):
        raise BagError(f"activity {act.id}'s worker reported documents {docs!r}; report a list of their paths (non-empty strings)")
    return result if isinstance(docs, tuple) else ActivityResult(result.variables, result.step_manifest, tuple(docs))


# -- the graph ---------------------------------------------------------------------------------


class WorkflowGraph(LabGraph):
    """A compiled workflow: a `LabGraph` whose stations are its activities.

    `wf.start(user_request=...)` starts a run (the same `Run` as any graph's); `wf.choose(run,
    "choice")` answers a checkpoint; `wf.export(run, folder)` keeps a sealed session folder up to
    date; `wf.resume(folder)` continues from one.
    """

    definition: Definition
    workers: Mapping[str, Worker]

    def __init__(self, lab: Lab, definition: Definition, workers: Mapping[str, Worker]):
        state_type = type(
            f"{_pyname(definition.name)}State",
            (WorkflowState,),
            {"__module__": __name__, "bag_schema": definition.variables},
        )
        super().__init__(
            lab, definition.name, state_type=state_type, deps_type=Any, output_type=dict[str, Any]
        )
        self._key: tuple[Any, ...] = ()
        self._declared_policies: set[str] = set()
        self.sessions: dict[str, SessionFolder] = {}
        """The session folders kept current (`wf.export`, `wf.resume`), by run id."""
        self.root: str | None = None
        """The engineering root: when set, every session folder lives under it (lab/workflow/addressing.py)."""
        self.define(definition, workers)

    def define(self, definition: Definition, workers: Mapping[str, Worker]) -> None:
        """(Re)compile the workflow from `definition` with `workers` per activity (a re-run cell redefines it)."""
        unknown = sorted(set(workers) - set(definition.activities))
        if unknown:
            raise GraphDefinitionError(
                f"workers given for {unknown}, which are not activities of workflow {definition.name!r} "
                f"(activities: {list(definition.activities)})"
            )
        for act_id, fn in workers.items():
            if not callable(fn):
                raise GraphDefinitionError(f"the worker for activity {act_id!r} must be callable, got {fn!r}")
        key = (definition.digest, tuple(sorted((a, source_fingerprint(w)) for a, w in workers.items())))
        if key == self._key:
            return
        self.definition = definition
        self.workers = dict(workers)
        self.state_type.bag_schema = definition.variables  # type: ignore[attr-defined]
        classes = {a: _station_class(self, definition.activities[a]) for a in definition.activities}
        for act_id, cls in classes.items():
            cls.run = _run_for(self, definition.activities[act_id], classes)  # type: ignore[method-assign]
            if issubclass(cls, Gate):  # a gate's edges are read from `decide`
                cls.decide = cls.run  # type: ignore[method-assign]
        for old in [n for n in self._nodes if n not in classes]:
            del self._nodes[old]
        self._nodes.update(classes)
        self._declare_policies(definition)
        self._key = key
        self.changed()

    def _declare_policies(self, definition: Definition) -> None:
        """Give each activity the retry policy and time limit its definition declares (and take away
        those an earlier definition declared and this one does not; `wf.set_policy` stays otherwise)."""
        declared = self._declared_policies
        for act_id in declared - set(definition.activities):
            self.retry_policies.pop(act_id, None)
            self.node_timeouts.pop(act_id, None)
        now = set()
        for act in definition.activities.values():
            if act.retry is not None or act.timeout is not None or act.id in declared:
                retry = retry_policy(act.retry) if act.retry is not None else None
                self.set_policy(act.id, retry=retry, timeout=act.timeout, where=f"activity {act.id}")
            if act.retry is not None or act.timeout is not None:
                now.add(act.id)
        self._declared_policies = now

    def station(self, activity: str) -> type[ActivityNode]:
        return self._nodes[activity]  # type: ignore[return-value]

    # -- running --------------------------------------------------------------------------

    def start(  # type: ignore[override]
        self,
        node: Any = None,
        *,
        user_request: str | None = None,
        repo: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        variables: Mapping[str, Any] | None = None,
        at: str | None = None,
        folder: str | os.PathLike[str] | None = None,
        deps: Any = None,
        inputs: Mapping[str, Any] | None = None,
        state: Any = None,
        **options: Any,
    ) -> Run:
        """Start a run at the initial activity (or `at`), the bag seeded from the declarations.

        `user_request` and the repository facts of `repo` (a working directory, or a mapping of
        the facts) are written into the bag; `variables` override declared defaults. With
        `folder`, the run is exported there and the folder kept up to date.

        What any graph's start takes works too, so `run_subgraph(wf, ...)` runs a workflow as a
        child: `inputs` (a mapping of variables, as `variables`), `state` (a whole state: the bag
        and the trail so far, a `WorkflowState` or a mapping, instead of the seeded bag) and `node` (an
        instance of one of its activity stations, `wf.station("review")()`, as `at`).
        """
        entry = at or self.definition.initial
        if node is not None:
            node_id = type(node).get_node_id() if isinstance(node, BaseNode) else None
            if node_id not in self.definition.activities or type(node) is not self._nodes.get(node_id):
                raise GraphDefinitionError(
                    f"a workflow starts at an activity: use wf.start(at='activity_id') (or a station of this "
                    f"workflow, wf.station('activity_id')()), not {node!r}"
                )
            if at is not None and at != node_id:
                raise ArgumentError(f"wf.start got node {node_id} and at={at!r}; give one of them")
            entry = node_id
        if entry not in self.definition.activities:
            raise GraphDefinitionError(
                f"{entry!r} is not an activity of {self.name!r}: {list(self.definition.activities)}"
            )
        if inputs is not None:
            if not isinstance(inputs, Mapping):
                raise ArgumentError(
                    f"a workflow's inputs are its variables, a mapping such as {{'bug_count': 2}}; got {inputs!r}"
                )
            if variables is not None:
                raise ArgumentError("wf.start got both inputs= and variables= (the same thing); give one")
            variables = inputs
        if state is not None:
            given = [
                k
                for k, v in (("user_request", user_request), ("repo", repo), ("variables", variables))
                if v is not None
            ]
            if given:
                raise ArgumentError(
                    f"wf.start got state= and {', '.join(given)}: a state is the whole bag and trail; "
                    "put the variables in it, or leave state out"
                )
            start_state = self._state_from(state)
        else:
            facts = repo_facts(repo) if isinstance(repo, str | os.PathLike) else repo
            bag = seed(self.definition.variables, user_request=user_request, repo=facts, variables=variables)
            start_state = self.state_type(variables=bag)
        if folder is not None:
            from .session import planning_folder

            folder = planning_folder(self, folder)  # a folder outside the engineering root: refused before the run exists
        run = super().start(self.station(entry)(), state=start_state, deps=deps, **options)
        if folder is not None:
            self.export(run, folder)
        return run

    def _state_from(self, state: Any) -> WorkflowState:
        """`state` as this workflow's state, validated against its variables."""
        if isinstance(state, WorkflowState):
            state = state.model_dump()
        if not isinstance(state, Mapping):
            raise ArgumentError(
                f"a workflow's state is a WorkflowState or a mapping {{'variables': {{...}}, 'trail': [...]}} (the trail optional); got {state!r}"
            )
        return self.state_type.model_validate(dict(state))

    def choose(self, run: Run, choice: str) -> Any:
        """Answer the checkpoint `run` waits at with one of its choices (checked before it is recorded)."""
        wait = run.wait
        details = wait.details if wait is not None and isinstance(wait.details, dict) else {}
        choices = [c["id"] for c in details.get("choices", [])]
        if wait is None or run.status != "waiting" or "workflow_checkpoint" not in details:
            raise WaitError(
                f"run {run.id} is {run.status}, not waiting at a workflow checkpoint; there is nothing to choose"
            )
        if choice not in choices:
            raise ChoiceError(
                f"{choice!r} is not a choice of checkpoint {details['workflow_checkpoint']} "
                f"(activity {details.get('activity')}); its choices are {choices}"
            )
        if wait.kind == "consent":  # a consent checkpoint: its choices are approve and deny
            answer = run.approve if choice == CONSENT_OPTIONS[0] else run.deny
            answered = answer(owner=wait.owner)
        else:
            answered = run.resume_with(choice, owner=wait.owner)
        session = self.sessions.get(run.id)
        if session is not None:
            session.sync()
        return answered

    def bag(self, run: Run) -> dict[str, Any]:
        """The run's variable bag as of its head."""
        return dict(run.state.variables)

    def trail(self, run: Any, seq: int | None = None) -> list[TrailEntry]:
        """The exits taken on `run`'s branch up to checkpoint `seq` (its head by default), oldest first.

        `run` is a handle or a run id. Read from the checkpoints (each holds the exit its activity
        took), through a fork to the run it was forked from.
        """
        run_id = run if isinstance(run, str) else run.id
        if seq is None:
            seq = self.lab.store.get_run(run_id).head_seq if isinstance(run, str) else run.head
        return trail_at(self.lab.store, run_id, seq)

    # -- sessions ---------------------------------------------------------------------------

    def export(self, run: Run, folder: str | os.PathLike[str]) -> SessionFolder:
        """Write `run`'s session to `folder` (session.json, .session-token, README) and keep it current."""
        from .session import attach

        return attach(self, run, folder)

    def resume(
        self, folder: str | os.PathLike[str], *, user_request: str | None = None, deps: Any = None
    ) -> Run:
        """Continue the run a session folder holds (its seal verified first); see `session.resume`.
        `folder` may be the session's 6-character `session_index` instead (lab/workflow/addressing.py)."""
        from .session import resume

        return resume(self, folder, user_request=user_request, deps=deps)

    def __repr__(self) -> str:
        return f"<WorkflowGraph {self.name!r} activities={list(self._nodes)}>"


def _pyname(name: str) -> str:
    return (
        "".join(part.capitalize() for part in name.replace("-", "_").replace(".", "_").split("_") if part)
        or "Workflow"
    )


def _station_class(wf: WorkflowGraph, act: Activity) -> type[ActivityNode]:
    """A station class for `act`; its declared data (hashed into the manifest) is the activity's
    definition, its destinations and its worker's source."""
    worker = wf.workers.get(act.id)
    body = {
        "activity": wf.definition.raw_activity(act.id),
        "destinations": dict(wf.definition.destinations.get(act.id, {})),
        "variables": [v.to_json() for v in wf.definition.variables.values()],
        "digest": wf.definition.digest,
    }
    consent = any(cp.consent for cp in act.checkpoints)
    return type(
        act.id,
        (ActivityNode, Gate) if consent else (ActivityNode,),  # a gate: the manifest, drawing and consent re-entry see one
        {
            "__module__": "lab.workflow.stations",
            "__qualname__": act.id,
            "__workflow__": wf,
            "__activity__": act.id,
            "definition": json.dumps(body, sort_keys=True, default=str),
            "worker": source_fingerprint(worker) if worker is not None else "",
        },
    )


def _exit_label(act: Activity, exit_ids: list[str]) -> str:
    parts = []
    for exit_id in exit_ids:
        e = act.exit(exit_id)
        assert e is not None
        parts.append(f"{e.id}: {e.when}" if e.when is not None and not e.is_default else f"{e.id} (default)")
    return " / ".join(parts)


def _run_for(wf: WorkflowGraph, act: Activity, classes: Mapping[str, type]) -> Any:
    """The station's `run`, annotated with its destinations (edge labels: the exits' `when`)."""
    by_dest: dict[str, list[str]] = {}
    for e in act.exits:
        by_dest.setdefault(wf.definition.destination(act.id, e.id), []).append(e.id)
    if not act.exits:
        by_dest[END] = []
    targets: list[Any] = []
    default = act.default_exit
    for dest, exit_ids in by_dest.items():
        target: Any = End[dict[str, Any]] if dest == END else classes[dest]
        meta: list[Any] = [Edge(label=_exit_label(act, exit_ids))] if exit_ids else []
        if default is not None and default.id in exit_ids:
            meta.append(DASHED)
        targets.append(Annotated[target, *meta] if meta else target)  # type: ignore[valid-type]
    hint = typing.Union[tuple(targets)] if len(targets) > 1 else targets[0]  # noqa: UP007
    t = _run_template
    fn = types.FunctionType(t.__code__, t.__globals__, "run", t.__defaults__, t.__closure__)
    fn.__qualname__ = f"{act.id}.run"
    fn.__module__ = __name__
    fn.__annotations__ = {"return": hint}
    return fn


def workflow_graph(lab: Lab, source: Any, workers: Mapping[str, Worker] | None) -> WorkflowGraph:
    """Load, validate and compile `source` in `lab` (a second call with the same name redefines it)."""
    definition = load(source)
    existing = lab.graphs.get(definition.name)
    if isinstance(existing, WorkflowGraph):
        existing.define(definition, dict(workers or {}))
        return existing
    if existing is not None:
        raise GraphDefinitionError(
            f"the name {definition.name!r} is already a graph of this lab (not a workflow); rename the workflow"
        )
    wf = WorkflowGraph(lab, definition, dict(workers or {}))
    wf.build()  # refuse what cannot run now, not at the first step
    lab.add_graph(wf)
    return wf
