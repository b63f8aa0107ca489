"""`lab.runs()`: the stored runs as a list of `RunRecord` that displays as a table.

A run left `running` by a process that is gone (a kernel that died or was restarted) shows as
`interrupted`, as `python -m lab runs` shows it (issue 25 item 4): its record says `running`
until a process resumes it, but nothing runs it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from html import escape

from .records import RunRecord

__all__ = ("RunList", "STATUS_MARK")

STATUS_MARK = {
    "created": "○",
    "running": "▶",
    "waiting": "⏸",
    "queued": "⏵",
    "done": "✔",
    "failed": "✖",
    "cancelled": "⊘",
    "interrupted": "⚠",
}
HEADERS = ("run", "graph", "status", "head", "started", "forked from")
_CELL = "style='text-align:left;padding:0 .8em 0 0;vertical-align:top'"


class RunList(list[RunRecord]):
    """Runs, oldest first: a list of `RunRecord` that a notebook shows as a table."""

    @classmethod
    def read(
        cls, records: Iterable[RunRecord], *, abandoned: Callable[[str], bool], status: str | None = None
    ) -> RunList:
        """`records` with a `running` run no live process runs shown `interrupted` (`abandoned(run_id)`
        says so); `status` keeps only the runs with that status as shown."""
        out = []
        for r in records:
            if r.status == "running" and abandoned(r.run_id):
                r = dataclasses.replace(r, status="interrupted")
            if status is None or r.status == status:
                out.append(r)
        return cls(out)

    def rows(self) -> list[tuple[str, ...]]:
        return [_row(r) for r in self]

    def _repr_html_(self) -> str:
        head = "".join(f"<th {_CELL}>{escape(h)}</th>" for h in HEADERS)
        body = "".join(
            "<tr>" + "".join(f"<td {_CELL}><code>{escape(v)}</code></td>" if v else f"<td {_CELL}></td>" for v in row) + "</tr>"
            for row in self.rows()
        ) or f"<tr><td colspan='{len(HEADERS)}'><i>none</i></td></tr>"
        return f"<div><b>{len(self)} runs</b><table class='graphlab-table'><tr>{head}</tr>{body}</table></div>"

    def __repr__(self) -> str:
        rows = self.rows()
        widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(HEADERS)]
        lines = [f"{len(self)} runs", "  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)).rstrip()]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        if not rows:
            lines.append("  (none)")
        return "\n".join(lines)

    __str__ = __repr__


def _row(r: RunRecord) -> tuple[str, ...]:
    return (
        r.run_id,
        f"{r.graph_key}@{r.revision}",
        f"{STATUS_MARK.get(r.status, '')} {r.status}".strip(),
        "" if r.head_seq is None else str(r.head_seq),
        r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        f"{r.parent_run_id}@{r.parent_seq}" if r.parent_run_id else "",
    )
