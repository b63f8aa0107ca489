"""Mermaid text of a `GraphSpec` (a `stateDiagram-v2`, as pydantic-graph draws), with an optional overlay.

Forks and joins are Mermaid's `<<fork>>` / `<<join>>` states and decisions `<<choice>>`, as
pydantic-graph's own `Graph.render()` writes them; those states draw as bars and diamonds with
no text, so their kind and run marks go in a note beside them.
"""

from __future__ import annotations

import re

from .dot import mark_line
from .overlay import Overlay
from .spec import END, START, GraphSpec, SpecNode

__all__ = ("to_mermaid",)

_SAFE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_CLASSES = {
    "gate": "fill:#fffaf0,stroke:#333,stroke-width:1.5px",
    "delegated": "fill:#eef7f1,stroke:#333,stroke-width:1.5px",
    "missing": "fill:#fff,stroke:#777,stroke-dasharray:5 3,color:#555",
    "current": "fill:#dbeafe,stroke:#0072B2,stroke-width:3px",
    "visited": "fill:#e5e7eb",
    "failed": "fill:#fde2d4,stroke:#D55E00,stroke-width:3px,stroke-dasharray:7 4",
    "parked": "fill:#fdf1d6,stroke:#E69F00,stroke-width:3px,stroke-dasharray:2 3",
}


_PSEUDO = {"map": "fork", "broadcast": "fork", "join": "join", "decision": "choice"}

_ENTITIES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", ":": "#58;", ";": "#59;", "\n": " "}


def _text(value: str) -> str:
    """Mermaid label text: quotes and markup characters as Mermaid entity codes."""
    return "".join(_ENTITIES.get(c, c) for c in value)


def _state(node: SpecNode, mid: str, marks: str) -> list[str]:
    """A node's declaration: a labelled state, or a fork/join/choice state with a note for its text."""
    pseudo = _PSEUDO.get(node.kind)
    if pseudo is None:
        label = node.label + (f" ({marks})" if marks else "")
        return [f'  state "{_text(label)}" as {mid}'] if label != mid else []
    note = " ".join(p for p in (node.label if node.label != mid else "", marks) if p)
    return [f"  state {mid} <<{pseudo}>>"] + ([f"  note right of {mid} : {_text(note)}"] if note else [])


def to_mermaid(spec: GraphSpec, overlay: Overlay | None = None) -> str:
    """`stateDiagram-v2` text: `[*]` is the start and the end; gates, missing nodes and marks as classes."""
    ids: dict[str, str] = {}
    lines = ["stateDiagram-v2"]
    classes: dict[str, list[str]] = {}
    for i, node in enumerate(spec.nodes):
        if node.kind in ("start", "end"):
            ids[node.id] = "[*]"
            continue
        mid = ids[node.id] = node.id if _SAFE.match(node.id) else f"n{i}"
        lines += _state(node, mid, mark_line(node, overlay).strip())
        if node.kind in _PSEUDO:
            continue
        if node.kind in ("gate", "delegated", "missing"):
            classes.setdefault(node.kind, []).append(mid)
        if overlay is not None:
            for cls in overlay.node_classes(node.id):
                name = cls.removeprefix("gl-")
                if name in _CLASSES:
                    classes.setdefault(name, []).append(mid)
    for e in spec.edges:
        if e.src == START and e.dst == END:
            continue
        label = e.label
        if overlay is not None and label:
            n = overlay.traversed.get((e.src, e.dst), 0)
            label = f"{label} ×{n}" if n > 1 else label
        lines.append(f"  {ids[e.src]} --> {ids[e.dst]}" + (f": {_text(label)}" if label else ""))
    for name, members in classes.items():
        lines.append(f"  classDef {name} {_CLASSES[name]}")
        lines.append(f"  class {','.join(dict.fromkeys(members))} {name}")
    return "\n".join(lines)
