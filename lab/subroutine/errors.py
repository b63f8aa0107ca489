"""The subroutine errors (seed 000 "State"): each names the node, field, feature or edge at fault."""

from __future__ import annotations

from ..errors import GraphDefinitionError, LabError

__all__ = (
    "SubroutineError",
    "SubroutineDefinitionError",
    "NodeStateTypeError",
    "NodeStateValueError",
    "VisitResultError",
    "FeatureDomainError",
    "FeatureUnsetError",
    "FeatureResetError",
    "RoutingError",
    "NoCompatibleEdgeError",
    "AmbiguousEdgeError",
    "ChildCallError",
)


class SubroutineError(LabError):
    """Base class of the subroutine errors."""


class SubroutineDefinitionError(SubroutineError, GraphDefinitionError):
    """A subroutine's declarations cannot build: an unknown node, an edge without a source, ..."""


class NodeStateTypeError(SubroutineDefinitionError):
    """A node-local state type is not a frozen, slotted dataclass with direct fields and immutable defaults."""


class NodeStateValueError(SubroutineError, TypeError):
    """A visit returned a state that is not exactly its node's declared type, or holds a mutable value."""


class VisitResultError(SubroutineError, TypeError):
    """A visit returned something other than `Success` (a Feature visit: `FeatureSuccess`)."""


class FeatureDomainError(SubroutineError, ValueError):
    """`FeatureState.replace` was given a value outside the feature's declared domain."""


class FeatureUnsetError(SubroutineError, ValueError):
    """A condition read a feature that is still None (seed 000: evaluating it raises ValueError)."""


class FeatureResetError(SubroutineError, ValueError):
    """An initialised feature cannot be reset to None."""


class RoutingError(SubroutineError, RuntimeError):
    """The commit rule refused the visit: not exactly one compatible outgoing edge.

    The candidate state is not committed (the run's head stays); effects the visit had outside
    the run (files, requests) are not undone.
    """


class NoCompatibleEdgeError(RoutingError):
    """No outgoing edge's condition and effects accept the visit."""


class AmbiguousEdgeError(RoutingError):
    """More than one outgoing edge accepts the visit."""


class ChildCallError(SubroutineError, RuntimeError):
    """A child invocation (`context.invoke`) did not finish with an output."""
