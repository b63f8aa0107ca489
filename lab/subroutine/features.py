"""Feature state (seed 000): declared features, `FeatureState.get/replace`, edge conditions and effects.

Every feature starts at None in each invocation. A Feature visit proposes values with
`FeatureState.replace(FEATURE, value)`; the outgoing edges' effects say which proposals an edge
admits. Conditions read the state before the visit through a `FeatureView`, which raises
`ValueError` (`FeatureUnsetError`) for a feature that is still None.
"""

from __future__ import annotations

import contextvars
import enum
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

from ..errors import RunStateError
from .errors import FeatureDomainError, FeatureResetError, FeatureUnsetError, SubroutineDefinitionError

__all__ = ("Feature", "FeatureState", "FeatureView", "Condition", "Effect", "Proposal", "current_proposal")

_SCALAR_TYPES = (bool, int, float, str)


@dataclass(frozen=True, eq=False)
class Feature:
    """A declared feature: a name and a domain (a collection of allowed values, or a type).

    Build edge conditions (`MODE.equals("fast")`, `MODE.one_of(...)`) and effects
    (`MODE.assign("fast")`, `MODE.unconstrained()`, `MODE.transition("fast", "careful")`) from it.
    """

    name: str
    domain: Any
    values: tuple[Any, ...] | None = field(default=None, repr=False)
    """The allowed values when the domain is a collection, a Literal or an Enum; None for bool/int/float/str."""

    @classmethod
    def declare(cls, name: str, domain: Any) -> Feature:
        if not isinstance(name, str) or not name.isidentifier():
            raise SubroutineDefinitionError(f"a feature's name must be an identifier, got {name!r}")
        if isinstance(domain, str) or domain is None:
            raise SubroutineDefinitionError(
                f"feature {name!r}: domain {domain!r} is neither a collection of values nor a type; "
                "pass e.g. domain=('fast', 'careful'), domain=bool or domain=Literal['a', 'b']"
            )
        if get_origin(domain) is Literal:
            return cls(name, domain, tuple(get_args(domain)))
        if inspect.isclass(domain) and issubclass(domain, enum.Enum):
            return cls(name, domain, tuple(domain))
        if inspect.isclass(domain):
            if domain not in _SCALAR_TYPES:
                raise SubroutineDefinitionError(
                    f"feature {name!r}: domain type {domain.__qualname__} is not one of bool, int, float, str, an "
                    "Enum or a Literal; feature values are kept in checkpoints as JSON"
                )
            return cls(name, domain, None)
        if isinstance(domain, Iterable):
            values = tuple(dict.fromkeys(domain))
            bad = [v for v in values if v is None or not isinstance(v, _SCALAR_TYPES)]
            if not values or bad:
                raise SubroutineDefinitionError(
                    f"feature {name!r}: a domain of values lists non-empty JSON scalars (str, int, float, bool), "
                    f"not None; got {list(domain)!r}"
                )
            return cls(name, Literal[values], values)  # type: ignore[valid-type]
        raise SubroutineDefinitionError(
            f"feature {name!r}: domain {domain!r} is neither a collection of values nor a type"
        )

    # -- the domain -----------------------------------------------------------------------

    def contains(self, value: Any) -> bool:
        if self.values is not None:
            return any(value == v and type(value) is type(v) for v in self.values)
        if self.domain is int:
            return isinstance(value, int) and not isinstance(value, bool)
        if self.domain is float:
            return isinstance(value, int | float) and not isinstance(value, bool)
        return isinstance(value, self.domain)

    @property
    def domain_text(self) -> str:
        if self.values is not None:
            return "{" + ", ".join(_show(v) for v in self.values) + "}"
        return self.domain.__qualname__

    @property
    def value_type(self) -> Any:
        """The type a checkpoint keeps this feature's value as (None until the first assignment)."""
        return typing.Optional[self.domain]  # noqa: UP007, UP045

    def check(self, value: Any, *, by: str) -> None:
        if value is None:
            raise FeatureResetError(
                f"{by} set feature {self.name!r} to None; a feature starts at None and an initialised feature "
                f"cannot be reset to None (its domain is {self.domain_text})"
            )
        if not self.contains(value):
            raise FeatureDomainError(
                f"{by} proposed {value!r} for feature {self.name!r}, which is outside its declared domain "
                f"{self.domain_text}"
            )

    # -- conditions -------------------------------------------------------------------------

    def equals(self, value: Any) -> Condition:
        self.check(value, by="a condition")
        return Condition(lambda f: f[self] == value, f"{self.name} == {_show(value)}", (self,))

    def differs(self, value: Any) -> Condition:
        self.check(value, by="a condition")
        return Condition(lambda f: f[self] != value, f"{self.name} != {_show(value)}", (self,))

    def one_of(self, *values: Any) -> Condition:
        for v in values:
            self.check(v, by="a condition")
        text = ", ".join(_show(v) for v in values)
        return Condition(lambda f: f[self] in values, f"{self.name} in {{{text}}}", (self,))

    def holds(self, test: Callable[[Any], bool], label: str) -> Condition:
        """A custom condition on this feature's value: `RETRIES.holds(lambda n: n < 3, "retries < 3")`."""
        return Condition(lambda f: bool(test(f[self])), label, (self,))

    # -- effects -----------------------------------------------------------------------------

    def assign(self, value: Any) -> Effect:
        """The edge admits a visit that leaves this feature at `value` (a first assignment included)."""
        self.check(value, by="an assign effect")
        return Effect(self, "assign", value=value)

    def unconstrained(self) -> Effect:
        """The edge admits any value of the domain for this feature (a first assignment included)."""
        return Effect(self, "unconstrained")

    def transition(self, old: Any, new: Any) -> Effect:
        """The edge admits the change `old` -> `new` only: not a first assignment (None is never `old`)."""
        self.check(old, by="a transition effect")
        self.check(new, by="a transition effect")
        return Effect(self, "transition", value=new, old=old)

    def __repr__(self) -> str:
        return f"<Feature {self.name} {self.domain_text}>"


