"""Reading pydantic-graph v1's snapshot documents (the 1.x persistence wire envelope).

Seed 001 ("Checkpoint Ownership"): "The codec preserves the supported v1 wire envelope while
validating state and output against the pinned graph and resolving node ids only from its
declared classes. Unknown nodes or node fields, duplicate snapshot ids, and multiple created
cursors fail explicitly. A pending snapshot remains decodable but is not automatically replayed;
neither running nor error status grants a new attempt." And ("Runtime migration"): captured
consent, delegated and hardware-wait documents "exercise the owned decoder".

A v1 document is what `FileStatePersistence` wrote: a JSON array of snapshots, oldest first,

    {"kind": "node", "id": "Draft:5f0c...", "status": "success", "start_ts": "...", "duration": 0.1,
     "state": {...}, "node": {"node_id": "Draft", ...the node's fields}}
    {"kind": "end", "id": "end:9a1b...", "ts": "...", "state": {...}, "result": {"data": ...}}

with statuses `created` (not yet run: the cursor), `pending` (taken by a runner, not yet run),
`running`, `success` and `error`. `decode_v1` validates every snapshot against the lab's pinned
graph (`SnapshotCodec`: state, node fields, End data) and keeps the envelope (ids, statuses,
times), so `V1Document.to_json()` writes the same document back. `V1Document.continuation()`
is the one snapshot a run may continue from; `lab.continue_v1(graph, document)` starts a lab
run there (lab/v1_import.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .codec import NodeCodec, SnapshotCodec
from .errors import CheckpointError

__all__ = ("V1Snapshot", "V1Document", "decode_v1", "V1_STATUSES")

V1Status = Literal["created", "pending", "running", "success", "error"]
V1_STATUSES: frozenset[str] = frozenset({"created", "pending", "running", "success", "error"})
_NODE_KEYS = frozenset({"kind", "id", "status", "start_ts", "duration", "state", "node"})
_END_KEYS = frozenset({"kind", "id", "ts", "state", "result"})
_WHAT = "the v1 snapshot document"


@dataclass(frozen=True, slots=True)
class V1Snapshot:
    """One snapshot of a v1 document, decoded against the pinned graph, with its envelope kept."""

    id: str
    kind: Literal["node", "end"]
    state: Any
    """The state before the node ran (node), or at End (end): an instance of the graph's state type."""
    node: Any = None
    """The node to run (a node snapshot): an instance of the graph's declared class."""
    status: V1Status | None = None
    result: Any = None
    """The End data (an end snapshot), validated as the graph's output type."""
    envelope: Mapping[str, Any] | None = None
    """`start_ts` and `duration` (node) or `ts` (end), as the document wrote them."""

    @property
    def node_id(self) -> str | None:
        return type(self.node).get_node_id() if self.node is not None else None


@dataclass(frozen=True, slots=True)
class V1Document:
    """A decoded v1 snapshot document."""

    snapshots: tuple[V1Snapshot, ...]
    codec: SnapshotCodec

    @property
    def ended(self) -> bool:
        return bool(self.snapshots) and self.snapshots[-1].kind == "end"

    @property
    def cursor(self) -> V1Snapshot | None:
        """The `created` snapshot: the station the v1 run would run next (there is at most one)."""
        return next((s for s in self.snapshots if s.kind == "node" and s.status == "created"), None)

    def snapshot(self, snapshot_id: str) -> V1Snapshot:
        for s in self.snapshots:
            if s.id == snapshot_id:
                return s
        raise CheckpointError(f"{_WHAT} has no snapshot {snapshot_id!r}; its ids are {[s.id for s in self.snapshots]}")

    def continuation(self, at: str | None = None) -> V1Snapshot:
        """The snapshot a run continues from: the `created` cursor, or a `pending` one named by `at`.

        A pending snapshot was taken by a runner that may have started it, so it is never replayed
        unless named; a `running` or `error` one never grants a new attempt (seed 001).
        """
        if self.ended:
            raise CheckpointError(f"{_WHAT} ends with End ({self.snapshots[-1].id}): the v1 run is over, nothing continues")
        cursor = self.cursor
        if at is None:
            if cursor is not None:
                return cursor
            last = next((s for s in reversed(self.snapshots) if s.kind == "node"), None)
            if last is not None and last.status == "pending":
                raise CheckpointError(
                    f"{_WHAT}'s last snapshot {last.id!r} ({last.node_id}) is pending: a runner took it and may "
                    "have started it, so it is not replayed automatically (seed 001). If you know it never ran, name "
                    f"it: lab.continue_v1(graph, document, at={last.id!r})"
                )
            state = f"its last snapshot {last.id!r} is {last.status}" if last is not None else "it holds no node snapshot"
            raise CheckpointError(
                f"{_WHAT} has no created snapshot to continue from ({state}); a running or error snapshot never "
                "grants a new attempt (seed 001): start a new run from a state you choose with g.start(..., at_any_station=True)"
            )
        snap = self.snapshot(at)
        if snap.kind == "node" and snap.status in ("created", "pending"):
            if cursor is not None and snap is not cursor:
                raise CheckpointError(f"{_WHAT} continues at its created snapshot {cursor.id!r}, not at {at!r}")
            return snap
        raise CheckpointError(
            f"snapshot {at!r} of {_WHAT} is {snap.status or snap.kind}: only the created cursor or a pending snapshot "
            "can be continued; neither running nor error grants a new attempt (seed 001)"
        )

    def to_json(self) -> list[dict[str, Any]]:
        """The document as v1 wrote it: the envelope kept, state, node fields and End data re-encoded."""
        out: list[dict[str, Any]] = []
        for s in self.snapshots:
            env = dict(s.envelope or {})
            state = self.codec.encode_state(s.state)
            if s.kind == "end":
                out.append({"state": state, "result": {"data": self.codec.encode_output(s.result)}, **env, "kind": "end", "id": s.id})
            else:
                station = self.codec.encode_node(s.node)
                node = {"node_id": station.node_id, **station.fields}
                out.append({"state": state, "node": node, **env, "status": s.status, "kind": "node", "id": s.id})
        return out


