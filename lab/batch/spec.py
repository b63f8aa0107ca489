"""What a batch worker needs to declare the driver's graph again, in another process.

A `LabGraph` holds its `Lab` (connections, locks) and cannot travel; its declaration can: the
node classes (Ray pickles notebook classes by value), the types and the station policies. Each
class carries the driver's source fingerprint, so the worker's graph has the driver's digest
even where the class's source cannot be read (a notebook cell's code, pickled).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ArgumentError
from ..manifest import source_fingerprint

if TYPE_CHECKING:
    from ..graph import LabGraph
    from ..lab import Lab


@dataclass
class GraphSpec:
    """A node-declared graph, as data: `declare(lab)` makes the same graph (same digest) in `lab`."""

    name: str
    state_type: Any
    deps_type: Any
    output_type: Any
    nodes: list[tuple[type, str]]
    """Each node class with its source fingerprint in the driver."""
    digest: str
    step_limit: int | None = None
    retry_policies: dict[str, Any] = field(default_factory=dict)
    node_timeouts: dict[str, float] = field(default_factory=dict)
    budgets: Any = None

    @classmethod
    def of(cls, g: LabGraph) -> GraphSpec:
        if not isinstance(getattr(g, "starts_from_inputs", None), bool) or g.starts_from_inputs or not g.nodes:
            raise ArgumentError(
                f"lab.map({getattr(g, 'name', g)!r}, ...): a batch runs a graph declared with @g.node classes; "
                "graphs declared with steps and edges, and adopted graphs, run one by one with g.start(...)"
            )
        built = g.build()
        return cls(
            name=g.name,
            state_type=g.state_type,
            deps_type=g.deps_type,
            output_type=g.output_type,
            nodes=[(c, source_fingerprint(c)) for c in g.nodes.values()],
            digest=built.manifest.digest,
            step_limit=g.step_limit,
            retry_policies=dict(g.retry_policies),
            node_timeouts=dict(g.node_timeouts),
            budgets=g.budgets,
        )

    def declare(self, lab: Lab) -> LabGraph:
        """The graph in `lab`, checked to be the driver's revision (same digest)."""
        for tp in (self.state_type, self.deps_type, self.output_type, *(c for c, _ in self.nodes)):
            _repair_dataclass(tp)
        g = lab.graph(self.name, state_type=self.state_type, deps_type=self.deps_type, output_type=self.output_type)
        for node_cls, fingerprint in self.nodes:
            if "__graphlab_source__" not in vars(node_cls):
                node_cls.__graphlab_source__ = fingerprint  # type: ignore[attr-defined]
            g.node(node_cls)
        g.step_limit = self.step_limit
        g.retry_policies.update(self.retry_policies)
        g.node_timeouts.update(self.node_timeouts)
        g.budgets = self.budgets
        digest = g.build().manifest.digest
        if digest != self.digest:
            raise ArgumentError(
                f"the batch worker built graph {self.name!r} with digest {digest}, not the notebook's {self.digest}: "
                "its classes differ between the processes; define them in the notebook (or an importable module) "
                "and start the batch again"
            )
        return g


def _repair_dataclass(tp: Any) -> None:
    """A dataclass pickled by value (a notebook's) comes back with copies of `dataclasses.MISSING`
    in its fields, which pydantic reads as "both a default and a default factory": restore the
    sentinel, so the worker's schema (and digest) is the notebook's."""
    fields = getattr(tp, "__dataclass_fields__", None)
    if not isinstance(fields, dict):
        return
    for f in fields.values():
        for attr in ("default", "default_factory"):
            value = getattr(f, attr, dataclasses.MISSING)
            if value is not dataclasses.MISSING and type(value).__name__ == "_MISSING_TYPE":
                setattr(f, attr, dataclasses.MISSING)