@dataclass(frozen=True)
class Condition:
    """A test of the feature state before the source visit; combine with `&`, `|`, `~`."""

    test: Callable[[FeatureView], bool]
    label: str
    features: tuple[Feature, ...] = ()

    def evaluate(self, view: FeatureView) -> bool:
        return bool(self.test(view))

    def __and__(self, other: Condition) -> Condition:
        return Condition(
            lambda f: self.test(f) and other.test(f),
            f"({self.label}) and ({other.label})",
            self.features + other.features,
        )

    def __or__(self, other: Condition) -> Condition:
        return Condition(
            lambda f: self.test(f) or other.test(f),
            f"({self.label}) or ({other.label})",
            self.features + other.features,
        )

    def __invert__(self) -> Condition:
        return Condition(lambda f: not self.test(f), f"not ({self.label})", self.features)


@dataclass(frozen=True)
class Effect:
    """What an edge admits for one feature: `assign` a value, `unconstrained`, or a `transition`."""

    feature: Feature
    kind: Literal["assign", "unconstrained", "transition"]
    value: Any = None
    old: Any = None

    @property
    def label(self) -> str:
        name = self.feature.name
        if self.kind == "assign":
            return f"{name} := {_show(self.value)}"
        if self.kind == "unconstrained":
            return f"{name} := *"
        return f"{name}: {_show(self.old)} → {_show(self.value)}"

    def refuses(self, before: Any, proposed: Any) -> str | None:
        """Why this effect does not admit `before` -> `proposed` (None: it does)."""
        if self.kind == "unconstrained":
            return None
        if self.kind == "assign":
            return (
                None if proposed == self.value else f"{self.label} but the visit left it at {_show(proposed)}"
            )
        if before is None:
            return (
                f"{self.feature.name}'s first assignment (None → {_show(proposed)}) needs an assignment or "
                f"unconstrained effect, and this edge's effect is the transition {self.label}"
            )
        if before == self.old and proposed == self.value:
            return None
        return f"{self.label} does not admit {_show(before)} → {_show(proposed)}"


class FeatureView(Mapping[str, Any]):
    """The feature state a condition reads: `view[MODE]` raises ValueError while MODE is still None."""

    def __init__(self, values: Mapping[str, Any]):
        self._values = dict(values)

    def __getitem__(self, key: Feature | str) -> Any:
        name = key.name if isinstance(key, Feature) else key
        if name not in self._values:
            raise KeyError(f"no feature {name!r}; the subroutine declares {sorted(self._values)}")
        value = self._values[name]
        if value is None:
            raise FeatureUnsetError(
                f"a condition read feature {name!r}, which is still None (no visit has assigned it in this "
                "invocation); route through a Feature visit whose outgoing edge assigns it first"
            )
        return value

    def __iter__(self) -> Any:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass
class Proposal:
    """The feature values a Feature visit is proposing (starting from the state before it)."""

    features: Mapping[str, Feature]
    values: dict[str, Any]
    node: str


current_proposal: contextvars.ContextVar[Proposal | None] = contextvars.ContextVar(
    "graph_lab_feature_visit", default=None
)
"""The proposal of the Feature visit running now (set by the subroutine's station around the visit)."""


class FeatureState:
    """Read and propose feature values inside a Feature visit (seed 000)."""

    @staticmethod
    def _current(what: str, feature: Any) -> tuple[Proposal, str]:
        proposal = current_proposal.get()
        if proposal is None:
            raise RunStateError(
                f"FeatureState.{what} was called outside a Feature visit; declare the node with "
                "@sub.feature_node (a non-Feature visit cannot change feature state)"
            )
        name = feature.name if isinstance(feature, Feature) else feature
        if name not in proposal.features:
            raise FeatureDomainError(
                f"feature {name!r} is not declared in this subroutine (it declares {sorted(proposal.features)})"
            )
        return proposal, name

    @staticmethod
    def get(feature: Feature | str) -> Any:
        """The feature's value as proposed so far in this visit (None until first assigned)."""
        proposal, name = FeatureState._current("get", feature)
        return proposal.values[name]

    @staticmethod
    def replace(feature: Feature | str, value: Any) -> None:
        """Propose `value` (in the feature's domain, never None) for the feature."""
        proposal, name = FeatureState._current("replace", feature)
        proposal.features[name].check(value, by=f"Feature visit {proposal.node}")
        proposal.values[name] = value


def _show(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)
