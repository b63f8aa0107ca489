"""Field-by-field differences between two JSON states: pure functions, no store, no views.

Paths name where a value sits (`items[2].name`); each change is `changed`, `added` or
`removed`. Nested dicts recurse by key, lists by index (trailing items are added or removed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import Any, Literal

__all__ = ("Change", "StateDiff", "diff_json")

ChangeKind = Literal["changed", "added", "removed"]
_MISSING = object()


@dataclass(frozen=True, slots=True)
class Change:
    """One difference: where, what kind, and the values on each side (JSON)."""

    path: str
    kind: ChangeKind
    old: Any = None
    new: Any = None

    def __str__(self) -> str:
        if self.kind == "added":
            return f"+ {self.path}: {_show(self.new)}"
        if self.kind == "removed":
            return f"- {self.path}: {_show(self.old)}"
        return f"~ {self.path}: {_show(self.old)} -> {_show(self.new)}"


@dataclass(frozen=True)
class StateDiff:
    """The difference between two checkpoints' states; prints and displays as a table."""

    left: str
    right: str
    changes: tuple[Change, ...]

    @property
    def changed(self) -> list[Change]:
        return [c for c in self.changes if c.kind == "changed"]

    @property
    def added(self) -> list[Change]:
        return [c for c in self.changes if c.kind == "added"]

    @property
    def removed(self) -> list[Change]:
        return [c for c in self.changes if c.kind == "removed"]

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __len__(self) -> int:
        return len(self.changes)

    def to_json(self) -> list[dict[str, Any]]:
        return [{"path": c.path, "kind": c.kind, "old": c.old, "new": c.new} for c in self.changes]

    def __str__(self) -> str:
        head = f"diff {self.left} -> {self.right}"
        if not self.changes:
            return head + ": no differences"
        return "\n".join([head, *("  " + str(c) for c in self.changes)])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{escape(c.path)}</code></td><td>{escape(c.kind)}</td>"
            f"<td><code>{escape(_show(c.old)) if c.kind != 'added' else ''}</code></td>"
            f"<td><code>{escape(_show(c.new)) if c.kind != 'removed' else ''}</code></td></tr>"
            for c in self.changes
        )
        if not rows:
            rows = "<tr><td colspan='4'>no differences</td></tr>"
        return (
            f"<div><b>{escape(self.left)} → {escape(self.right)}</b><table>"
            "<tr><th>field</th><th>change</th><th>before</th><th>after</th></tr>"
            f"{rows}</table></div>"
        )


def diff_json(old: Any, new: Any, *, left: str = "a", right: str = "b") -> StateDiff:
    """Compare two JSON values (what the codec wrote) field by field."""
    out: list[Change] = []
    _walk(old, new, "", out)
    return StateDiff(left, right, tuple(out))


def _walk(old: Any, new: Any, path: str, out: list[Change]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(old) + [k for k in new if k not in old]:
            sub = f"{path}.{key}" if path else str(key)
            a, b = old.get(key, _MISSING), new.get(key, _MISSING)
            if a is _MISSING:
                out.append(Change(sub, "added", None, b))
            elif b is _MISSING:
                out.append(Change(sub, "removed", a, None))
            else:
                _walk(a, b, sub, out)
        return
    if isinstance(old, list) and isinstance(new, list):
        for i in range(max(len(old), len(new))):
            sub = f"{path}[{i}]"
            if i >= len(old):
                out.append(Change(sub, "added", None, new[i]))
            elif i >= len(new):
                out.append(Change(sub, "removed", old[i], None))
            else:
                _walk(old[i], new[i], sub, out)
        return
    if old != new or type(old) is not type(new):
        out.append(Change(path or "(state)", "changed", old, new))


def _show(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
