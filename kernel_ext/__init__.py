"""The IPython extension: `%load_ext kernel_ext`.

Loading registers, on the shell that loads it:

- the magics `%lab` (subcommands open, graph, runs, start, step, run, rewind, fork, approve,
  deny, history, diff, events; `%lab --help`) and `%%lab_sql` (`magics.py`, docs/magics.md);
- rich display for checkpoints, histories and run records as escaped HTML tables with a
  plain-text twin, and for runs and graphs a compact HTML summary *only while* `Run` and
  `LabGraph` have no display of their own (the run widget's `_ipython_display_`, the SVG
  `_repr_mimebundle_`), so the richer views win once present (`display.py`);
- `pre_run_cell` / `post_run_cell` hooks that notice a cell renaming a node class
  (`hooks.py`).

`%unload_ext kernel_ext` removes all of it and restores any formatter it displaced. Loading
twice is harmless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lab import LabGraph, Run

from .display import HTML_FORMATTERS, TEXT_FORMATTERS
from .hooks import CellWatcher
from .magics import LabMagics
from .session import Session

__all__ = ("load_ipython_extension", "unload_ipython_extension", "loaded_on")

_OWN_DISPLAY = {Run: "_ipython_display_", LabGraph: "_repr_mimebundle_"}
"""A class with this attribute displays itself; the extension leaves it alone."""


@dataclass
class _Loaded:
    shell: Any
    session: Session
    magics: LabMagics
    watcher: CellWatcher
    formatters: list[tuple[str, type, Any]] = field(default_factory=list)
    """(mime type, class, the formatter it displaced or None), in registration order."""


_loaded: dict[int, _Loaded] = {}


def loaded_on(ip: Any) -> _Loaded | None:
    """What the extension registered on shell `ip` (None when it is not loaded there)."""
    return _loaded.get(id(ip))


def load_ipython_extension(ip: Any) -> None:
    """Register magics, formatters and cell hooks on `ip`; a second call does nothing."""
    if id(ip) in _loaded:
        return
    session = Session()
    magics = LabMagics(ip, session)
    watcher = CellWatcher(session)
    state = _Loaded(ip, session, magics, watcher)
    formatters = ip.display_formatter.formatters
    for mime, table in (("text/html", HTML_FORMATTERS), ("text/plain", TEXT_FORMATTERS)):
        for cls, fn in table.items():
            attr = _OWN_DISPLAY.get(cls)
            if attr is not None and hasattr(cls, attr):
                continue
            if mime == "text/plain":
                previous = formatters[mime].for_type(cls, _pretty(fn))
            else:
                previous = formatters[mime].for_type(cls, fn)
            state.formatters.append((mime, cls, previous))
    ip.register_magics(magics)
    ip.events.register("pre_run_cell", watcher.pre_run_cell)
    ip.events.register("post_run_cell", watcher.post_run_cell)
    _loaded[id(ip)] = state


def unload_ipython_extension(ip: Any) -> None:
    """Remove everything loading added, restoring formatters it displaced."""
    state = _loaded.pop(id(ip), None)
    if state is None:
        return
    formatters = ip.display_formatter.formatters
    for mime, cls, previous in reversed(state.formatters):
        formatters[mime].pop(cls, None)
        if previous is not None:
            formatters[mime].for_type(cls, previous)
    for kind, name in (("line", "lab"), ("cell", "lab_sql")):
        table = ip.magics_manager.magics[kind]
        if getattr(table.get(name), "__self__", None) is state.magics:
            del table[name]
    ip.magics_manager.registry.pop(type(state.magics).__name__, None)
    ip.events.unregister("pre_run_cell", state.watcher.pre_run_cell)
    ip.events.unregister("post_run_cell", state.watcher.post_run_cell)
    state.watcher.forget()


def _pretty(fn: Any) -> Any:
    """A text/plain printer for IPython's pretty printer from a `str`-returning function."""

    def printer(obj: Any, p: Any, cycle: bool) -> None:
        p.text(fn(obj))

    return printer
