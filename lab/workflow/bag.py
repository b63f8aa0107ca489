"""The variable bag: the declared facts of a workflow session, schema-validated on every write.

Seed 004 "The variable bag": a workflow declares its variables (name, type, optional default);
the bag is seeded from those declarations, with `user_request` and the repository facts when
given. Every write, by whoever makes it (a checkpoint effect, a worker's outputs, a person
editing the state, the lab on resume), goes through `Bag.write`, which refuses an undeclared
name or a value of the wrong type and names the writer.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import BagError

__all__ = (
    "VarType",
    "VAR_TYPES",
    "Variable",
    "BUILTINS",
    "REPO_FACTS",
    "type_problem",
    "Bag",
    "seed",
    "repo_facts",
)

VarType = Literal["string", "number", "boolean", "array", "object"]
VAR_TYPES: tuple[VarType, ...] = ("string", "number", "boolean", "array", "object")

_MISSING: Any = object()


@dataclass(frozen=True, slots=True)
class Variable:
    """One declared variable: its name, type and optional default."""

    name: str
    type: VarType
    default: Any = _MISSING
    description: str = ""

    @property
    def has_default(self) -> bool:
        return self.default is not _MISSING

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        if self.has_default:
            out["default"] = self.default
        if self.description:
            out["description"] = self.description
        return out


REPO_FACTS: tuple[str, ...] = ("host_repo_path", "target_repo", "component_path", "is_monorepo")
"""The repository facts the seed names, seeded from a working directory."""

BUILTINS: dict[str, Variable] = {
    "user_request": Variable("user_request", "string", description="the request the session was opened with"),
    "host_repo_path": Variable(
        "host_repo_path", "string", description="the repository root holding the working directory"
    ),
    "target_repo": Variable(
        "target_repo", "string", description="the repository's name (its root folder's name)"
    ),
    "component_path": Variable(
        "component_path", "string", description="the working directory, relative to the root"
    ),
    "is_monorepo": Variable("is_monorepo", "boolean", description="the root holds more than one project"),
}
"""Variables every workflow has, declared or not: the server writes them (seed 004)."""


def type_problem(value: Any, type_: VarType) -> str | None:
    """Why `value` is not a JSON `type_` (None when it is). null is never a value of a type."""
    ok = {
        "string": isinstance(value, str),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "array": isinstance(value, list),
        "object": isinstance(value, dict) and all(isinstance(k, str) for k in value),
    }[type_]
    if ok:
        return None
    return f"expected a {type_}, got {_describe(value)}"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a Python {type(value).__name__}"


class Bag:
    """A working copy of a session's variables under its schema; `write` validates."""

    def __init__(self, schema: Mapping[str, Variable], values: Mapping[str, Any] | None = None):
        self.schema = schema
        self.values: dict[str, Any] = dict(values or {})

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def check(self, updates: Mapping[str, Any], *, by: str, allowed: frozenset[str] | None = None) -> None:
        """Refuse `updates` (all or nothing) naming every bad variable and the writer `by`."""
        if not isinstance(updates, Mapping):
            raise BagError(
                f"{by} must write a mapping of variable names to values, got {type(updates).__name__}"
            )
        bad: list[str] = []
        for name, value in updates.items():
            var = self.schema.get(name) if isinstance(name, str) else None
            if var is None:
                bad.append(
                    f"{name!r} is not a declared variable (declared: {', '.join(sorted(self.schema))})"
                )
            elif allowed is not None and name not in allowed:
                bad.append(
                    f"{name!r} is not among the variables this activity writes ({', '.join(sorted(allowed)) or 'none'}); "
                    "add it to the activity's variables.writes"
                )
            elif (why := type_problem(value, var.type)) is not None:
                bad.append(f"{name!r}: {why}")
        if bad:
            raise BagError(f"{by} wrote variables the bag's schema refuses: " + "; ".join(bad))

    def write(self, updates: Mapping[str, Any], *, by: str, allowed: frozenset[str] | None = None) -> None:
        """Validate, then apply `updates`; nothing is written when any of them is refused."""
        self.check(updates, by=by, allowed=allowed)
        self.values.update(updates)

    def validate(self, *, by: str) -> None:
        """Check every value already in the bag (a whole state written at once)."""
        self.check(self.values, by=by)


def seed(
    schema: Mapping[str, Variable],
    *,
    user_request: str | None = None,
    repo: Mapping[str, Any] | None = None,
    variables: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The bag a session opens with: declared defaults, `user_request`, repository facts, overrides."""
    bag = Bag(schema, {v.name: v.default for v in schema.values() if v.has_default})
    if user_request is not None:
        bag.write({"user_request": user_request}, by="the session's user_request")
    if repo is not None:
        bag.write(dict(repo), by="the repository facts")
    if variables:
        bag.write(dict(variables), by="the variables passed to start")
    return bag.values


def repo_facts(workdir: str | os.PathLike[str]) -> dict[str, Any]:
    """`host_repo_path`, `target_repo`, `component_path`, `is_monorepo` for a working directory.

    The root is git's top level (or the directory itself outside git). A root is a monorepo when
    more than one folder below it (two levels deep at most) holds a project manifest.
    """
    path = os.path.abspath(os.fspath(workdir))
    if not os.path.isdir(path):
        raise BagError(f"repository facts need a working directory; {path} is not a directory")
    try:
        root = subprocess.run(
            ["git", "-C", path, "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        root = path
    root = os.path.abspath(root or path)
    rel = os.path.relpath(path, root)
    return {
        "host_repo_path": root,
        "target_repo": os.path.basename(root),
        "component_path": "" if rel == "." else rel.replace(os.sep, "/"),
        "is_monorepo": len(_projects(root)) > 1,
    }


_MANIFESTS = ("pyproject.toml", "package.json", "Cargo.toml", "go.mod", "pom.xml")


def _projects(root: str) -> list[str]:
    found: list[str] = []
    for depth1 in sorted(os.scandir(root), key=lambda e: e.name) if os.path.isdir(root) else []:
        if not depth1.is_dir() or depth1.name.startswith("."):
            continue
        for d in [
            depth1.path,
            *(e.path for e in os.scandir(depth1.path) if e.is_dir() and not e.name.startswith(".")),
        ]:
            if any(os.path.isfile(os.path.join(d, m)) for m in _MANIFESTS):
                found.append(d)
    return found
