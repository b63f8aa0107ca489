"""How a run or a graph shows itself without importing the views that draw it.

The views (`lab.render`, `lab.widgets`) sit above the graph kinds and the run kernel: they read
runs and graphs, never the other way round. A graph's `g.render()` / `display(g)` and a run's
`display(run)` still work, because the views register what draws each thing here, by name, when
the package is imported (`lab.views.register_views`, called by `lab/__init__.py`), and the
graph and the run call through `show(name, ...)`. This module imports nothing of the lab.

Names in use: `graph.dot`, `graph.mermaid`, `graph.svg`, `graph.mimebundle` (each called with the
graph handle and an optional overlay), `run.display` (displays the run view), `batch.progress`
(makes a batch's progress bar), `share.export_html` (writes runs as one HTML file), `compare.make`
(compares two runs or branches) and `compare.display` (shows a comparison).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ("register", "registered", "show")

_views: dict[str, Callable[..., Any]] = {}


def register(name: str, view: Callable[..., Any]) -> None:
    """Make `view` what `show(name, ...)` calls; registering a name again replaces its view."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a display hook's name is a non-empty str like 'graph.dot', got {name!r}")
    if not callable(view):
        raise TypeError(f"the view registered for {name!r} must be callable, got {view!r}")
    _views[name] = view


def registered() -> tuple[str, ...]:
    """The names that have a view, in registration order."""
    return tuple(_views)


def show(name: str, *args: Any, **kwargs: Any) -> Any:
    """Call the view registered as `name` with these arguments and return what it returns."""
    view = _views.get(name)
    if view is None:
        known = ", ".join(_views) or "none"
        raise LookupError(
            f"no view is registered for {name!r} (registered: {known}); `import lab` registers the lab's views "
            "(lab.views.register_views), or register one with lab.display_hooks.register(name, fn)"
        )
    return view(*args, **kwargs)
