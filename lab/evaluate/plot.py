"""Plots of evaluations, drawn by matplotlib as inline SVG (docs/evaluate.md "Why matplotlib").

SVG is text in the notebook (`image/svg+xml`): JupyterLab and Notebook 7 render it with no
extension and no JavaScript, offline, and an HTML export or a GitHub preview shows it as it is.
Figures are made with `matplotlib.figure.Figure` (no pyplot), so no global backend or open
figure is left behind in the kernel.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import EvaluationError

if TYPE_CHECKING:
    from .compare import Comparison
    from .evaluation import Evaluation

__all__ = ("SvgPlot", "evaluation_plot", "comparison_plot")

WORSE, BETTER, SAME = "#cf222e", "#1a7f37", "#8c959f"


@dataclass(frozen=True)
class SvgPlot:
    """An SVG drawing; displays inline (`_repr_svg_`), `.data` is its text."""

    data: str

    def _repr_svg_(self) -> str:
        return self.data


def _figure(panels: int) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise EvaluationError(
            f"evaluation plots need matplotlib: pip install 'graph-lab[evals]' ({exc})"
        ) from None
    fig = Figure(figsize=(3.4 * max(panels, 1), 2.6), layout="constrained")
    axes = fig.subplots(1, max(panels, 1), squeeze=False)[0]
    return fig, list(axes)


def _svg(fig: Any) -> SvgPlot:
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    text = buf.getvalue()
    return SvgPlot(text[text.index("<svg") :])  # no XML prolog: the SVG goes inside an HTML table's page


def evaluation_plot(ev: Evaluation) -> SvgPlot:
    """A histogram of each score over the scored cases, and each assertion's pass rate."""
    rows = [r for r in ev.rows() if r.status == "scored"]
    scores = sorted({n for r in rows for n in r.scores})
    asserts = sorted({n for r in rows for n in r.assertions})
    fig, axes = _figure(len(scores) + (1 if asserts else 0))
    for ax, name in zip(axes, scores, strict=False):
        values = [r.scores[name] for r in rows if name in r.scores]
        ax.hist(values, bins=min(10, max(len(set(values)), 1)), color="#0969da")
        ax.set_title(f"{name} (mean {sum(values) / len(values):.3g})", fontsize=9)
        ax.set_ylabel("cases", fontsize=8)
    if asserts:
        ax = axes[len(scores)]
        rates = [
            sum(1 for r in rows if r.assertions.get(n)) / max(1, sum(1 for r in rows if n in r.assertions))
            for n in asserts
        ]
        ax.barh(asserts, rates, color=[BETTER if v == 1 else WORSE if v < 0.5 else "#9a6700" for v in rates])
        ax.set_xlim(0, 1)
        ax.set_title("assertions passed", fontsize=9)
    if not scores and not asserts:
        axes[0].text(0.5, 0.5, "no scored case yet", ha="center", va="center")
        axes[0].set_axis_off()
    for ax in axes:
        ax.tick_params(labelsize=7)
    return _svg(fig)


def comparison_plot(cmp: Comparison) -> SvgPlot:
    """Per case, the change of each score (and of the assertions passed) from the first evaluation
    to the second: red where it got worse, green where better."""
    metrics = cmp.metrics()
    fig, axes = _figure(len(metrics))
    for ax, name in zip(axes, metrics, strict=False):
        pairs = [(r.name, r.delta(name)) for r in cmp.rows()]
        pairs = [(n, d) for n, d in pairs if d is not None]
        ax.bar(
            range(len(pairs)),
            [d for _, d in pairs],
            color=[WORSE if d < 0 else BETTER if d > 0 else SAME for _, d in pairs],
        )
        ax.axhline(0, color="#57606a", linewidth=0.6)
        ax.set_xticks(range(len(pairs)), [n for n, _ in pairs], rotation=90, fontsize=6)
        ax.set_title(f"Δ {name}", fontsize=9)
    if not metrics:
        axes[0].text(0.5, 0.5, "nothing to compare", ha="center", va="center")
        axes[0].set_axis_off()
    return _svg(fig)
