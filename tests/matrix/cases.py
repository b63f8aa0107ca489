"""The kind × capability matrix (issue 26, done-when 4): what each kind hands the capability tests.

Every kind of graph (node classes, steps, adopted serial, parallel map+join, the super-step
model, a subroutine, a declarative workflow, a delegated agent) has a module `k_<kind>.py` in
this package defining `CASE`, an object with the `KindCase` shape below. The capability tests
(`test_matrix*.py`) take every case through every capability with the same code, so a kind that
misses a capability fails a named cell instead of going unnoticed.

A case builds its kind's graph in one of six *variants*; each variant has at least two stations
that do work, so a step, a rewind and a fork mean something:

- ``plain``: runs to its end; the output is ``case.expected("plain")``.
- ``gate``: parks at a consent gate (``run.wait.kind == "consent"``); after ``run.approve()``
  the run goes on to ``case.expected("gate")``.
- ``interrupt``: a station calls ``interrupt(...)`` (``run.wait.kind == "interrupt"``); after
  ``run.resume_with(ANSWER)`` the run ends with ``case.expected("interrupt")``, which shows the
  answer was received (it depends on ``ANSWER``).
- ``retry``: a station declared with ``Retry(max_attempts=3)`` raises ``ConnectionError`` on its
  first ``FAILS_BEFORE_SUCCESS`` tries in this process (count them with ``tries``) and then
  succeeds; the run ends with ``case.expected("retry")`` and has two ``retry`` events.
- ``slow``: a station creates ``slow.entered`` (when given) and then waits, polling with
  ``await asyncio.sleep(0.02)``, until the file ``slow.release`` exists (forever when it is
  None); then the run ends with ``case.expected("slow")``.
- ``loop``: never ends: every step does work and goes round again (for step limits).

Graphs are named ``f"{case.name}_{variant}"`` so two variants can live in one lab, and building
the same variant again in another process gives the same revision (for SIGKILL and resume, Ray
workers and a kernel restart). Cases are plain module-level code: a subprocess or a Ray worker
rebuilds a graph with ``case_named(kind).build(Lab(path), variant)``.
"""

from __future__ import annotations

import asyncio
import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lab import Lab, Run

KINDS = ("nodes", "steps", "adopted", "parallel", "model", "subroutine", "workflow", "agent")
"""Every kind, in the order the matrix shows them."""

VARIANTS = ("plain", "gate", "interrupt", "retry", "slow", "loop")

ANSWER = 7
"""What the interrupt capability answers with ``run.resume_with``."""

FAILS_BEFORE_SUCCESS = 2
"""How many tries of the retry variant's flaky station fail before one succeeds."""


@dataclass(frozen=True)
class Slow:
    """Where the ``slow`` variant's waiting station signals that it started, and what releases it."""

    entered: str | None = None
    release: str | None = None


_TRIES: dict[str, int] = {}


def tries(key: str) -> int:
    """Count one more try of the flaky station `key` in this process; the count so far."""
    _TRIES[key] = _TRIES.get(key, 0) + 1
    return _TRIES[key]


def reset_tries(key: str) -> None:
    """Forget the tries of `key` (a case's ``build`` calls it, so every test starts at try 1)."""
    _TRIES.pop(key, None)


def flaky(key: str) -> None:
    """Raise ``ConnectionError`` on the first ``FAILS_BEFORE_SUCCESS`` tries of `key`."""
    if tries(key) <= FAILS_BEFORE_SUCCESS:
        raise ConnectionError(f"{key}: try {_TRIES[key]} fails on purpose")


async def wait_slow(slow: Slow | None) -> None:
    """The slow station's body: mark that it started, then wait until released (or forever)."""
    slow = slow or Slow()
    if slow.entered:
        with open(slow.entered, "w") as f:
            f.write("entered")
    while slow.release is None or not os.path.exists(slow.release):
        await asyncio.sleep(0.02)


class KindCase(Protocol):
    """What a kind provides to the matrix."""

    name: str

    def build(self, lab: Lab, variant: str, *, slow: Slow | None = None) -> Any:
        """Declare this kind's graph of `variant` in `lab` (named f"{name}_{variant}"); the lab's handle."""
        ...

    def start(self, graph: Any, **kwargs: Any) -> Run:
        """Start a run of `graph` with its standard input; `kwargs` (step_limit, timeout, ...) go to start."""
        ...

    def subgraph_call(self, graph: Any) -> dict[str, Any]:
        """The keyword arguments that make ``run_subgraph(graph, **them)`` start the run ``start`` starts.

        ``graph.start(**them)`` starts that run too (the magics and lab.map tests rely on it): every
        kind's ``start`` takes ``node=`` / ``inputs=`` / ``state=`` as ``run_subgraph`` passes them.
        """
        ...

    def expected(self, variant: str) -> Any:
        """The output a run of `variant` ends with (after approve / resume_with(ANSWER) / release)."""
        ...


def case_named(kind: str) -> KindCase:
    """The case of `kind` (its module ``tests.matrix.k_<kind>``)."""
    return importlib.import_module(f"tests.matrix.k_{kind}").CASE
