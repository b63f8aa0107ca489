"""Loading a workflow definition (`workflow.yaml` or a dict) and reporting every problem by path.

The file declares variables, activities (the variables each writes, its steps, checkpoints and
exits) and `exit_destinations` binding each activity's exits to the next activity or `end`.
Nothing is compiled until the whole file validates; `WorkflowDefinitionError.problems` lists
every problem found, each with its path in the file (`activities[1].exits[0].when`) and, for a
YAML file, its line. See docs/workflows.md for the format.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .bag import BUILTINS, VAR_TYPES, Variable, type_problem
from .errors import ExpressionError, Problem, WorkflowDefinitionError
from .expressions import Expr, names, parse
from .policy import CONSENT_OPTIONS, retry_problems, timeout_problem

__all__ = (
    "END",
    "Step",
    "Option",
    "Checkpoint",
    "Exit",
    "Activity",
    "Definition",
    "load",
)

END = "end"
"""The destination that ends the workflow."""

_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


@dataclass(frozen=True, slots=True)
class Step:
    """A step of an activity: its output ids, an optional gate, and loop-body steps."""

    id: str
    outputs: tuple[str, ...] = ()
    when: str | None = None
    body: tuple[Step, ...] = ()

    @property
    def gated(self) -> bool:
        return self.when is not None


@dataclass(frozen=True, slots=True)
class Option:
    """One choice at a checkpoint and its declared effects."""

    id: str
    label: str
    set_variables: Mapping[str, Any] = field(default_factory=dict)
    exit: str | None = None


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A question to a person inside an activity; each option carries its effects."""

    id: str
    prompt: str
    options: tuple[Option, ...]
    when: str | None = None
    consent: bool = False
    """A consent checkpoint: the run waits for `run.approve()` / `run.deny()` (options `approve`, `deny`)."""

    def option(self, option_id: Any) -> Option | None:
        return next((o for o in self.options if o.id == option_id), None)


@dataclass(frozen=True, slots=True)
class Exit:
    """An outcome of an activity: a gate expression, or the default."""

    id: str
    when: str | None
    is_default: bool = False
    expr: Expr | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Activity:
    id: str
    title: str
    writes: frozenset[str]
    steps: tuple[Step, ...]
    checkpoints: tuple[Checkpoint, ...]
    exits: tuple[Exit, ...]
    retry: Mapping[str, Any] | None = None
    """The activity's retry policy as declared (`lab.workflow.policy.retry_policy` builds the `Retry`)."""
    timeout: float | None = None
    """Seconds each try of the activity may take (`NodeTimeout`), or None."""

    def exit(self, exit_id: str) -> Exit | None:
        return next((e for e in self.exits if e.id == exit_id), None)

    @property
    def default_exit(self) -> Exit | None:
        return next((e for e in self.exits if e.is_default), None)


@dataclass(frozen=True)
class Definition:
    """A validated workflow: what the compiler turns into stations."""

    name: str
    description: str
    variables: Mapping[str, Variable]
    """Declared variables plus the built-ins (`user_request` and the repository facts)."""
    activities: Mapping[str, Activity]
    initial: str
    destinations: Mapping[str, Mapping[str, str]]
    """activity id -> exit id -> next activity id, or `end`."""
    raw: Mapping[str, Any]
    source: str

    @property
    def digest(self) -> str:
        """A hash of the definition's content (not of its file's formatting)."""
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def raw_activity(self, activity: str) -> Any:
        """The activity as written in the file (what its station's revision hashes)."""
        return next(
            (a for a in self.raw.get("activities", []) if isinstance(a, Mapping) and a.get("id") == activity),
            None,
        )

    def destination(self, activity: str, exit_id: str) -> str:
        return self.destinations[activity][exit_id]


# -- loading ---------------------------------------------------------------------------------


