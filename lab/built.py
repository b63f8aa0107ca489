"""What every graph kind builds and starts from: a pinned revision (`BuiltGraph`) and `start_run`.

The lowest piece of the graph kinds: `lab.graph` (node classes, steps), `lab.native_read` (a
built pydantic-graph `Graph`, read for `lab.adopt` and for step-style declarations) and
`lab.adopt` import it; it imports none of them, so their arrows run one way.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from types import NoneType
from typing import TYPE_CHECKING, Any

from pydantic_graph import Graph

from .codec import SnapshotCodec
from .errors import StateContractError
from .limits import DEFAULT_STEP_LIMIT, UNSET, Limits, check_step_limit, check_timeout
from .manifest import Manifest
from .records import Durability

if TYPE_CHECKING:
    from .run import Run

__all__ = ("BuiltGraph", "qualname", "station_kind", "start_run")


@dataclass(frozen=True)
class BuiltGraph:
    """One built revision: the native graph, its pinned manifest and its snapshot codec."""

    key: str
    native: Graph[Any, Any, Any, Any]
    manifest: Manifest
    codec: SnapshotCodec
    nodes: dict[str, type]
    state_type: Any
    deps_type: Any
    output_type: Any

    @property
    def revision(self) -> int:
        assert self.manifest.revision is not None
        return self.manifest.revision


def qualname(tp: Any) -> str:
    """`module.QualName` of a type, as a manifest records a graph's state type."""
    return f"{getattr(tp, '__module__', '')}.{getattr(tp, '__qualname__', repr(tp))}"


def is_gate(cls: Any) -> bool:
    """Whether `cls` is a consent gate class (lab.gates.Gate)."""
    from .gates import Gate

    return inspect.isclass(cls) and issubclass(cls, Gate)


def station_kind(cls: type) -> str:
    """A node class's manifest kind: a gate, a delegated agent station (lab.agents), or a node."""
    if is_gate(cls):
        return "gate"
    from .agents.node import DelegatedAgentNode

    return "delegated" if inspect.isclass(cls) and issubclass(cls, DelegatedAgentNode) else "node"


def start_run(
    g: Any,
    built: BuiltGraph,
    entry: Any,
    *,
    state: Any,
    deps: Any,
    durability: Durability | None,
    batch_size: int | None,
    breakpoints: dict[str, Sequence[str]] | None,
    step_limit: int | None = UNSET,
    timeout: float | None = UNSET,
    parent: tuple[str, int | None] | None = None,
    tags: dict[str, Any] | None = None,
    total_step_limit: int | None = None,
) -> Run:
    """Create a run of `g` (declared or adopted) at `entry`: default state, contract check, first checkpoint.

    `parent` is (run id, checkpoint) of the run whose station started this one as a subgraph.
    `total_step_limit` caps the run's steps across every call (seed 002; lab.run_total).
    """
    if step_limit is UNSET:
        step_limit = getattr(g, "step_limit", DEFAULT_STEP_LIMIT)
    if timeout is UNSET:
        timeout = getattr(g, "timeout", None)
    limits = Limits(
        step_limit=check_step_limit(step_limit, f"{g.name}.start"),
        timeout=check_timeout(timeout, f"{g.name}.start"),
        total_step_limit=check_step_limit(total_step_limit, f"{g.name}.start(total_step_limit=...)"),
    )
    state_type = g.state_type
    if state is None and state_type not in (None, NoneType):
        try:
            state = state_type()
        except TypeError as exc:
            raise StateContractError(
                f"graph {g.name!r} declares state type {getattr(state_type, '__qualname__', state_type)}, which "
                f"has no default; pass state=... to start ({exc})"
            ) from exc
    built.codec.check_contract(state)
    from .current import note_run
    from .run import Run

    run = Run.create(
        g.lab,
        g,
        built,
        entry,
        state=state,
        deps=deps,
        durability=durability or g.lab.durability,
        batch_size=batch_size or g.lab.batch_size,
        breakpoints=breakpoints,
        budgets=getattr(g, "budgets", None) or g.lab.budgets,
        limits=limits,
        parent=parent,
        tags=tags,
    )
    note_run(run)
    return run
