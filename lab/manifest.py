"""The pinned description of a graph revision (seed 001 "Pattern binding").

A manifest lists the stations, the permitted edges and the checkpoint-schema id of one graph
definition, with a deterministic digest over all of them plus every station's source, so
editing a node's body in a notebook cell makes a new revision. The revision number is the
store's ordinal for a digest under a key; it is not part of the digest.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = ("END", "Station", "Manifest", "source_fingerprint", "check_key")

END = "__end__"
"""The manifest's name for the end of a graph (an edge to it means the station may return End)."""

StationKind = Literal["node", "step", "decision", "gate", "delegated", "map", "broadcast", "join"]
"""`map` and `broadcast` (pydantic-graph's forks) and `join` (qualname: its reducer) route results; they are never tasks."""

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_key(key: str) -> str:
    """Graph keys are URL-safe (seed 001): they name files, URLs and SQL rows."""
    if not isinstance(key, str) or not _KEY.match(key):
        from .errors import GraphDefinitionError

        raise GraphDefinitionError(
            f"graph name {key!r} is not URL-safe; use letters, digits, '_', '.' or '-' "
            "(at most 128, starting with a letter or digit)"
        )
    return key


@dataclass(frozen=True, slots=True)
class Station:
    """One executable node: its id, kind, class name, fields and a hash of its source."""

    node_id: str
    kind: StationKind
    qualname: str
    fields: tuple[str, ...]
    source_hash: str


@dataclass(frozen=True)
class Manifest:
    """Key, stations, permitted edges, checkpoint-schema id and digest of one graph definition."""

    key: str
    stations: tuple[Station, ...]
    edges: tuple[tuple[str, str], ...]
    schema_id: str
    state_type: str = ""
    """The declared state type's qualified name (diffs refuse to compare different types)."""
    engine: str = "serial"
    revision: int | None = None
    digest: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", self._compute_digest())

    def _compute_digest(self) -> str:
        body = self.to_json()
        body.pop("revision", None)
        body.pop("digest", None)
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:32]

    @property
    def station_ids(self) -> tuple[str, ...]:
        return tuple(s.node_id for s in self.stations)

    def station(self, node_id: str) -> Station | None:
        return next((s for s in self.stations if s.node_id == node_id), None)

    def successors(self, node_id: str) -> tuple[str, ...]:
        return tuple(dst for src, dst in self.edges if src == node_id)

    def permits(self, source: str, target: str) -> bool:
        return (source, target) in self._edge_set

    @property
    def _edge_set(self) -> frozenset[tuple[str, str]]:
        cached = self.__dict__.get("_edges_cache")
        if cached is None:
            cached = frozenset(self.edges)
            object.__setattr__(self, "_edges_cache", cached)
        return cached

    def with_revision(self, revision: int) -> Manifest:
        return replace(self, revision=revision, digest=self.digest)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "revision": self.revision,
            "engine": self.engine,
            "schema_id": self.schema_id,
            "state_type": self.state_type,
            "stations": [
                {
                    "node_id": s.node_id,
                    "kind": s.kind,
                    "qualname": s.qualname,
                    "fields": list(s.fields),
                    "source_hash": s.source_hash,
                }
                for s in self.stations
            ],
            "edges": [list(e) for e in self.edges],
            "digest": self.digest,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        return cls(
            key=data["key"],
            revision=data.get("revision"),
            engine=data.get("engine", "serial"),
            schema_id=data["schema_id"],
            state_type=data.get("state_type", ""),
            stations=tuple(
                Station(s["node_id"], s["kind"], s["qualname"], tuple(s["fields"]), s["source_hash"])
                for s in data["stations"]
            ),
            edges=tuple((a, b) for a, b in data["edges"]),
            digest=data.get("digest", ""),
        )

    def changes_from(self, old: Manifest) -> list[str]:
        """What changed from `old` to this manifest, in words a person can act on."""
        out: list[str] = []
        old_ids, new_ids = set(old.station_ids), set(self.station_ids)
        for sid in sorted(new_ids - old_ids):
            out.append(f"station {sid} was added")
        for sid in sorted(old_ids - new_ids):
            out.append(f"station {sid} was removed")
        for sid in sorted(old_ids & new_ids):
            a, b = old.station(sid), self.station(sid)
            assert a is not None and b is not None
            if a.fields != b.fields:
                out.append(f"station {sid} fields changed from {list(a.fields)} to {list(b.fields)}")
            if a.source_hash != b.source_hash:
                out.append(f"station {sid} source changed")
            if a.kind != b.kind:
                out.append(f"station {sid} kind changed from {a.kind} to {b.kind}")
        for src, dst in sorted(set(self.edges) - set(old.edges)):
            out.append(f"edge {src} -> {dst} was added")
        for src, dst in sorted(set(old.edges) - set(self.edges)):
            out.append(f"edge {src} -> {dst} was removed")
        if old.schema_id != self.schema_id and not any("fields changed" in c for c in out):
            out.append("the checkpoint schema (state or node field types) changed")
        return out or ["the graph definition changed"]


def source_fingerprint(obj: Any) -> str:
    """A hash of a class's (or function's) source, robust to classes defined in notebook cells.

    `inspect.getsource` of a class fails for `__main__` classes in a kernel on Python < 3.13, so
    fall back to the source of each function the class defines (their code objects point at the
    cell's file in `linecache`), then to the bytecode and constants.
    """
    pinned = vars(obj).get("__graphlab_source__") if inspect.isclass(obj) else None
    if isinstance(pinned, str):  # a batch worker's copy of a notebook class carries its driver's hash
        return pinned
    parts: list[str] = []
    try:
        parts.append(inspect.getsource(obj))
    except (OSError, TypeError):
        members = vars(obj).items() if inspect.isclass(obj) else [("", obj)]
        for name, member in sorted(members, key=lambda kv: kv[0]):
            fn = getattr(member, "__func__", member)
            if inspect.isfunction(fn):
                try:
                    parts.append(inspect.getsource(fn))
                except (OSError, TypeError):
                    code = fn.__code__
                    parts.append(f"{name}:{code.co_code.hex()}:{code.co_consts!r}")
            elif _is_declared_data(name):
                parts.append(f"{name}={_stable_repr(member)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _is_declared_data(name: str) -> bool:
    """Class attributes a person wrote (plus annotations), not ones Python or `abc` added."""
    if name == "__annotations__":
        return True
    return not name.startswith("__") and not name.startswith("_abc_")


def _stable_repr(value: Any) -> str:
    """A repr without memory addresses, so the same source hashes the same in every process."""
    return _ADDRESS.sub("", repr(value))
