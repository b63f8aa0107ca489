"""The batch progress bar: how many runs of a batch are done, failed, waiting or still to go.

Fed counts by `Batch.run` (lab.batch); it reads nothing itself, so it holds no SQL.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

_ORDER = ("done", "failed", "waiting", "queued", "running", "interrupted", "created", "cancelled")


class BatchProgress(widgets.VBox):
    """A progress bar and a one-line tally: `done 12 · failed 1 · waiting 2 · to go 5`."""

    def __init__(self, *, total: int, title: str):
        self.total = total
        self.bar = widgets.IntProgress(value=0, min=0, max=max(total, 1), description="", bar_style="info")
        self.label = widgets.HTML(value=f"<b>{html.escape(title)}</b>")
        self.tally = widgets.HTML(value="")
        self.counts: dict[str, int] = {}
        super().__init__([self.label, self.bar, self.tally])

    def update(self, counts: dict[str, int]) -> None:
        """Show these counts (status -> runs)."""
        self.counts = dict(counts)
        settled = counts.get("done", 0) + counts.get("failed", 0) + counts.get("cancelled", 0)
        waiting = counts.get("waiting", 0)
        self.bar.value = settled + waiting
        self.bar.bar_style = "danger" if counts.get("failed") else ("warning" if waiting else ("success" if settled == self.total else "info"))
        to_go = self.total - settled - waiting
        parts = [f"{k} {counts[k]}" for k in _ORDER if counts.get(k) and k in ("done", "failed", "waiting", "cancelled")]
        if to_go:
            parts.append(f"to go {to_go}")
        if waiting:
            parts.append(f"({waiting} waiting for a verdict)")
        self.tally.value = html.escape(" · ".join(parts))