def load(source: str | os.PathLike[str] | Mapping[str, Any]) -> Definition:
    """Read and validate a definition from a YAML/JSON file path or a dict."""
    text: str | None = None
    if not isinstance(source, str | os.PathLike):
        data: Any = source
        where = "(dict)"
    else:
        where = os.fspath(source)
        try:
            with open(where, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise WorkflowDefinitionError(
                where, [Problem("", f"cannot read the file: {exc.strerror or exc}")]
            ) from None
        data = _parse_yaml(text, where)
    checker = _Checker()
    definition = checker.definition(data, where)
    if checker.problems:
        problems = checker.problems
        if text is not None:
            problems = _with_lines(problems, text)
        raise WorkflowDefinitionError(where, problems)
    assert definition is not None
    return definition


def _parse_yaml(text: str, where: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        reason = getattr(exc, "problem", None) or str(exc)
        raise WorkflowDefinitionError(where, [Problem(at, f"not valid YAML: {reason}")]) from None


class _Checker:
    """Walks the raw data once, collecting every problem with its path."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.variables: dict[str, Variable] = dict(BUILTINS)

    def bad(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def keys(
        self, data: Mapping[str, Any], path: str, allowed: set[str], required: set[str] = frozenset()
    ) -> None:  # type: ignore[assignment]
        for key in data:
            if key not in allowed:
                self.bad(_join(path, str(key)), f"unknown key (allowed here: {', '.join(sorted(allowed))})")
        for key in sorted(required - set(data)):
            self.bad(_join(path, key), "is required")

    def mapping(self, value: Any, path: str) -> Mapping[str, Any] | None:
        if isinstance(value, Mapping):
            return value
        self.bad(path, f"expected a mapping, got {_kind(value)}")
        return None

    def seq(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, list):
            return value
        self.bad(path, f"expected a list, got {_kind(value)}")
        return []

    def text(
        self, value: Any, path: str, *, pattern: re.Pattern[str] | None = None, what: str = ""
    ) -> str | None:
        if not isinstance(value, str) or not value:
            self.bad(path, f"expected a non-empty string, got {_kind(value)}")
            return None
        if pattern is not None and not pattern.match(value):
            self.bad(path, f"{value!r} is not a valid {what}")
            return None
        return value

    def expression(self, value: Any, path: str) -> str | None:
        if not isinstance(value, str):
            self.bad(path, f"expected a gate expression (a string), got {_kind(value)}")
            return None
        try:
            expr = parse(value)
        except ExpressionError as exc:
            self.bad(path, f"{exc.reason} at column {exc.column} of {value!r}")
            return None
        for n in names(expr):
            if n.name not in self.variables:
                self.bad(path, f"{n.name!r} at column {n.column} of {value!r} is not a declared variable")
        return value

    # -- the document --------------------------------------------------------------------------

    def definition(self, data: Any, where: str) -> Definition | None:
        top = self.mapping(data, "")
        if top is None:
            return None
        self.keys(
            top,
            "",
            {"name", "description", "version", "initial", "variables", "activities", "exit_destinations"},
            {"name", "activities"},
        )
        name = (
            self.text(
                top.get("name"),
                "name",
                pattern=re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"),
                what="workflow name (letters, digits, '_', '.', '-')",
            )
            if "name" in top
            else None
        )
        description = top.get("description", "")
        if not isinstance(description, str):
            self.bad("description", f"expected a string, got {_kind(description)}")
        for i, raw in enumerate(self.seq(top.get("variables"), "variables")):
            self.variable(raw, f"variables[{i}]")
        activities: dict[str, Activity] = {}
        raw_acts = self.seq(top.get("activities"), "activities")
        if "activities" in top and not raw_acts:
            self.bad("activities", "a workflow needs at least one activity")
        for i, raw in enumerate(raw_acts):
            act = self.activity(raw, f"activities[{i}]")
            if act is None:
                continue
            if act.id in activities:
                self.bad(f"activities[{i}].id", f"activity {act.id!r} is declared twice")
            activities[act.id] = act
        initial = top.get("initial", next(iter(activities), None))
        if "initial" in top and self.text(initial, "initial") and initial not in activities:
            self.bad("initial", f"{initial!r} is not an activity (activities: {', '.join(activities)})")
        destinations = self.destinations(top.get("exit_destinations"), activities)
        if self.problems or name is None or initial is None:
            return None
        return Definition(
            name=name,
            description=description,
            variables=self.variables,
            activities=activities,
            initial=initial,
            destinations=destinations,
            raw=json.loads(json.dumps(top, default=str)),
            source=where,
        )

    def variable(self, raw: Any, path: str) -> None:
        data = self.mapping(raw, path)
        if data is None:
            return
        self.keys(data, path, {"name", "type", "default", "description"}, {"name", "type"})
        name = (
            self.text(
                data.get("name"), f"{path}.name", pattern=_VAR, what="variable name (letters, digits, '_')"
            )
            if "name" in data
            else None
        )
        type_ = data.get("type")
        if "type" in data and type_ not in VAR_TYPES:
            self.bad(f"{path}.type", f"{type_!r} is not a type; use one of {', '.join(VAR_TYPES)}")
            type_ = None
        if name is None or type_ is None:
            return
        builtin = BUILTINS.get(name)
        if builtin is not None and builtin.type != type_:
            self.bad(
                f"{path}.type",
                f"{name!r} is a variable the lab writes, of type {builtin.type}; declare it as {builtin.type}",
            )
            return
        if name in self.variables and builtin is None:
            self.bad(f"{path}.name", f"variable {name!r} is declared twice")
            return
        if "default" in data:
            why = type_problem(data["default"], type_)
            if why is not None:  # still declared: later references to it are not problems too
                self.bad(f"{path}.default", f"the default of {name!r} ({type_}): {why}")
                self.variables[name] = Variable(name, type_)
                return
            self.variables[name] = Variable(name, type_, data["default"], str(data.get("description", "")))
        else:
            self.variables[name] = Variable(name, type_, description=str(data.get("description", "")))

    def activity(self, raw: Any, path: str) -> Activity | None:
        data = self.mapping(raw, path)
        if data is None:
            return None
        self.keys(
            data,
            path,
            {"id", "title", "description", "variables", "steps", "checkpoints", "exits", "retry", "timeout"},
            {"id"},
        )
        act_id = (
            self.text(
                data.get("id"),
                f"{path}.id",
                pattern=_ID,
                what="activity id (a letter, then letters, digits, '_')",
            )
            if "id" in data
            else None
        )
        if act_id == END:
            self.bad(f"{path}.id", f"{END!r} is reserved: it is the destination that ends the workflow")
            act_id = None
        writes = self.writes(data.get("variables"), f"{path}.variables")
        exits = self.exits(data.get("exits"), f"{path}.exits")
        steps = self.steps(data.get("steps"), f"{path}.steps", seen=set())
        exit_ids = {e.id for e in exits}
        checkpoints = []
        seen: set[str] = set()
        for i, raw_cp in enumerate(self.seq(data.get("checkpoints"), f"{path}.checkpoints")):
            cp = self.checkpoint(raw_cp, f"{path}.checkpoints[{i}]", exit_ids)
            if cp is not None:
                if cp.id in seen:
                    self.bad(
                        f"{path}.checkpoints[{i}].id",
                        f"checkpoint {cp.id!r} is declared twice in this activity",
                    )
                seen.add(cp.id)
                checkpoints.append(cp)
        retry = data.get("retry")
        for p, message in retry_problems(retry, f"{path}.retry") if "retry" in data else []:
            self.bad(p, message)
        timeout = data.get("timeout")
        if "timeout" in data and (why := timeout_problem(timeout)) is not None:
            self.bad(f"{path}.timeout", why)
        if act_id is None:
            return None
        title = data.get("title", act_id)
        return Activity(
            act_id,
            str(title),
            writes,
            tuple(steps),
            tuple(checkpoints),
            tuple(exits),
            dict(retry) if isinstance(retry, Mapping) else None,
            float(timeout) if timeout is not None else None,
        )

    def writes(self, raw: Any, path: str) -> frozenset[str]:
        if raw is None:
            return frozenset()
        data = self.mapping(raw, path)
        if data is None:
            return frozenset()
        self.keys(data, path, {"writes"})
        out = set()
        for i, name in enumerate(self.seq(data.get("writes"), f"{path}.writes")):
            if name not in self.variables:
                self.bad(
                    f"{path}.writes[{i}]", f"{name!r} is not a declared variable; declare it under variables"
                )
            else:
                out.add(name)
        return frozenset(out)

    def steps(self, raw: Any, path: str, *, seen: set[str]) -> list[Step]:
        out = []
        for i, item in enumerate(self.seq(raw, path)):
            p = f"{path}[{i}]"
            data = self.mapping(item, p)
            if data is None:
                continue
            self.keys(data, p, {"id", "outputs", "when", "condition", "loop", "description"}, {"id"})
            step_id = self.text(data.get("id"), f"{p}.id") if "id" in data else None
            if step_id is not None and step_id in seen:
                self.bad(f"{p}.id", f"step {step_id!r} is declared twice in this activity")
            seen.add(step_id or "")
            outputs = [
                o
                for j, o in enumerate(self.seq(data.get("outputs"), f"{p}.outputs"))
                if self.text(o, f"{p}.outputs[{j}]")
            ]
            gate_key = "when" if "when" in data else "condition" if "condition" in data else None
            when = self.expression(data[gate_key], f"{p}.{gate_key}") if gate_key else None
            body = self.steps(data.get("loop"), f"{p}.loop", seen=seen) if "loop" in data else []
            if step_id is not None:
                out.append(Step(step_id, tuple(outputs), when, tuple(body)))
        return out

    def checkpoint(self, raw: Any, path: str, exit_ids: set[str]) -> Checkpoint | None:
        data = self.mapping(raw, path)
        if data is None:
            return None
        consent = data.get("consent", False)
        if not isinstance(consent, bool):
            self.bad(f"{path}.consent", f"expected true or false, got {_kind(consent)}")
            consent = False
        required = {"id", "prompt"} if consent else {"id", "prompt", "options"}
        self.keys(data, path, {"id", "prompt", "when", "options", "consent"}, required)
        cp_id = self.text(data.get("id"), f"{path}.id") if "id" in data else None
        prompt = self.text(data.get("prompt"), f"{path}.prompt") if "prompt" in data else None
        when = self.expression(data["when"], f"{path}.when") if "when" in data else None
        options: list[Option] = []
        raw_opts = self.seq(data.get("options"), f"{path}.options")
        if "options" in data and not raw_opts:
            self.bad(f"{path}.options", "a checkpoint needs at least one option")
        for i, raw_opt in enumerate(raw_opts):
            opt = self.option(raw_opt, f"{path}.options[{i}]", exit_ids)
            if opt is not None:
                if any(o.id == opt.id for o in options):
                    self.bad(
                        f"{path}.options[{i}].id", f"option {opt.id!r} is declared twice in this checkpoint"
                    )
                if consent and opt.id not in CONSENT_OPTIONS:
                    self.bad(
                        f"{path}.options[{i}].id",
                        f"a consent checkpoint's options are {' and '.join(CONSENT_OPTIONS)} (what run.approve() "
                        f"and run.deny() answer), not {opt.id!r}",
                    )
                options.append(opt)
        if consent:  # an option left out has no effects
            given = {o.id for o in options}
            options += [Option(o, o.capitalize()) for o in CONSENT_OPTIONS if o not in given]
            options.sort(key=lambda o: CONSENT_OPTIONS.index(o.id) if o.id in CONSENT_OPTIONS else 0)
        if cp_id is None or prompt is None:
            return None
        return Checkpoint(cp_id, prompt, tuple(options), when, consent)

    def option(self, raw: Any, path: str, exit_ids: set[str]) -> Option | None:
        data = self.mapping(raw, path)
        if data is None:
            return None
        self.keys(data, path, {"id", "label", "effects"}, {"id"})
        opt_id = self.text(data.get("id"), f"{path}.id") if "id" in data else None
        label = data.get("label", opt_id)
        effects = self.mapping(data["effects"], f"{path}.effects") if "effects" in data else {}
        sets: dict[str, Any] = {}
        exit_id = None
        if effects:
            self.keys(effects, f"{path}.effects", {"setVariable", "exit"})
            raw_sets = (
                self.mapping(effects["setVariable"], f"{path}.effects.setVariable")
                if "setVariable" in effects
                else {}
            )
            for name, value in (raw_sets or {}).items():
                p = f"{path}.effects.setVariable.{name}"
                var = self.variables.get(name)
                if var is None:
                    self.bad(p, f"{name!r} is not a declared variable")
                elif (why := type_problem(value, var.type)) is not None:
                    self.bad(p, f"{name!r} is a {var.type}: {why}")
                else:
                    sets[name] = value
            if "exit" in effects:
                exit_id = effects["exit"]
                if exit_id not in exit_ids:
                    self.bad(
                        f"{path}.effects.exit",
                        f"{exit_id!r} is not an exit of this activity (exits: {', '.join(sorted(exit_ids)) or 'none'})",
                    )
        if opt_id is None:
            return None
        return Option(opt_id, str(label), sets, exit_id)

    def exits(self, raw: Any, path: str) -> list[Exit]:
        out: list[Exit] = []
        defaults = []
        for i, item in enumerate(self.seq(raw, path)):
            p = f"{path}[{i}]"
            data = self.mapping(item, p)
            if data is None:
                continue
            self.keys(data, p, {"id", "when", "isDefault", "description"}, {"id"})
            exit_id = (
                self.text(data.get("id"), f"{p}.id", pattern=_ID, what="exit id") if "id" in data else None
            )
            is_default = data.get("isDefault", False)
            if not isinstance(is_default, bool):
                self.bad(f"{p}.isDefault", f"expected true or false, got {_kind(is_default)}")
                is_default = False
            when = self.expression(data["when"], f"{p}.when") if "when" in data else None
            if "when" not in data and not is_default:
                self.bad(p, "an exit needs a `when` expression, or `isDefault: true`")
            if is_default:
                defaults.append(p)
            if exit_id is not None:
                if any(e.id == exit_id for e in out):
                    self.bad(f"{p}.id", f"exit {exit_id!r} is declared twice in this activity")
                out.append(Exit(exit_id, when, is_default, parse(when) if when is not None else None))
        for p in defaults[1:]:
            self.bad(
                f"{p}.isDefault", f"an activity has one default exit; {defaults[0]} is already the default"
            )
        return out

    def destinations(self, raw: Any, activities: Mapping[str, Activity]) -> dict[str, dict[str, str]]:
        data = self.mapping(raw, "exit_destinations") if raw is not None else {}
        data = data or {}
        out: dict[str, dict[str, str]] = {}
        for act_id in data:
            if act_id not in activities:
                self.bad(f"exit_destinations.{act_id}", f"{act_id!r} is not an activity")
        for act_id, act in activities.items():
            path = f"exit_destinations.{act_id}"
            binding = data.get(act_id)
            if binding is None:
                if act.exits:
                    self.bad(
                        path, f"activity {act_id!r} has exits {[e.id for e in act.exits]} but no destinations"
                    )
                out[act_id] = {}
                continue
            binding = self.mapping(binding, path) or {}
            out[act_id] = {}
            for exit_id, dest in binding.items():
                if act.exit(exit_id) is None:
                    self.bad(f"{path}.{exit_id}", f"{exit_id!r} is not an exit of {act_id!r}")
                elif dest != END and dest not in activities:
                    self.bad(f"{path}.{exit_id}", f"destination {dest!r} is neither an activity nor {END!r}")
                else:
                    out[act_id][exit_id] = dest
            for e in act.exits:
                if e.id not in binding:
                    self.bad(f"{path}.{e.id}", f"exit {e.id!r} of {act_id!r} has no destination")
        return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), f"a {type(value).__name__}")


# -- line numbers ----------------------------------------------------------------------------

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _with_lines(problems: list[Problem], text: str) -> list[Problem]:
    """Each problem's path with the YAML line it points at (`activities[0].id (line 12)`)."""
    import yaml

    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return problems
    out = []
    for p in problems:
        line = _line(root, p.path)
        out.append(Problem(f"{p.path} (line {line})", p.message) if line is not None and p.path else p)
    return out


def _line(node: Any, path: str) -> int | None:
    import yaml

    best = node.start_mark.line + 1 if node is not None else None
    for key, index in _PART.findall(path):
        if isinstance(node, yaml.MappingNode) and key:
            match = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
            if match is None:
                return best
            node = match
        elif isinstance(node, yaml.SequenceNode) and index:
            i = int(index)
            if i >= len(node.value):
                return best
            node = node.value[i]
        else:
            return best
        best = node.start_mark.line + 1
    return best
