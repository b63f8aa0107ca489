"""What a batch worker needs to declare the driver's graph again, in another process: a `Shipment`.

A graph handle holds its `Lab` (connections, locks, the loop) and cannot travel as it is; what it
declares can, whatever the kind: node classes, steps and edges, an adopted native graph, a
subroutine's definition, a workflow's definition and workers, and the policies and model options
on the handle. `Shipment.of(graph)` pickles the handle itself (Ray's cloudpickle: classes and
functions of an importable module travel by reference, a notebook's by value) with the parts
that belong to this process left behind:

- the `Lab` (every one) becomes a placeholder the worker fills with its own lab;
- the built revision (native graph, codec, manifest: a cache) is dropped, so the worker builds
  and pins it in its own store;
- runs, stores and views (a live drawing listening for changes, the kernel extension) are left
  out: a listener from a view becomes a no-op;
- an adopted graph's `namespace` (the locals where it was built, to resolve type hints) keeps
  only the types in it.

Each station class carries the driver's source fingerprint, and a function that travels by
value takes its notebook cell's source lines along, so the worker's graph has the driver's digest
even where the source cannot be read there (a notebook cell's code, pickled); the worker checks it.
The agent runtimes the graph's delegated stations name travel beside it (`runtimes.py`). A new
kind needs nothing here: it is shipped the same way, as long as its handle holds nothing but its
declarations and the lab.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import linecache
import os
import pickle
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..built import BuiltGraph
from ..errors import ArgumentError, LabError
from ..manifest import source_fingerprint
from ..run import Run
from ..store.base import Store
from .runtimes import ShippedRuntime, runtimes_for

if TYPE_CHECKING:
    from ..lab import Lab

__all__ = ("Shipment", "GraphShippingError", "repair_dataclass")

VIEW_MODULES = ("lab.widgets", "lab.render", "kernel_ext", "ipywidgets", "IPython", "comm", "ipykernel")
"""Modules whose objects are views of this process: never shipped (a listener of theirs becomes a no-op)."""

_LAB, _NONE, _NOOP = "lab", "none", "noop"


class GraphShippingError(LabError):
    """The graph holds something that cannot travel to a batch worker (named in the message)."""


def _noop(*args: Any, **kwargs: Any) -> None:
    """What a view's listener becomes in a batch worker: nothing watches there."""


def _from_view(obj: Any) -> bool:
    """Whether `obj` (or the object a bound method belongs to) is a view's: defined under `VIEW_MODULES`."""
    if inspect.ismethod(obj):
        obj = obj.__self__
    module = obj.__module__ if inspect.isfunction(obj) else type(obj).__module__
    return isinstance(module, str) and any(module == m or module.startswith(m + ".") for m in VIEW_MODULES)


def _types_only(namespace: dict[str, Any]) -> dict[str, Any]:
    """The names a type hint can mean: classes and typing constructs (not the notebook's data)."""
    keep = ("typing", "types", "typing_extensions", "collections.abc")
    return {
        k: v
        for k, v in namespace.items()
        if isinstance(v, type) or type(v).__module__ in keep or getattr(v, "__module__", None) in keep
    }


class _Pickler:
    """Ray's cloudpickle with the driver's process-bound objects replaced by placeholders."""

    def __init__(self, graph: Any, lab_type: type):
        try:
            from ray import cloudpickle
        except ImportError as exc:
            raise LabError(f"batch runs need Ray: pip install 'graph-lab[ray]' ({exc})") from None

        self.buffer = io.BytesIO()
        outer = self

        class Pickler(cloudpickle.CloudPickler):  # type: ignore[misc,name-defined]
            def persistent_id(self, obj: Any) -> Any:
                return outer.persistent_id(obj)

            def _dynamic_function_reduce(self, func: Any) -> Any:  # a function that travels by value
                outer.keep_source(func)
                reduced = super()._dynamic_function_reduce(func)
                return with_annotation_globals(func, reduced)

        self.pickler = Pickler(self.buffer, protocol=pickle.HIGHEST_PROTOCOL)
        self.graph = graph
        self.lab_type = lab_type
        self.namespace = getattr(graph, "namespace", None)
        self.sources: dict[str, list[str]] = {}
        """The source lines of notebook cells whose functions travel by value, by file name."""

    def keep_source(self, func: Any) -> None:
        """Keep the lines of `func`'s cell when they live only in this process's `linecache` (a
        notebook's cell): the worker reads the same source, so its fingerprint (the revision) is ours."""
        filename = getattr(getattr(func, "__code__", None), "co_filename", None)
        if isinstance(filename, str) and filename not in self.sources and not os.path.exists(filename):
            lines = linecache.getlines(filename)
            if lines:
                self.sources[filename] = list(lines)

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, self.lab_type):
            return (_LAB,)
        if isinstance(obj, BuiltGraph | Run | Store):
            return (_NONE,)
        if obj is self.namespace and isinstance(obj, dict):
            return ("value", _types_only(obj))
        if not isinstance(obj, type) and _from_view(obj):
            return (_NOOP,) if callable(obj) else (_NONE,)
        return None

    def dumps(self, value: Any) -> bytes:
        self.pickler.dump(value)
        return self.buffer.getvalue()


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def with_annotation_globals(func: Any, reduced: Any) -> Any:
    """`reduced` (cloudpickle's reduction of `func` by value) with the globals its string annotations
    name: cloudpickle keeps only the globals the code uses, and a hint such as
    `ctx: StepContext[State, None, int]` is read in the worker (the revision's types, its edges)."""
    try:
        slotstate = reduced[2][1]
        kept = slotstate["__globals__"]
    except (IndexError, KeyError, TypeError):  # another cloudpickle's shape: ship what it ships
        return reduced
    names = func.__globals__
    for hint in getattr(func, "__annotations__", {}).values():
        if isinstance(hint, str):
            for name in _NAME.findall(hint):
                if name in names and name not in kept:
                    kept[name] = names[name]
    return reduced


