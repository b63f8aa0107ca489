"""The batch progress bar: how many runs of a batch are done, failed, waiting or still to go.

Fed counts by `Batch.run` (lab.batch); it reads nothing itself, so it holds no SQL. The bar is
drawn in proportion (issue 25 item 7): done green, failed red, waiting amber, the rest grey, so
"done 5 · failed 1" reads as five of six done, not as a total failure.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

_ORDER = ("done", "failed", "waiting", "queued", "running", "interrupted", "created", "cancelled")
COLORS = {"done": "#16a34a", "failed": "#dc2626", "waiting": "#d97706", "cancelled": "#6b7280"}
"""The bar's colour per status; everything not settled yet is the grey track."""
TRACK = "#e5e7eb"


def bar_html(counts: dict[str, int], total: int) -> str:
    """The progress bar as one div per settled status, each as wide as its share of `total`."""
    total = max(total, 1)
    parts = []
    for status in ("done", "failed", "waiting", "cancelled"):
        n = counts.get(status, 0)
        if n:
            parts.append(
                f'<div class="gl-batch-{status}" data-status="{status}" data-count="{n}" title="{status} {n}" '
                f'style="width:{100 * n / total:.4g}%;background:{COLORS[status]}"></div>'
            )
    return (
        f'<div class="gl-batch-bar" role="progressbar" aria-valuemin="0" aria-valuemax="{total}" '
        f'aria-valuenow="{sum(counts.get(s, 0) for s in ("done", "failed", "cancelled"))}" '
        f'style="display:flex;height:14px;width:100%;max-width:480px;background:{TRACK};border-radius:3px;overflow:hidden">'
        + "".join(parts)
        + "</div>"
    )


class BatchProgress(widgets.VBox):
    """A progress bar in proportion and a one-line tally: `done 12 · failed 1 · waiting 2 · to go 5`."""

    def __init__(self, *, total: int, title: str):
        self.total = total
        self.label = widgets.HTML(value=f"<b>{html.escape(title)}</b>")
        self.bar = widgets.HTML(value=bar_html({}, total))
        self.bar.add_class("gl-batch-progress")
        self.tally = widgets.HTML(value="")
        self.counts: dict[str, int] = {}
        super().__init__([self.label, self.bar, self.tally])

    @property
    def value(self) -> int:
        """Runs that need nothing more from the batch: settled (done, failed, cancelled) or waiting."""
        return sum(self.counts.get(s, 0) for s in ("done", "failed", "cancelled", "waiting"))

    def update(self, counts: dict[str, int]) -> None:
        """Show these counts (status -> runs)."""
        self.counts = dict(counts)
        settled = counts.get("done", 0) + counts.get("failed", 0) + counts.get("cancelled", 0)
        waiting = counts.get("waiting", 0)
        self.bar.value = bar_html(counts, self.total)
        to_go = self.total - settled - waiting
        parts = [f"{k} {counts[k]}" for k in _ORDER if counts.get(k) and k in ("done", "failed", "waiting", "cancelled")]
        if to_go:
            parts.append(f"to go {to_go}")
        if waiting:
            parts.append(f"({waiting} waiting for a verdict)")
        self.tally.value = html.escape(" · ".join(parts))
