"""ipywidgets views: `GraphView` (a live drawing of a graph) and `RunWidget` (the run view).

Widgets read runs only through `Run`/`Lab` methods and draw through `lab.render`; they never
touch SQL. `display(run)` shows `RunWidget.for_run(run)`.
"""

from .graph_view import GraphView
from .run_widget import RunWidget

__all__ = ("GraphView", "RunWidget")
