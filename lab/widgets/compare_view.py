"""`CompareView`: two runs or branches side by side, the widget `display(lab.compare(a, b))` shows.

The drawing with both paths, the first differing station's inputs and the table of state
differences come from `lab.share.comparison_html` (the same escaped HTML the exported page
holds); a picker opens one aligned position's full difference (`lab/diff.py`) as a tree. It
reads only the `Comparison` (plain data read through the runs' public API): no SQL.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from ..share import Comparison, comparison_html
from . import html as H

__all__ = ("CompareView",)


class CompareView(widgets.VBox):
    """A comparison of two branches; `pick(index)` shows one aligned position's differences."""

    def __init__(self, comparison: Comparison, **kwargs: Any):
        super().__init__(**kwargs)
        self.comparison = comparison
        self.add_class("gl-run")
        self.add_class("gl-compare")
        self.header = widgets.HTML(
            f'{H.CSS}<div class="gl-status"><b>compare</b> {H.escape(comparison.a.label)} '
            f"<b>vs</b> {H.escape(comparison.b.label)}</div>"
        )
        self.summary = widgets.HTML(comparison_html(comparison.to_json(), comparison.drawing(), styled=True))
        options = [(self._row_label(r), i) for i, r in enumerate(comparison.rows)]
        self.picker = widgets.Dropdown(
            options=options, description="position", layout=widgets.Layout(width="auto")
        )
        self.picker.add_class("gl-positions")
        self.detail = widgets.HTML()
        self.picker.observe(self._on_pick, names="value")
        self.children = (self.header, self.summary, self.picker, self.detail)
        if options:
            self.pick(next((i for i, r in enumerate(comparison.rows) if r.diff), 0))
        else:
            self.picker.layout.display = "none"

    @staticmethod
    def _row_label(row: Any) -> str:
        def side(e: dict[str, Any] | None) -> str:
            if e is None:
                return "—"
            if "frontier" in e:  # a super-step: what it settled, then its frontier
                return f"{e['seq']} {e['station'] or 'nothing'} → {e['frontier']}"
            return f"{e['seq']} {e['station'] or ''}".strip()

        mark = "same" if row.diff is not None and not row.diff else ("differs" if row.diff else "one side")
        return f"{row.index}: A {side(row.a)} | B {side(row.b)} · {mark}"

    def pick(self, index: int) -> None:
        """Show the aligned position `index` of `comparison.rows` (its full state difference)."""
        self.picker.value = index
        self._show(index)

    def _on_pick(self, change: dict[str, Any]) -> None:
        if change["new"] is not None:
            self._show(change["new"])

    def _show(self, index: int) -> None:
        row = self.comparison.rows[index]
        if row.diff is None:
            self.detail.value = H.diff_table(
                None, title=f"position {row.index}: only one side has a checkpoint"
            )
            return
        self.detail.value = H.diff_table(
            row.diff, title=f"position {row.index}: {row.diff.left} → {row.diff.right}"
        )

    def __repr__(self) -> str:
        return f"<CompareView {self.comparison.a.label} vs {self.comparison.b.label}>"
