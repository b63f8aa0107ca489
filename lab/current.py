"""The run last started, forked or resumed in this process (what the kernel extension acts on).

A low module of its own, so the run kernel (a fork) and the kinds (`g.start`, `lab.resume`, a
subgraph) note the current run without importing the `Lab` facade.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .run import Run

__all__ = ("current_run", "note_run")

_current_run: Run | None = None


def current_run() -> Run | None:
    """The run last started, forked or resumed in this process (the kernel extension acts on it)."""
    return _current_run


def note_run(run: Run | None) -> None:
    """Record `run` as the current run (called by `g.start`, `run.fork` and `lab.resume`; a subgraph
    puts the parent's back after starting its child)."""
    global _current_run
    _current_run = run