class _Unpickler(pickle.Unpickler):
    def __init__(self, blob: bytes, lab: Any):
        super().__init__(io.BytesIO(blob))
        self.lab = lab

    def persistent_load(self, pid: Any) -> Any:
        what = pid[0]
        if what == _LAB:
            return self.lab
        if what == _NOOP:
            return _noop
        if what == "value":
            return pid[1]
        return None


@dataclass
class Shipment:
    """A graph of any kind, as the batch hands it to a worker: `declare(lab)` makes the same graph
    (same name, same digest) in the worker's `lab`."""

    name: str
    digest: str
    blob: bytes
    """The pickled graph handle and its station classes with their fingerprints (see the module docs)."""
    runtimes: list[ShippedRuntime] = field(default_factory=list)
    """The agent runtimes its delegated stations name, registered in the worker's lab first."""
    sources: dict[str, list[str]] = field(default_factory=dict)
    """Notebook cells' source lines, by file name, for the functions that travel by value."""

    @classmethod
    def of(cls, graph: Any) -> Shipment:
        """The shipment of `graph` (any kind a lab declares: it builds here first, so a graph that
        cannot build is refused before any run is created)."""
        lab = getattr(graph, "lab", None)
        build = getattr(graph, "build", None)
        if lab is None or not callable(build) or not isinstance(getattr(graph, "name", None), str):
            raise ArgumentError(
                f"lab.map({graph!r}, ...): pass a graph of this lab (lab.graph, lab.adopt, lab.subroutine, "
                "lab.workflow), not its native graph or a run"
            )
        built = build()
        pins = [(c, source_fingerprint(c)) for c in _station_classes(built)]
        try:
            pickler = _Pickler(graph, type(lab))
            blob = pickler.dumps((graph, pins))
        except Exception as exc:  # cloudpickle raises whatever the object raises
            raise GraphShippingError(
                f"lab.map: graph {graph.name!r} cannot travel to a Ray worker: {type(exc).__name__}: {exc}. "
                "Define what its stations use (classes, functions, the objects they close over) in the notebook "
                "or an importable module, not in objects bound to this process (connections, locks, threads)"
            ) from None
        return cls(graph.name, built.manifest.digest, blob, runtimes_for(lab, built), pickler.sources)

    def declare(self, lab: Lab) -> Any:
        """The graph in `lab` (a worker's), checked to be the driver's revision (same digest)."""
        for rt in self.runtimes:
            rt.register(lab)
        for filename, lines in self.sources.items():  # mtime None: linecache keeps it (as IPython's cells)
            linecache.cache.setdefault(filename, (sum(map(len, lines)), None, lines, filename))
        graph, pins = _Unpickler(self.blob, lab).load()
        for tp in (getattr(graph, a, None) for a in ("state_type", "deps_type", "output_type", "input_type")):
            repair_dataclass(tp)
        for station, fingerprint in pins:
            repair_dataclass(station)
            if "__graphlab_source__" not in vars(station):
                station.__graphlab_source__ = fingerprint
        lab.add_graph(graph)
        digest = graph.build().manifest.digest
        if digest != self.digest:
            raise GraphShippingError(
                f"the batch worker built graph {self.name!r} with digest {digest}, not the notebook's {self.digest}: "
                "its code differs between the processes; define it in the notebook (or an importable module) "
                "and start the batch again"
            )
        return graph


def _station_classes(built: BuiltGraph) -> list[type]:
    """The classes that run the graph's stations (node classes, generated stations), whatever the kind."""
    out: list[type] = []
    for station in built.nodes.values():
        cls = getattr(station, "node_type", station)  # a native NodeStep wraps its class
        if inspect.isclass(cls) and cls not in out:
            out.append(cls)
    return out


def repair_dataclass(tp: Any) -> None:
    """A dataclass pickled by value (a notebook's) comes back with copies of `dataclasses.MISSING`
    in its fields, which pydantic reads as "both a default and a default factory": restore the
    sentinel, so the worker's schema (and digest) is the notebook's."""
    fields = getattr(tp, "__dataclass_fields__", None) if isinstance(tp, type) else None
    if not isinstance(fields, dict):
        return
    for f in fields.values():
        for attr in ("default", "default_factory"):
            value = getattr(f, attr, dataclasses.MISSING)
            if value is not dataclasses.MISSING and type(value).__name__ == "_MISSING_TYPE":
                setattr(f, attr, dataclasses.MISSING)

