"""The agent runtimes a graph's delegated stations need, shipped to a batch worker beside the graph.

`lab.agents.register("planner", agent)` lives in the notebook's lab; a batch worker has a lab of
its own, where a delegated station's job runs. Each runtime a station names travels as what the
worker can register again: its `target` ("module:attribute") when it was given one or when the
agent is an attribute of an importable module, else the agent itself when it pickles. An agent
that is neither (a pydantic-ai `Agent` made in a notebook cell holds context variables, which do
not pickle) is refused before any run is created, with what to do.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import LabError

if TYPE_CHECKING:
    from ..built import BuiltGraph
    from ..lab import Lab

__all__ = ("ShippedRuntime", "runtimes_for", "RuntimeShippingError")


class RuntimeShippingError(LabError):
    """An agent runtime a graph needs cannot reach the batch workers (the message says what to do)."""


@dataclass(frozen=True)
class ShippedRuntime:
    """One registration, as a worker makes it again: `lab.agents.register(name, agent, target=, runner=)`."""

    name: str
    runner: str
    target: str | None = None
    agent: Any = None

    def register(self, lab: Lab) -> None:
        lab.agents.register(self.name, self.agent, target=self.target, runner=self.runner)


def runtime_names(built: BuiltGraph) -> list[str]:
    """The runtimes the graph's delegated stations name, in station order."""
    from ..agents.node import DelegatedAgentNode

    names: list[str] = []
    for station in built.nodes.values():
        cls = getattr(station, "node_type", station)
        if inspect.isclass(cls) and issubclass(cls, DelegatedAgentNode):
            name = getattr(cls, "runtime", None)
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return names


def runtimes_for(lab: Lab, built: BuiltGraph) -> list[ShippedRuntime]:
    """What the workers need to register for `built`'s delegated stations (nothing for other graphs)."""
    names = runtime_names(built)
    if not names:
        return []
    board = lab.agents
    out = []
    for name in names:
        rt = board.runtime(name)  # an unregistered name is refused here, as at the station
        target = rt.target or _importable(rt.agent)
        if target is not None:
            out.append(ShippedRuntime(name, rt.runner, target=target))
        elif _pickles(rt.agent):
            out.append(ShippedRuntime(name, rt.runner, agent=rt.agent))
        else:
            raise RuntimeShippingError(
                f"lab.map: the agent registered as {name!r} lives only in this process (a notebook cell's agent "
                "cannot travel to a Ray worker); define it in a module and register it with "
                f"lab.agents.register({name!r}, target='package.module:attribute')"
            )
    return out


def _importable(agent: Any) -> str | None:
    """'module:attribute' of an importable module (not the notebook) that holds `agent`, if one does."""
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name == "__main__" or not getattr(module, "__file__", None):
            continue
        try:
            names = vars(module)
        except TypeError:
            continue
        for attr, value in list(names.items()):
            if value is agent and not attr.startswith("_"):
                return f"{module_name}:{attr}"
    return None


def _pickles(agent: Any) -> bool:
    from ray import cloudpickle

    try:
        cloudpickle.dumps(agent)
    except Exception:  # whatever the object raises: it cannot travel
        return False
    return True
