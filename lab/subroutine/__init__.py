"""Subroutines (seed 000 "State"): payload, params, node-local state, feature state, the commit rule.

Declared cell by cell (`sub = lab.subroutine("name", input=..., output=..., params=...)`, then
`sub.feature`, `@sub.node(state=...)`, `@sub.feature_node`, `sub.edge(src, dst, when=...,
effect=...)`) and compiled onto the lab's serial engine, store and widgets. One idea per module:
`values` (Success, FeatureSuccess, the node-state contract), `features` (FeatureState, conditions,
effects), `routing` (the commit rule), `definition` (declarations), `compile` (stations),
`context` and `calls` (context.params, context.invoke, Subroutine and Workflow calls), `worker`
(a Workflow call's child process).
"""

from .calls import Subroutine, Workflow
from .compile import SubroutineGraph, SubroutineState
from .context import VisitContext
from .definition import INPUT, OUTPUT, Definition, define
from .errors import (
    AmbiguousEdgeError,
    ChildCallError,
    FeatureDomainError,
    FeatureResetError,
    FeatureUnsetError,
    NoCompatibleEdgeError,
    NodeStateTypeError,
    NodeStateValueError,
    RoutingError,
    SubroutineDefinitionError,
    SubroutineError,
    VisitResultError,
)
from .features import Condition, Effect, Feature, FeatureState
from .routing import EdgeDecl, route
from .values import FeatureSuccess, NoState, Success

__all__ = (
    # declaring
    "define",
    "Definition",
    "SubroutineGraph",
    "SubroutineState",
    "INPUT",
    "OUTPUT",
    "Feature",
    "Condition",
    "Effect",
    "EdgeDecl",
    # visiting
    "Success",
    "FeatureSuccess",
    "NoState",
    "FeatureState",
    "VisitContext",
    "route",
    # child calls
    "Subroutine",
    "Workflow",
    # errors
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
