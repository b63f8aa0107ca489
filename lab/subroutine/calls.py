"""Child calls (seed 000): a Subroutine call in this process, a Workflow call in a separate one.

Both start a child invocation with its own node-local and feature state and return only its
output. A call is durable: its key is the parent's head checkpoint, the next checkpoint number
the parent will write (so a rewound branch that wrote on calls afresh), the calling node and the
call's number within the visit. The parent records a `call` event naming the child run (in-process) or the child's store
(separate process) before the child runs; when the visit is evaluated again (a retry, a resume
after the parent's process died), the same key finds the same child and continues it instead of
starting another. Only the visit's returned Success commits the call node's candidate state.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import tempfile
import weakref
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from ..current import current_run, note_run
from ..errors import RunStateError
from ..gates import station_context
from ..graph import LabGraph
from .definition import Definition
from .errors import ChildCallError, SubroutineDefinitionError

if TYPE_CHECKING:
    from ..run import Run
    from .compile import SubroutineGraph
    from .context import VisitContext

__all__ = ("Subroutine", "Workflow", "invoke", "resolve_target")


class Subroutine:
    """A Subroutine call target: the child runs in the parent's process (`context.invoke(Subroutine(child), x)`)."""

    def __init__(self, child: Any):
        self.child = child

    def __repr__(self) -> str:
        return f"Subroutine({getattr(self.child, 'name', self.child)!r})"


class Workflow:
    """A Workflow call target: the child runs in a separate process (`python -m lab.subroutine.worker`).

    `child` is a `Definition` kept in a module (the child process imports it), a subroutine
    compiled from one, or the text `"module:attribute"`. The child keeps its run in its own store
    file beside the parent's (`<store>.children/<parent run>/<call key>.duckdb`), or under `store`.
    """

    def __init__(self, child: Any, *, store: str | os.PathLike[str] | None = None):
        if isinstance(child, str):
            if ":" not in child:
                raise SubroutineDefinitionError(f"Workflow({child!r}): name the child as 'module:attribute'")
            self.target = child
        else:
            definition = getattr(child, "definition", child)
            if not isinstance(definition, Definition):
                raise SubroutineDefinitionError(
                    f"Workflow({child!r}): pass a subroutine Definition kept in a module, or 'module:attribute'"
                )
            self.target = _target_of(definition)
        self.store = os.fspath(store) if store is not None else None

    def definition(self) -> Definition:
        return resolve_target(self.target)

    def __repr__(self) -> str:
        return f"Workflow({self.target!r})"


def _target_of(definition: Definition) -> str:
    module = sys.modules.get(definition.module)
    if definition.module == "__main__" or module is None:
        raise SubroutineDefinitionError(
            f"Workflow({definition.name!r}): a Workflow call runs the child in another process, which imports it; "
            f"this definition lives in {definition.module!r}. Declare it with `from lab.subroutine import define` in a "
            "module (a .py file) and import it from there"
        )
    for attr, value in vars(module).items():
        if value is definition or getattr(value, "definition", None) is definition:
            return f"{definition.module}:{attr}"
    raise SubroutineDefinitionError(
        f"Workflow({definition.name!r}): module {definition.module} has no attribute holding this definition; "
        "assign it to a module-level name"
    )


def resolve_target(target: str) -> Definition:
    """The `Definition` named by `"module:attribute"` (an attribute holding a definition, a subroutine, or a function returning one)."""
    module_name, _, attr = target.partition(":")
    try:
        value = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise SubroutineDefinitionError(f"cannot import the Workflow child {target!r}: {exc}") from exc
    if callable(value) and not isinstance(value, Definition) and not hasattr(value, "definition"):
        value = value()
    definition = getattr(value, "definition", value)
    if not isinstance(definition, Definition):
        raise SubroutineDefinitionError(
            f"the Workflow child {target!r} is {value!r}, not a subroutine definition"
        )
    return definition


# -- invoking ----------------------------------------------------------------------------------


async def invoke(context: VisitContext, child: Any, input: Any, *, params: Any, index: int) -> Any:
    station = station_context.get()
    run: Run | None = station.run if station is not None else None
    if run is None:
        raise RunStateError(
            "context.invoke() is called inside a visit while a lab run steps it (run.step() / run.run())"
        )
    key = f"{run.head}.{run.next_checkpoint}.{context.node}.{index}"
    if isinstance(child, Workflow):
        return await _call_workflow(run, context.node, child, input, params, key)
    graph = child.child if isinstance(child, Subroutine) else child
    if isinstance(graph, Definition):
        graph = run.lab.subroutine(graph)
    if not _is_subroutine(graph):
        raise SubroutineDefinitionError(
            f"context.invoke({child!r}): the child is a subroutine (lab.subroutine(...)), Subroutine(child) or Workflow(child)"
        )
    return await _call_subroutine(run, context.node, graph, input, params, key)


