"""Exit evaluation and step-manifest checks: pure functions of the definition and the bag.

Seed 004 "Exit evaluation": when an activity completes, its exits are tested in declaration
order against the current bag; the first whose `when` holds is taken, else the default. No
conversation, clock or randomness takes part, so the same bag always takes the same exit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .definition import Activity, Step
from .errors import ExpressionError, NoExitError
from .expressions import evaluate

__all__ = ("ExitTaken", "choose_exit", "StepReport", "check_manifest", "holds", "active_steps")


@dataclass(frozen=True, slots=True)
class ExitTaken:
    """The exit an activity took and why: its `when` held, it was the default, or a choice named it."""

    exit: str
    reason: str
    """`when`, `default` or `checkpoint`."""


def holds(when: str, bag: Mapping[str, Any], *, where: str) -> bool:
    """Evaluate a gate expression, naming where it sits if it cannot be evaluated."""
    try:
        return evaluate(when, bag)
    except ExpressionError as exc:
        raise exc.located(where) from None


def choose_exit(activity: Activity, bag: Mapping[str, Any]) -> ExitTaken:
    """The first exit (in declaration order) whose `when` holds, else the default, else `NoExitError`."""
    for exit_ in activity.exits:
        if exit_.when is not None and holds(exit_.when, bag, where=f"activity {activity.id} exit {exit_.id}"):
            return ExitTaken(exit_.id, "when")
    default = activity.default_exit
    if default is not None:
        return ExitTaken(default.id, "default")
    tested = ", ".join(f"{e.id} ({e.when})" for e in activity.exits) or "none"
    shown = {k: bag.get(k) for k in sorted(bag)}
    raise NoExitError(
        f"activity {activity.id} completed but none of its exits holds and it has no default exit "
        f"(tested in order: {tested}; the bag: {shown}); add `isDefault: true` to one exit, or fix "
        "the variables the exits read"
    )


@dataclass(frozen=True, slots=True)
class StepReport:
    """One entry of a step manifest: the step id and its output object."""

    step_id: str
    output: Mapping[str, Any]


def _reports(manifest: Sequence[Any]) -> tuple[list[StepReport], list[str]]:
    out: list[StepReport] = []
    warnings: list[str] = []
    for i, entry in enumerate(manifest):
        if isinstance(entry, StepReport):
            out.append(entry)
        elif isinstance(entry, Mapping) and isinstance(entry.get("step_id"), str):
            output = entry.get("output", {})
            if not isinstance(output, Mapping):
                warnings.append(f"manifest entry {i} ({entry['step_id']}): output must be a JSON object")
                output = {}
            out.append(StepReport(entry["step_id"], output))
        else:
            warnings.append(f"manifest entry {i} is not a {{step_id, output}} object: {entry!r}")
    return out, warnings


def active_steps(activity: Activity, bag: Mapping[str, Any]) -> tuple[str, ...]:
    """The top-level steps of `activity` to do on `bag`: every ungated one, and each gated one whose
    `when` holds (seed 004: "exit conditions and step gates branch on it for the rest of the run")."""
    return tuple(
        s.id for s in activity.steps if s.when is None or holds(s.when, bag, where=f"activity {activity.id} step {s.id}")
    )


def _gates_not_taken(activity: Activity, reported: set[str], bag: Mapping[str, Any]) -> list[str]:
    """A warning for each reported gated step whose gate did not hold on `bag` (or cannot be evaluated)."""
    out: list[str] = []
    for s in activity.steps:
        if s.when is None or s.id not in reported:
            continue
        try:
            held = holds(s.when, bag, where=f"activity {activity.id} step {s.id}")
        except ExpressionError as exc:
            out.append(f"step {s.id}'s gate cannot be evaluated: {exc}")
            continue
        if not held:
            out.append(f"step {s.id} is reported, but its gate `{s.when}` did not hold on the bag it was handed")
    return out


def check_manifest(activity: Activity, manifest: Sequence[Any] | None, bag: Mapping[str, Any] | None = None) -> list[str]:
    """Warnings (never errors) for a step manifest, as seed 004 "Step completion manifest" says.

    Every ungated top-level step present; declaration order preserved; non-empty outputs; every
    reported key an output id the step declares. Gated steps may be omitted; loop-body step ids
    are accepted but never required. With `bag` (the variables the activity was handed), a
    reported gated step whose gate did not hold on it is a warning too: the variant was not taken.
    """
    if not activity.steps:
        return []
    reports, warnings = _reports(manifest or [])
    if bag is not None:
        warnings += _gates_not_taken(activity, {r.step_id for r in reports}, bag)
    top = {s.id: (i, s) for i, s in enumerate(activity.steps)}
    body: dict[str, Step] = {}
    for s in activity.steps:
        _collect_body(s.body, body)
    reported = {r.step_id for r in reports}
    for s in activity.steps:
        if s.id not in reported and not s.gated:  # a gated step may be omitted, held or not
            warnings.append(f"step {s.id} is missing from the manifest (it is not gated, so it always runs)")
    last = -1
    for r in reports:
        step = top.get(r.step_id, (None, None))[1] or body.get(r.step_id)
        if step is None:
            warnings.append(f"step {r.step_id} is not a step of activity {activity.id}")
            continue
        if r.step_id in top:
            index = top[r.step_id][0]
            if index < last:
                warnings.append(
                    f"step {r.step_id} is reported after a step declared later (declaration order is not preserved)"
                )
            last = max(last, index)
        if not r.output:
            warnings.append(f"step {r.step_id} reported an empty output")
        unknown = [k for k in r.output if k not in step.outputs]
        if unknown:
            declared = ", ".join(step.outputs) or "none"
            warnings.append(
                f"step {r.step_id} reported output key(s) {unknown} its operation does not declare ({declared})"
            )
    return warnings


def _collect_body(steps: Sequence[Step], into: dict[str, Step]) -> None:
    for s in steps:
        into[s.id] = s
        _collect_body(s.body, into)
