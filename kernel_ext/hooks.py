"""Cell hooks: notice a cell that renamed a node class, so the old node does not linger.

Re-running a cell that declares `@g.node class Inc` replaces `Inc` (same node id): the
decorator does that. The same holds for every declaration a graph keeps by name: `@g.step`
functions and `g.join(...)` by node id, `g.add(...)` edges by their key (sources and path), so
a cell that changes `g.edge_from(a).to(b)` into `.to(c)` drops the `a -> b` edge it added
before, exactly as a renamed class drops its old node. Renaming the class in that cell (`class Increment`) declares a *new*
node id, and without help the old `Inc` would stay in the graph as a station nobody defines.
With the extension loaded, the watcher remembers which node ids each notebook cell declared
(by the cell's id, which Jupyter sends with every execution). When the same cell runs again,
succeeds, and declares into the same graph without re-declaring a node it declared last time
(and no other cell has re-declared that node since), that node is removed from the graph and
the cell prints a note on stderr naming it, the nodes that replaced it, and any node whose
return hint still names it. The graph's revision moves on at its next build; runs already
started stay pinned to their revision.

A cell whose id is unknown (a terminal IPython sends none) is not tracked: call
`g.remove("Inc")` yourself. A node whose return hint names a node not declared yet is fine
here: hints are read only when the graph is built (shown, started or run).
"""

from __future__ import annotations

import re
import sys
from typing import Any

import lab.lab as lab_module
from lab import Lab, LabGraph

from .session import Session

__all__ = ("CellWatcher",)


class CellWatcher:
    """`pre_run_cell` / `post_run_cell` callbacks; one per loaded extension."""

    def __init__(self, session: Session):
        self.session = session
        self._before: dict[LabGraph, dict[str, Any]] = {}
        self._labs: list[Lab] = []
        self._declared: dict[tuple[LabGraph, str], dict[str, Any]] = {}

    def _watched_labs(self) -> list[Lab]:
        labs = [lab for lab in (self.session.opened, lab_module.current_lab()) if lab is not None]
        return [lab for i, lab in enumerate(labs) if lab not in labs[:i]]

    def pre_run_cell(self, info: Any) -> None:
        self._labs = self._watched_labs()
        self._before = {g: g.declarations() for lab in self._labs for g in _declared_graphs(lab)}

    def post_run_cell(self, result: Any) -> None:
        changed = self.session.note_change()
        if changed:
            print(changed)
        cell_id = getattr(getattr(result, "info", None), "cell_id", None)
        if cell_id is None or not getattr(result, "success", False):
            return
        labs = self._labs + [lab for lab in self._watched_labs() if lab not in self._labs]
        for lab in labs:
            for g in _declared_graphs(lab):
                before = self._before.get(g, {})
                declared = {key: obj for key, obj in g.declarations().items() if before.get(key) is not obj}
                if declared:
                    self._settle(g, cell_id, declared)

    def _settle(self, g: LabGraph, cell_id: str, declared: dict[str, Any]) -> None:
        previous = self._declared.get((g, cell_id), {})
        now = g.declarations()
        stale = [key for key, obj in previous.items() if key not in declared and now.get(key) is obj]
        self._declared[(g, cell_id)] = declared
        for nid in stale:
            g.remove(nid)
        if stale:
            print(_message(g, stale, sorted(declared)), file=sys.stderr)

    def forget(self) -> None:
        self._before.clear()
        self._declared.clear()
        self._labs = []


def _message(g: LabGraph, stale: list[str], declared: list[str]) -> str:
    old = ", ".join(stale)
    lines = [
        f"graph {g.name!r}: this cell used to declare {old} and now declares {', '.join(declared)}, "
        f"so {old} (renamed or deleted here) was removed from the graph."
    ]
    for nid in stale:
        users = [other for other, cls in g.nodes.items() if _hint_names(cls, nid)]
        if users:
            lines.append(
                f"  {', '.join(users)} still return(s) {nid} in the run() return hint: update the hint before running."
            )
        edges = [key for key in g.edges if re.search(rf"(?<![\w]){re.escape(nid)}(?![\w])", key)]
        if edges and not nid.startswith("edge "):
            lines.append(f"  the edge(s) {'; '.join(edges)} still name {nid}: change or g.remove('edge ...') them.")
    names = list(g.declarations())
    lines.append(f"  Declared {'now' if g.edges or g.steps or g.joins else 'nodes now'}: {', '.join(names) or 'none'}.")
    return "\n".join(lines)


def _hint_names(cls: type, node_id: str) -> bool:
    raw = getattr(getattr(cls, "run", None), "__annotations__", {}).get("return")
    if raw is None:
        return False
    text = raw if isinstance(raw, str) else repr(raw)
    return re.search(rf"(?<![\w.]){re.escape(node_id)}\b|\.{re.escape(node_id)}\b", text) is not None


def _declared_graphs(lab: Lab) -> list[LabGraph]:
    """Graphs declared cell by cell; an adopted native graph has no cells to watch."""
    return [g for g in lab.graphs.values() if isinstance(g, LabGraph)]