def _is_subroutine(graph: Any) -> bool:
    """Whether `graph` is a subroutine's graph (`lab.subroutine(...)`): a lab graph compiled from a
    subroutine `Definition` (asked so, not by its class, because lab.subroutine.compile imports this module)."""
    return isinstance(graph, LabGraph) and isinstance(getattr(graph, "definition", None), Definition)


_known: weakref.WeakKeyDictionary[Run, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()
"""The `call` events of each run handle, read from the store once per process and kept current
here (a store read folds the journal: too slow for every call)."""


def fresh_run(run: Run) -> None:
    """A run just started in this process has no `call` events in the store: never read them."""
    _known[run] = {}


def _prior(run: Run, key: str) -> dict[str, Any] | None:
    known = _known.get(run)
    if known is None:
        known = _known[run] = {}
        for e in run.lab.store.events(run.id, kind="call"):
            known.setdefault(e.payload.get("key", ""), e.payload)
    return known.get(key)


def _record(run: Run, node: str, payload: dict[str, Any]) -> None:
    """A `call` event on the parent, written through before the child runs (the durable link)."""
    run.record_event("call", node_id=node, payload=payload)
    _known.setdefault(run, {}).setdefault(payload["key"], payload)


async def _call_subroutine(
    run: Run, node: str, graph: SubroutineGraph, input: Any, params: Any, key: str
) -> Any:
    shown = current_run()  # a child run must not become the notebook's current run
    try:
        prior = _prior(run, key)
        if prior is not None:
            child = run.lab.resume(prior["child_run"], deps=run.deps)
            if child.status == "failed":
                await child.aretry()
        else:
            child = graph.start(input, params=params, deps=run.deps, durability=run.durability)
            _record(
                run,
                node,
                {"key": key, "call": "subroutine", "child_run": child.id, "child_graph": graph.name},
            )
        if child.status in ("created", "running", "queued"):
            await child.arun()
    finally:
        note_run(shown)
    if child.status != "done":
        raise ChildCallError(_unfinished(child.id, graph.name, child.status, child.error))
    return child.output


def _unfinished(child_id: str, name: str, status: str, error: Any) -> str:
    why = f": {(error or {}).get('type', '')}: {(error or {}).get('message', '')}" if error else ""
    return (
        f"child invocation {child_id} of {name!r} ended {status}{why}; fix or answer the child, then retry this "
        "run: the same call continues the same child"
    )


def child_store(run: Run, key: str, workflow: Workflow) -> str:
    """Where a Workflow call's child keeps its run: one store file per call, named by the call's key."""
    if workflow.store is not None:
        root = workflow.store
    elif run.lab.path == ":memory:" or "://" in run.lab.path:  # in memory, or a PostgreSQL store
        root = os.path.join(tempfile.gettempdir(), "graphlab-children")
    else:
        root = run.lab.path + ".children"
    folder = os.path.join(root, run.id)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{key}.duckdb")


async def _call_workflow(run: Run, node: str, workflow: Workflow, input: Any, params: Any, key: str) -> Any:
    definition = workflow.definition()
    store = child_store(run, key, workflow)
    prior = _prior(run, key)
    if prior is None:
        _record(run, node, {"key": key, "call": "workflow", "target": workflow.target, "store": store})
    request = {
        "input": TypeAdapter(definition.input_type).dump_python(input, mode="json"),
        "params": None
        if params is None
        else TypeAdapter(definition.params_type).dump_python(params, mode="json"),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lab.subroutine.worker", "--store", store, "--target", workflow.target,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        cwd=os.getcwd(), env=_child_env(),
    )  # fmt: skip
    try:
        out, err = await proc.communicate(json.dumps(request).encode())
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
        raise
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        result = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        result = {}
    if proc.returncode != 0 or result.get("status") != "done":
        tail = err.decode(errors="replace").strip().splitlines()[-5:]
        if result:
            raise ChildCallError(
                _unfinished(
                    result.get("run_id", "?"), definition.name, result.get("status"), result.get("error")
                )
                + f" (its store: {store})"
            )
        raise ChildCallError(
            f"the Workflow child {workflow.target} (process exit {proc.returncode}) returned no result; its "
            f"last words: {' | '.join(tail) or '(nothing)'}"
        )
    return TypeAdapter(definition.output_type).validate_python(result["output"])


def _child_env() -> dict[str, str]:
    """The parent's import path, so the child imports what the parent imported (a notebook's folder too)."""
    env = dict(os.environ)
    prefixes = {sys.prefix, sys.base_prefix}
    paths = [os.getcwd()] + [
        os.path.abspath(p)
        for p in sys.path
        if p and os.path.isdir(p) and not any(os.path.abspath(p).startswith(x) for x in prefixes)
    ]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env
