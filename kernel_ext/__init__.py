"""The IPython extension: `%load_ext kernel_ext`.

For now it registers rich display for lab objects (runs and graphs show as compact HTML
summaries, with a plain-text fallback). Magics, cell hooks and the live graph view grow here
(issue "The kernel extension"); `%unload_ext kernel_ext` removes what loading added.
"""

from __future__ import annotations

from typing import Any

from .display import FORMATTERS

__all__ = ("load_ipython_extension", "unload_ipython_extension")

_registered: list[tuple[type, Any]] = []


def load_ipython_extension(ip: Any) -> None:
    """Register the HTML formatters; loading twice is harmless."""
    html = ip.display_formatter.formatters["text/html"]
    for cls, fn in FORMATTERS.items():
        if any(c is cls for c, _ in _registered):
            continue
        previous = html.for_type(cls, fn)
        _registered.append((cls, previous))


def unload_ipython_extension(ip: Any) -> None:
    """Remove the formatters again (restoring any that were there before)."""
    html = ip.display_formatter.formatters["text/html"]
    while _registered:
        cls, previous = _registered.pop()
        html.pop(cls, None)
        if previous is not None:
            html.for_type(cls, previous)
