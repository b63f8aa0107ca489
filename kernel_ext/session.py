"""What the magics act on: the current lab, the current graph and the current run.

- **lab**: the one `%lab open` opened, else the last `Lab` created in the kernel
  (`lab.current_lab()`). `Lab()` again on the same path shares the first one's graphs and runs;
  a cell that makes another lab current says so in one line.
- **run**: the run last started, forked or resumed in the kernel (`lab.current_run()`, kept by
  the library, so `run = g.start(...)` in Python and `%lab step` in the next cell agree), as
  long as it belongs to the current lab; `--run ID` names another for one command.
- **graph**: the one `%lab graph NAME` chose, else the current run's graph, else the lab's only
  (or last declared) graph.

Problems are `UsageError`s that say what to do, so a magic never shows a traceback for them.
"""

from __future__ import annotations

from IPython.core.error import UsageError

import lab.lab as lab_module
from lab import Lab, LabGraph, Run
from lab.errors import LabError, RunNotFoundError
from lab.store import MEMORY

__all__ = ("Session",)


class Session:
    """The extension's memory between cells (one per loaded extension)."""

    def __init__(self) -> None:
        self.opened: Lab | None = None
        self.graph_name: str | None = None
        self._acting_on: object | None = None  # the store the magics acted on after the last cell

    # -- the lab ----------------------------------------------------------------------------

    def _candidate(self) -> Lab | None:
        if self.opened is not None and not self.opened.store.closed:
            return self.opened
        return lab_module.current_lab()

    def note_change(self) -> str | None:
        """One line saying which lab the magics act on now, when a cell changed it (else None).

        A second `Lab()` on the same path shares the first one's store and graphs: no change.
        """
        lab = self._candidate()
        store = None if lab is None else lab.store
        before, self._acting_on = self._acting_on, store
        if lab is None or before is None or store is before:
            return None
        graphs = ", ".join(lab.graphs) or "none declared yet"
        now = f"a new lab {lab.path}" if lab.path == MEMORY else f"lab {lab.path}"
        return f"%lab now acts on {now} (graphs: {graphs}); before this cell: {getattr(before, 'path', '?')}"

    def lab(self) -> Lab:
        candidate = self._candidate()
        if candidate is None:
            raise UsageError(
                "no lab is open in this kernel; run `%lab open` (the default store .graphlab/lab.duckdb), "
                "`%lab open PATH`, or create one in Python with `lab = Lab()`"
            )
        if candidate.store.closed:
            raise UsageError(
                f"the current lab ({candidate.path}) is closed; `%lab open {candidate.path}` opens it again"
            )
        return candidate

    def open(self, path: str | None) -> Lab:
        try:
            opened = Lab(path)
        except LabError as exc:
            raise UsageError(f"cannot open a lab at {path or 'the default path'}: {exc}") from None
        self.opened = opened
        self.graph_name = None
        self._acting_on = opened.store  # `%lab open` says what it opened itself
        return opened

    # -- the graph --------------------------------------------------------------------------

    def graph(self, name: str | None = None) -> LabGraph:
        lab = self.lab()
        graphs = lab.graphs
        if name is not None:
            if name not in graphs:
                raise UsageError(
                    f"lab {lab.path} has no graph {name!r} declared in this kernel; "
                    f"declared: {sorted(graphs) or 'none'}. Declare it with `g = lab.graph({name!r}, ...)`"
                )
            return graphs[name]
        if self.graph_name in graphs:
            return graphs[self.graph_name]
        run = self._current_run(lab)
        if run is not None and run.graph.name in graphs:
            return graphs[run.graph.name]
        if not graphs:
            raise UsageError(
                f'no graph is declared in lab {lab.path} yet; declare one with `g = lab.graph("name", state_type=...)`'
            )
        return list(graphs.values())[-1]

    # -- the run ----------------------------------------------------------------------------

    def _current_run(self, lab: Lab) -> Run | None:
        run = lab_module.current_run()
        if run is None or run.lab.store is not lab.store:
            return None
        return run

    def run(self, run_id: str | None = None) -> Run:
        """The run `run_id` (resumed if it is not live in this kernel), else the current run."""
        lab = self.lab()
        if run_id is None:
            run = self._current_run(lab)
            if run is None:
                raise UsageError(
                    f"no current run in lab {lab.path}; start one (`%lab start Node(...)` or `g.start(...)`), "
                    "resume one (`lab.resume(run_id)`), or name one with --run ID (`%lab runs` lists them)"
                )
            return run
        live = lab.store.live_runs.get(run_id)  # a run this kernel holds a handle on
        if live is not None:
            return live
        before = lab_module.current_run()
        try:
            return lab.resume(run_id)
        except RunNotFoundError:
            raise UsageError(
                f"no run {run_id!r} in lab {lab.path}; `%lab runs` lists the stored runs"
            ) from None
        except LabError as exc:
            raise UsageError(f"cannot act on run {run_id}: {exc}") from None
        finally:
            lab_module.note_run(before)  # --run names a run for one command; the current run stays
