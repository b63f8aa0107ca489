"""Share runs: one self-contained HTML file per run (or per comparison), and two branches compared.

A view package, between the widgets and the drawing: it reads runs only through the public API
(`lab.read`, history, events, waits) into plain data (`collect`), compares two branches
(`compare`), and writes the page (`page`, `page_script`) with the SVG `lab.render` drew. No store
module, no widget. `Run.export_html`, `Lab.export_html` and `Lab.compare` reach it through
`lab.display_hooks` (registered by lab.views), so the kernel never imports it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ArgumentError
from .collect import Drawings, family_data, labels_of, stored
from .compare import Comparison, compare
from .page import comparison_html, page_html

__all__ = ("export_html", "page_of", "compare", "Comparison", "comparison_html")


def _sides(runs: Any) -> list[Any]:
    if isinstance(runs, Comparison):
        return [runs]
    if isinstance(runs, (list, tuple)) and not _is_pair(runs):
        if not runs:
            raise ArgumentError("export_html([]) has nothing to export: pass a run, or [a, b] to compare two")
        return list(runs)
    return [runs]


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while a page is built, then restored as it was.

    A long run's page is built from hundreds of thousands of small dicts and lists that all stay
    alive until the page is written, so every collection the allocations trigger walks them again
    and finds nothing to free (30% of a 4,003-step export; docs/benchmarks.md). Their memory is
    still freed by reference counting; the cycles anything else makes meanwhile are collected
    when the collector runs again."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def page_of(runs: Any, *, title: str | None = None) -> str:
    """The page's HTML for a run, a `(run, seq)` branch, a `Comparison`, or `[a, b]` (compared)."""
    with _no_cycle_collection():
        return _page_of(runs, title)


def _page_of(runs: Any, title: str | None) -> str:
    items = _sides(runs)
    drawings: Drawings = {}
    comparison = None
    if len(items) == 1 and isinstance(items[0], Comparison):
        cmp = items[0]
    elif len(items) == 2:
        cmp = compare(items[0], items[1])
    else:
        cmp = None
    datas: list[dict[str, Any]] = []
    if cmp is not None:
        for side in (cmp.a, cmp.b):
            datas += family_data(side.run, drawings, upto=side.upto, labels=side.labels)
        comparison = (cmp.to_json(), cmp.drawing())
        title = title or f"Graph Lab: {cmp.a.label} vs {cmp.b.label}"
    else:
        for item in items:
            run, upto = (item[0], item[1]) if isinstance(item, tuple) else (item, None)
            datas += family_data(stored(run), drawings, upto=upto, labels=labels_of(run))
        title = title or f"Graph Lab run {datas[0]['id']} ({datas[0]['graph']}@{datas[0]['revision']})"
    return page_html(title, _once(datas), drawings, comparison=comparison)


def _once(datas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each subgraph child once (two compared branches of one parent share their children)."""
    seen: set[str] = set()
    out = []
    for d in datas:
        if d.get("child_of") and d["id"] in seen:
            continue
        seen.add(d["id"])
        out.append(d)
    return out


def export_html(runs: Any, path: str | Path, *, title: str | None = None) -> Path:
    """Write `runs` (see `page_of`) as one HTML file at `path`; returns the path written."""
    if not isinstance(path, (str, Path)) or not str(path):
        raise ArgumentError(f"export_html needs a file path (a str or Path) such as 'run.html', got {path!r}")
    target = Path(path).expanduser()
    if target.is_dir():
        raise ArgumentError(f"export_html: {target} is a directory; name a file in it, say {target / 'run.html'}")
    if not target.parent.exists():
        raise ArgumentError(f"export_html: the folder {target.parent} does not exist; create it or pick another path")
    html = page_of(runs, title=title)
    target.write_text(html, encoding="utf-8")
    return target


def _is_pair(value: Sequence[Any]) -> bool:
    return len(value) == 2 and isinstance(value[1], int) and not isinstance(value[1], bool)