def decode_v1(document: str | bytes | Sequence[Any], codec: SnapshotCodec) -> V1Document:
    """Decode a v1 snapshot document (JSON text, or the parsed array) against a graph's codec.

    Raises `CheckpointError` naming the snapshot for anything the pinned graph cannot read: a
    malformed envelope, an unknown node id or field, a state or End data that does not validate,
    a duplicate snapshot id, more than one created cursor, a snapshot after End.
    """
    if isinstance(document, (str, bytes, bytearray)):
        try:
            document = json.loads(document)
        except ValueError as exc:
            raise CheckpointError(f"{_WHAT} is not JSON ({exc})") from None
    if not isinstance(document, Sequence) or isinstance(document, (str, bytes, bytearray)):
        raise CheckpointError(f"{_WHAT} must be a JSON array of snapshots, got {type(document).__name__}")
    snapshots: list[V1Snapshot] = []
    seen: set[str] = set()
    for i, raw in enumerate(document):
        snap = _decode_one(i, raw, codec)
        if snap.id in seen:
            raise CheckpointError(f"{_WHAT} holds the snapshot id {snap.id!r} twice (snapshot {i}); snapshot ids are unique (seed 001)")
        seen.add(snap.id)
        if snapshots and snapshots[-1].kind == "end":
            raise CheckpointError(f"{_WHAT} has snapshot {i} ({snap.id!r}) after its End snapshot {snapshots[-1].id!r}")
        snapshots.append(snap)
    created = [s.id for s in snapshots if s.kind == "node" and s.status == "created"]
    if len(created) > 1:
        raise CheckpointError(
            f"{_WHAT} has {len(created)} created snapshots {created}: which one runs next is ambiguous, so it is "
            "refused (seed 001: multiple created cursors fail explicitly)"
        )
    return V1Document(tuple(snapshots), codec)


def _decode_one(i: int, raw: Any, codec: SnapshotCodec) -> V1Snapshot:
    where = f"snapshot {i} of {_WHAT}"
    if not isinstance(raw, Mapping):
        raise CheckpointError(f"{where} must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in ("node", "end"):
        raise CheckpointError(f"{where} has kind {kind!r}; v1 snapshots are 'node' or 'end'")
    sid = raw.get("id")
    if not isinstance(sid, str) or not sid or sid == "__unset__":
        raise CheckpointError(f"{where} has no snapshot id (got {sid!r})")
    where = f"snapshot {sid!r} of {_WHAT}"
    allowed = _NODE_KEYS if kind == "node" else _END_KEYS
    unknown = set(raw) - allowed
    if unknown:
        raise CheckpointError(f"{where} has unknown envelope field(s) {sorted(unknown)}; a v1 {kind} snapshot has {sorted(allowed)}")
    if "state" not in raw:
        raise CheckpointError(f"{where} has no state")
    state = _with_where(where, lambda: codec.decode_state(raw["state"]))
    if kind == "end":
        result = raw.get("result")
        if not isinstance(result, Mapping) or set(result) != {"data"}:
            raise CheckpointError(f"{where}: result must be {{'data': ...}} (v1's End), got {result!r}")
        data = _with_where(where, lambda: codec.decode_output(result["data"]))
        return V1Snapshot(sid, "end", state, result=data, envelope={k: raw[k] for k in ("ts",) if k in raw})
    status = raw.get("status", "created")
    if status not in V1_STATUSES:
        raise CheckpointError(f"{where} has status {status!r}; v1 statuses are {sorted(V1_STATUSES)}")
    node = raw.get("node")
    if not isinstance(node, Mapping) or not isinstance(node.get("node_id"), str):
        raise CheckpointError(f"{where}: node must be an object with its node_id (the envelope's), got {node!r}")
    node_codec = _with_where(where, lambda: codec.node(node["node_id"]))
    if not isinstance(node_codec, NodeCodec):
        raise CheckpointError(f"{where}: {node['node_id']} is a step, not a BaseNode station; v1 documents hold BaseNode stations")
    fields = {k: v for k, v in node.items() if k != "node_id"}  # node_id belongs to the envelope (seed 001)
    decoded = _with_where(where, lambda: node_codec.decode(fields))
    env = {k: raw[k] for k in ("start_ts", "duration") if k in raw}
    return V1Snapshot(sid, "node", state, node=decoded, status=status, envelope=env)


def _with_where(where: str, fn: Any) -> Any:
    """`fn()`, a `CheckpointError` it raises prefixed with which snapshot failed."""
    try:
        return fn()
    except CheckpointError as exc:
        raise CheckpointError(f"{where}: {exc}") from exc
