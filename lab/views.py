"""The views each graph, run and batch shows, registered into `lab.display_hooks`.

A view module, the top of the layers with `lab.render`, `lab.widgets` and `kernel_ext`: it may
import everything below it, and nothing below imports it. `lab/__init__.py` calls
`register_views()` once, so `g.render()`, `g.mermaid()`, `g.svg()`, `display(g)`, `display(run)` and
a batch's progress bar work as soon as `lab` is imported. The drawing and the widgets are imported
when first shown, so `import lab` loads neither Graphviz nor ipywidgets.
"""

from __future__ import annotations

from html import escape
from typing import Any

from . import display_hooks

__all__ = (
    "register_views",
    "graph_dot",
    "graph_mermaid",
    "graph_svg",
    "graph_mimebundle",
    "display_run",
    "batch_progress",
    "export_html",
    "compare_runs",
    "display_comparison",
)


def graph_dot(graph: Any, overlay: Any = None) -> str:
    """DOT text of a graph handle; a graph that cannot build yet is drawn from its declarations."""
    from .render import spec_for, to_dot

    return to_dot(spec_for(graph), overlay)


def graph_mermaid(graph: Any, overlay: Any = None) -> str:
    """Mermaid `stateDiagram-v2` text of the same drawing."""
    from .render import spec_for, to_mermaid

    return to_mermaid(spec_for(graph), overlay)


def graph_svg(graph: Any, overlay: Any = None) -> str:
    """SVG from the Graphviz `dot` program (laid out once per revision, restyled per overlay)."""
    from .render import spec_for, svg_of

    return svg_of(spec_for(graph), overlay)


def graph_mimebundle(graph: Any) -> dict[str, str]:
    """What `display(g)` shows: the SVG, or the reason Graphviz could not draw it."""
    from .render import GraphvizError

    try:
        svg = graph.svg()  # the handle's own drawing (as `g.svg()` gives it)
    except GraphvizError as exc:
        return {"text/plain": f"{graph!r}\n{exc}", "text/html": f"<pre>{escape(str(exc))}</pre>"}
    return {"image/svg+xml": svg, "text/html": f"<div class='graphlab-graph'>{svg}</div>", "text/plain": repr(graph)}


def display_run(run: Any) -> None:
    """`display(run)` shows the run widget (lab.widgets.RunWidget), one per run."""
    from IPython.display import display

    from .widgets import RunWidget

    display(RunWidget.for_run(run))


def batch_progress(*, total: int, title: str) -> Any:
    """A batch's progress bar (lab.widgets.batch_widget.BatchProgress)."""
    from .widgets.batch_widget import BatchProgress

    return BatchProgress(total=total, title=title)


def export_html(runs: Any, path: Any, *, title: str | None = None) -> Any:
    """`run.export_html(path)` / `lab.export_html(runs, path)`: one self-contained HTML file (lab.share)."""
    from .share import export_html as write

    return write(runs, path, title=title)


def compare_runs(a: Any, b: Any) -> Any:
    """`lab.compare(a, b)`: a `lab.share.Comparison` of two runs or branches."""
    from .share import compare

    return compare(a, b)


def display_comparison(comparison: Any) -> None:
    """`display(comparison)` shows the compare widget (lab.widgets.compare_view)."""
    from IPython.display import display

    from .widgets.compare_view import CompareView

    display(CompareView(comparison))


def register_views() -> None:
    """Register every view above into `lab.display_hooks` (again: the same views)."""
    for name, view in (
        ("graph.dot", graph_dot),
        ("graph.mermaid", graph_mermaid),
        ("graph.svg", graph_svg),
        ("graph.mimebundle", graph_mimebundle),
        ("run.display", display_run),
        ("batch.progress", batch_progress),
        ("share.export_html", export_html),
        ("compare.make", compare_runs),
        ("compare.display", display_comparison),
    ):
        display_hooks.register(name, view)
