"""The snapshot codec: state, node fields and output to JSON and back, validated.

pydantic-graph v2 has no persistence API, so the lab owns this codec (seed 001 "Checkpoint
Ownership"). Encoding uses pydantic `TypeAdapter`s of the declared types; decoding resolves
node ids only from the pinned graph's declared classes and checks constructor fields before
writing and after reading, so a checkpoint can never silently gain or lose a field. Nothing
is ever pickled.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import reprlib
from collections.abc import Mapping
from functools import cached_property
from typing import Any, get_type_hints

from pydantic import TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError, PydanticUserError

from .engine.tasks import JoinAcc, Task, TaskInput
from .errors import CheckpointError, CheckpointValueError, StateContractError
from .fork_stacks import StackEncoder, decode_stack
from .records import PendingStation

__all__ = ("SnapshotCodec", "NodeCodec", "InputCodec", "node_init_fields")

_RESERVED_FIELDS = frozenset({"node_id"})

STORED_WAY_FORWARD = (
    "; the stored checkpoint does not match the run's pinned graph (was the store edited by hand?). "
    "Other runs and checkpoints are unaffected: fork the run from an earlier checkpoint "
    "(lab.fork(run_id, seq)), or restore the store file from a backup"
)
"""Appended to a decoding error of a stored checkpoint (one named by run and seq): what to do."""


def _way_forward(run_id: str | None) -> str:
    return STORED_WAY_FORWARD if run_id is not None else ""


def node_init_fields(cls: type, localns: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The constructor fields of a node class with their resolved types.

    A node is a dataclass (its fields are its continuation data) or takes no arguments.
    `localns` resolves names defined where the graph was built (a function's locals).
    """
    if dataclasses.is_dataclass(cls):
        try:
            hints = get_type_hints(cls, localns=dict(localns) if localns else None)
        except Exception as exc:  # NameError and friends from forward references
            raise StateContractError(
                f"node {cls.__name__}: cannot resolve the type of its fields ({exc}); "
                "make every field annotation importable from the module that defines the node"
            ) from exc
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}
    params = [
        p for p in inspect.signature(cls).parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if params:
        raise StateContractError(
            f"node {cls.__name__} takes constructor arguments but is not a dataclass; "
            "decorate it with @dataclass so its fields can be checkpointed"
        )
    return {}


class NodeCodec:
    """Encodes one node class's constructor fields as JSON and rebuilds the node from them."""

    def __init__(self, node_id: str, cls: type, *, localns: Mapping[str, Any] | None = None):
        self.node_id = node_id
        self.cls = cls
        self.fields = node_init_fields(cls, localns)
        clash = _RESERVED_FIELDS & set(self.fields)
        if clash:
            raise StateContractError(
                f"node {node_id} declares a field named {sorted(clash)[0]!r}, which belongs to the "
                "checkpoint envelope (seed 001); rename the field"
            )
        self._adapters: dict[str, TypeAdapter[Any]] = {}
        self._constant = PendingStation(node_id, {}) if not self.fields else None
        for name, tp in self.fields.items():
            try:
                self._adapters[name] = TypeAdapter(tp)
            except (PydanticSchemaGenerationError, PydanticUserError) as exc:
                raise StateContractError(
                    f"node {node_id} field {name!r} has type {_type_name(tp)}, which does not round-trip "
                    "through JSON; keep live objects (clients, files, sessions) in deps and pass plain data "
                    "between nodes"
                ) from exc

    def encode(self, node: Any) -> PendingStation:
        if type(node) is not self.cls:
            raise StateContractError(
                f"expected a {self.node_id} node of the graph as declared now, got {type(node).__qualname__}"
            )
        if self._constant is not None:  # no fields: one frozen value serves every visit
            return self._constant
        out: dict[str, Any] = {}
        for name, adapter in self._adapters.items():
            out[name] = checked_dump(adapter, getattr(node, name), f"node {self.node_id} field {name!r}", self.fields[name])
        return PendingStation(self.node_id, out)

    def decode(self, fields: Mapping[str, Any], *, run_id: str | None = None, seq: int | None = None) -> Any:
        if not isinstance(fields, Mapping):
            raise CheckpointError(
                f"node {self.node_id} fields must be a JSON object, got {type(fields).__name__}" + _way_forward(run_id),
                run_id=run_id,
                seq=seq,
            )
        unknown = set(fields) - set(self.fields)
        missing = set(self.fields) - set(fields)
        if unknown or missing:
            parts = []
            if unknown:
                parts.append(f"unknown field(s) {sorted(unknown)}")
            if missing:
                parts.append(f"missing field(s) {sorted(missing)}")
            raise CheckpointError(
                f"node {self.node_id}: {' and '.join(parts)}; the checkpoint does not match the "
                "node as declared (was the node's dataclass changed? fork onto the new revision)"
                + _way_forward(run_id),
                run_id=run_id,
                seq=seq,
            )
        kwargs = {}
        for name, adapter in self._adapters.items():
            try:
                kwargs[name] = adapter.validate_python(fields[name])
            except ValidationError as exc:
                raise CheckpointError(
                    f"node {self.node_id} field {name!r} does not validate: {_first_error(exc)}" + _way_forward(run_id),
                    run_id=run_id,
                    seq=seq,
                ) from exc
        return self.cls(**kwargs)


class InputCodec:
    """Encodes the input value of a step, decision, start or end task under its declared type.

    This is the checkpoint contract the lab admits for function steps (seed 001 refuses them for
    lack of one): the value is written as `{"inputs": <json>}` and must read back equal.
    """

    def __init__(self, node_id: str, input_type: Any, *, what: str = "step", field: str = "inputs"):
        self.node_id = node_id
        self.input_type = input_type
        self.field = field
        self.fields = {field: input_type}
        try:
            self._adapter: TypeAdapter[Any] = TypeAdapter(input_type)
        except (PydanticSchemaGenerationError, PydanticUserError) as exc:
            raise StateContractError(
                f"{what} {node_id}'s input type {_type_name(input_type)} does not round-trip through JSON "
                f"({_short(exc)}); pass plain data (dataclasses, pydantic models, str, numbers, lists, dicts) "
                "between steps and keep live objects (clients, files, sessions) in deps"
            ) from exc

    def encode(self, task: Any) -> PendingStation:
        value = task.inputs if isinstance(task, TaskInput) else task
        try:
            data = self._adapter.dump_python(value, mode="json")
            again = self._adapter.validate_python(data)
        except Exception as exc:
            raise StateContractError(
                f"the input of {self.node_id} ({type(value).__qualname__}) cannot be checkpointed as "
                f"{_type_name(self.input_type)}: {_short(exc)}; pass plain data between steps"
            ) from exc
        if again != value:
            raise StateContractError(
                f"the input of {self.node_id} changes when written as JSON and read back ({value!r} became "
                f"{again!r}); use a JSON-friendly type (with __eq__) for it"
            )
        return PendingStation(self.node_id, {self.field: data})

    def decode(self, fields: Mapping[str, Any], *, run_id: str | None = None, seq: int | None = None) -> TaskInput:
        if not isinstance(fields, Mapping) or set(fields) != {self.field}:
            raise CheckpointError(
                f"task {self.node_id} must be stored as {{\"{self.field}\": ...}}, got {fields!r}" + _way_forward(run_id),
                run_id=run_id,
                seq=seq,
            )
        try:
            return TaskInput(self.node_id, self._adapter.validate_python(fields[self.field]))
        except ValidationError as exc:
            raise CheckpointError(
                f"the input of {self.node_id} does not validate: {_first_error(exc)}" + _way_forward(run_id),
                run_id=run_id,
                seq=seq,
            ) from exc


class SnapshotCodec:
    """State, node and output codec for one pinned graph revision."""

    def __init__(
        self,
        *,
        state_type: Any,
        output_type: Any,
        nodes: Mapping[str, type],
        inputs: Mapping[str, InputCodec | NodeCodec] | None = None,
    ):
        self.state_type = state_type
        self.output_type = output_type
        self._node_classes = dict(nodes)
        self._nodes: dict[str, NodeCodec | InputCodec] = dict(inputs or {})
        self._by_class: dict[type, NodeCodec] = {}
        """Node classes already encoded once: their codec, found by the class alone (the hot path)."""
        self._stacks = StackEncoder()
        """A parallel task's fork stack folded as stored (lab/fork_stacks.py), one frame more at a time."""

    @cached_property
    def _state(self) -> TypeAdapter[Any]:
        try:
            return TypeAdapter(self.state_type)
        except (PydanticSchemaGenerationError, PydanticUserError) as exc:
            raise StateContractError(
                f"state type {_type_name(self.state_type)} does not round-trip through JSON ({_short(exc)}); "
                "keep live objects (clients, open files, sessions, locks) in deps, not in state "
                "(seed 001 'State and dependencies')"
            ) from exc

    @cached_property
    def _output(self) -> TypeAdapter[Any]:
        try:
            return TypeAdapter(self.output_type)
        except (PydanticSchemaGenerationError, PydanticUserError) as exc:
            raise StateContractError(
                f"output type {_type_name(self.output_type)} does not round-trip through JSON; "
                "return plain data from End(...)"
            ) from exc

    def node(self, node_id: str, *, run_id: str | None = None, seq: int | None = None) -> NodeCodec | InputCodec:
        codec = self._nodes.get(node_id)
        if codec is None:
            cls = self._node_classes.get(node_id)
            if cls is None:
                raise CheckpointError(
                    f"unknown node id {node_id!r}; the graph declares {sorted(set(self._node_classes) | set(self._nodes))}"
                    + _way_forward(run_id),
                    run_id=run_id,
                    seq=seq,
                )
            codec = self._nodes[node_id] = NodeCodec(node_id, cls)
        return codec

    def check_contract(self, state: Any) -> None:
        """Refuse, before anything runs, a state that would not survive a checkpoint."""
        for node_id in self._node_classes:
            self.node(node_id)
        self.encode_state(state)

    def encode_state(self, state: Any) -> Any:
        """The state as JSON, refused (naming the field) unless it validates and reads back equal.

        A state class of plain scalar fields (`_flat_fields`) is checked once per type, not per
        value: its fields holding exactly their declared `int`, `str` or `bool` is what makes it
        validate and read back equal, so that is all the value is checked for (anything else takes
        the full check, which names what is wrong).
        """
        flat = self._state_flat
        if flat is not None and type(state) is flat[0]:
            data = {}
            for name, tp in flat[1]:
                value = getattr(state, name, None)
                if type(value) is not tp:
                    break
                data[name] = value
            else:
                return data
        return checked_dump(self._state, state, "state", self.state_type, loose=self._state_loose)

    @property
    def state_checked_per_type(self) -> bool:
        """The state class is plain scalar fields: `encode_state` checks each value's field types only."""
        return self._state_flat is not None

    @cached_property
    def _state_flat(self) -> tuple[type, tuple[tuple[str, type], ...]] | None:
        return _flat_fields(self._state.core_schema)

    def validate_state(self, value: Any) -> Any:
        """`value` validated as the state type (pydantic's `ValidationError` when it does not): an edited
        or forked state, checked before anything is written."""
        return self._state.validate_python(value)

    @cached_property
    def _state_loose(self) -> bool:
        return _has_any(self._state.core_schema)

    def decode_state(self, data: Any, *, run_id: str | None = None, seq: int | None = None) -> Any:
        try:
            return self._state.validate_python(data)
        except ValidationError as exc:
            raise CheckpointError(
                f"state no longer validates as {_type_name(self.state_type)}: {_first_error(exc)}"
                + _way_forward(run_id),
                run_id=run_id,
                seq=seq,
            ) from exc

    def encode_node(self, node: Any) -> PendingStation:
        known = self._by_class.get(type(node))
        if known is not None:
            return known.encode(node)
        if isinstance(node, TaskInput):
            return self.node(node.node_id).encode(node)
        if isinstance(node, Task):
            inner = self.encode_node(node.station)
            meta = {"task": node.task_id, "fork_stack": self._stacks.encode(node.fork_stack)}
            return PendingStation(inner.node_id, inner.fields, meta)
        if isinstance(node, JoinAcc):
            inner = self.node(node.node_id).encode(TaskInput(node.node_id, node.value))
            meta = {
                "join": {
                    "fork_run": node.fork_run,
                    "arrived": node.arrived,
                    "waiting_for": list(node.waiting_for),
                    "downstream_fork_stack": self._stacks.encode(node.downstream),
                    "cancelled_siblings": node.cancelled_siblings,
                }
            }
            return PendingStation(node.node_id, inner.fields, meta)
        node_id = type(node).get_node_id() if hasattr(type(node), "get_node_id") else type(node).__name__
        codec = self.node(node_id)
        station = codec.encode(node)  # refuses a class that is not the one declared under node_id
        if isinstance(codec, NodeCodec):
            self._by_class[type(node)] = codec
        return station

    def decode_node(self, station: PendingStation, *, run_id: str | None = None, seq: int | None = None) -> Any:
        decoded = self.node(station.node_id, run_id=run_id, seq=seq).decode(station.fields, run_id=run_id, seq=seq)
        meta = station.meta
        if not meta:
            return decoded
        try:
            if "join" in meta:
                j = meta["join"]
                return JoinAcc(
                    node_id=station.node_id,
                    fork_run=int(j["fork_run"]),
                    value=decoded.inputs,
                    downstream=decode_stack(j["downstream_fork_stack"]),
                    arrived=int(j.get("arrived", 0)),
                    cancelled_siblings=bool(j.get("cancelled_siblings", False)),
                    waiting_for=tuple(int(t) for t in j.get("waiting_for", ())),
                )
            inputs = decoded.inputs if isinstance(decoded, TaskInput) else decoded
            stack = decode_stack(meta["fork_stack"])
            return Task(int(meta["task"]), station.node_id, inputs, stack)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(
                f"the frontier entry of {station.node_id} is damaged ({exc!r})" + _way_forward(run_id),
                run_id=run_id,
                seq=seq,
            ) from None

    def encode_output(self, value: Any) -> Any:
        return checked_dump(self._output, value, "End data", self.output_type)

    def decode_output(self, data: Any, *, run_id: str | None = None) -> Any:
        try:
            return self._output.validate_python(data)
        except ValidationError as exc:
            raise CheckpointError(
                f"stored output no longer validates as {_type_name(self.output_type)}: {_first_error(exc)}",
                run_id=run_id,
            ) from exc

    def schema_id(self) -> str:
        """A stable description of the checkpoint shape: state schema plus every node's fields."""
        parts: dict[str, Any] = {"state": _schema_or_name(self.state_type)}
        for node_id in sorted(self._node_classes):
            parts[node_id] = {name: _schema_or_name(tp) for name, tp in self.node(node_id).fields.items()}
        return json.dumps(parts, sort_keys=True, default=str)


_LIVE = "; keep live objects (clients, open files, sessions) in deps, not in checkpointed values"
_INVALID = "; a checkpoint stores only values of the declared type: fix the value (or the declaration)"
_CHANGES = (
    "; a checkpoint must read back equal: declare a precise type for it (dict[int, str], tuple[int, ...]) "
    "or use plain JSON data (str keys, lists)"
)


def checked_dump(adapter: TypeAdapter[Any], value: Any, what: str, declared: Any, *, loose: bool = True) -> Any:
    """`value` as JSON under `adapter`, or a `CheckpointValueError` naming the field that is wrong.

    The JSON is validated back and compared *as values* with `value`: a value the declared type
    does not admit (None in an int field), or one JSON changes (int dict keys, a tuple in an Any
    field), is refused instead of being stored and failing on resume. `loose` types (holding Any
    somewhere) are first searched for iterators, which serialising would consume.
    """
    if loose:
        where = _iterator_in(value)
        if where is not None:
            path, obj = where
            raise CheckpointValueError(
                f"{_at(what, path)} holds {type(obj).__qualname__} (an iterator or open file), which "
                f"cannot be checkpointed; nothing was read from it" + _LIVE
            )
    try:
        data = adapter.dump_python(value, mode="json", warnings=False)
    except Exception as exc:
        raise CheckpointValueError(f"{what} cannot be written as JSON ({_short(exc)})" + _LIVE) from exc
    try:
        again = adapter.validate_python(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        path = ".".join(str(p) for p in err.get("loc", ()))
        raise CheckpointValueError(
            f"{_at(what, path)} does not validate as declared in {_type_name(declared)}: {err.get('msg')}, got "
            f"{_brief(_pick(value, err.get('loc', ())))}" + _INVALID
        ) from None
    path = _difference(value, again)
    if path is not None:
        raise CheckpointValueError(
            f"{_at(what, path)} changes when written as JSON and read back: {_brief(_pick(value, path))} "
            f"became {_brief(_pick(again, path))}" + _CHANGES
        )
    return data


def _at(what: str, path: str | tuple[Any, ...]) -> str:
    if not isinstance(path, str):
        path = ".".join(str(p) for p in path)
    if not path:
        return what
    return f"{what} field {path!r}" if what == "state" or what == "End data" else f"{what} at {path!r}"


_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxlist = _repr.maxdict = _repr.maxtuple = 6
_brief = _repr.repr


def _fields_of(value: Any) -> tuple[str, ...] | None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(f.name for f in dataclasses.fields(value))
    model_fields = getattr(type(value), "model_fields", None)
    if isinstance(model_fields, dict):
        return tuple(model_fields)
    return None


def _difference(value: Any, again: Any, depth: int = 0) -> str | None:
    """The dotted path where `again` differs from `value` ("" for the whole value), or None."""
    same_type = type(again) is type(value) or (type(value) in _NUMBERS and type(again) in _NUMBERS)
    try:
        if same_type and bool(again == value):
            return None
    except Exception:
        pass
    if depth > 20 or not same_type:
        return ""
    pairs = _child_pairs(value, again)
    if pairs is None:
        return ""
    for key, a, b in pairs:
        sub = _difference(a, b, depth + 1)
        if sub is not None:
            return f"{key}.{sub}" if sub else str(key)
    return None  # equal part by part (say, a class that compares by identity)


def _child_pairs(value: Any, again: Any) -> list[tuple[Any, Any, Any]] | None:
    """(name, part of value, part of again) to compare, or None when they cannot be paired up."""
    fields = _fields_of(value)
    if fields is not None:
        return [(name, getattr(value, name, None), getattr(again, name, None)) for name in fields]
    if isinstance(value, dict):
        return [(k, value[k], again[k]) for k in value] if list(value) == list(again) else None
    if isinstance(value, list | tuple) and len(value) == len(again):
        return [(i, a, b) for i, (a, b) in enumerate(zip(value, again, strict=True))]
    return None


def _pick(value: Any, path: str | tuple[Any, ...]) -> Any:
    """The part of `value` at `path` (as far as it can be followed), for a message."""
    parts = path.split(".") if isinstance(path, str) else [str(p) for p in path]
    for part in parts:
        if not part:
            continue
        try:
            if isinstance(value, dict):
                value = next(v for k, v in value.items() if str(k) == part)
            elif isinstance(value, list | tuple):
                value = value[int(part)]
            else:
                value = getattr(value, part)
        except (StopIteration, ValueError, IndexError, AttributeError):
            break
    return value


_NUMBERS = (int, float)
_SCALARS = (str, bytes, bytearray, int, float, bool, type(None))


def _iterator_in(value: Any, path: str = "", depth: int = 0) -> tuple[str, Any] | None:
    """The first iterator (a generator, an open file) inside `value`, with its path."""
    if isinstance(value, _SCALARS) or depth > 50:
        return None
    if hasattr(type(value), "__next__"):
        return path, value
    fields = _fields_of(value)
    if fields is not None:
        items: Any = ((name, getattr(value, name, None)) for name in fields)
    elif isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list | tuple | set | frozenset):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _iterator_in(item, f"{path}.{key}" if path else str(key), depth + 1)
        if found is not None:
            return found
    return None


def _has_any(schema: Any) -> bool:
    """Whether a pydantic core schema admits `Any` somewhere (an Any, object or bare dict field)."""
    stack = [schema]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, dict):
            if node.get("type") == "any":
                return True
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return False


_FLAT_LEAVES = {"int": int, "str": str, "bool": bool}
_DATACLASS_KEYS = frozenset({"type", "cls", "config", "fields", "frozen", "post_init", "ref", "schema", "slots", "metadata"})
_MODEL_KEYS = frozenset({"type", "cls", "config", "custom_init", "metadata", "ref", "root_model", "schema"})


def _flat_fields(schema: Any) -> tuple[type, tuple[tuple[str, type], ...]] | None:
    """(class, ((field, int|str|bool), ...)) when `schema` is a plain dataclass or model of such fields.

    Plain means what JSON holds exactly and validation gives back unchanged: no constraint,
    validator, alias, custom serializer, `__post_init__`, extra or private attribute, computed or
    init-only field (any of those puts another key in the core schema, or another schema type,
    and the class gets None: the full check per value). Its dump is `{field: value}` in field order.
    """
    if not isinstance(schema, dict) or set(schema.get("config") or {}) - {"title"}:
        return None
    cls = schema.get("cls")
    fields = _dataclass_fields(schema) if schema.get("type") == "dataclass" else _model_fields(schema)
    if fields is None or not isinstance(cls, type):
        return None
    out = []
    for name, keys, f in fields:
        leaf = f.get("schema")
        if isinstance(leaf, dict) and leaf.get("type") == "default" and not set(leaf) - {"type", "schema", "default"}:
            leaf = leaf.get("schema")
        if not isinstance(name, str) or set(f) - keys or not isinstance(leaf, dict) or set(leaf) != {"type"}:
            return None
        tp = _FLAT_LEAVES.get(leaf["type"])
        if tp is None:
            return None
        out.append((name, tp))
    return cls, tuple(out)


def _dataclass_fields(schema: dict[str, Any]) -> list[tuple[Any, frozenset[str], dict[str, Any]]] | None:
    inner = schema.get("schema")
    if set(schema) - _DATACLASS_KEYS or schema.get("post_init") or not isinstance(inner, dict):
        return None
    if inner.get("type") != "dataclass-args" or inner.get("computed_fields") or inner.get("collect_init_only"):
        return None
    if set(inner) - {"type", "fields", "computed_fields", "collect_init_only", "dataclass_name"}:
        return None
    keys = frozenset({"type", "name", "schema", "init", "kw_only", "metadata", "frozen"})
    fields = [(f.get("name"), keys, f) for f in inner.get("fields", ())]
    ok = all(f.get("type") == "dataclass-field" and f.get("init") is not False and not f.get("metadata") for _, _, f in fields)
    return fields if ok else None


def _model_fields(schema: dict[str, Any]) -> list[tuple[Any, frozenset[str], dict[str, Any]]] | None:
    inner = schema.get("schema")
    if schema.get("type") != "model" or set(schema) - _MODEL_KEYS or schema.get("custom_init") or schema.get("root_model"):
        return None
    if getattr(schema.get("cls"), "__private_attributes__", None) or not isinstance(inner, dict):
        return None
    if inner.get("type") != "model-fields" or set(inner) - {"type", "fields", "computed_fields", "model_name"}:
        return None
    if inner.get("computed_fields"):
        return None
    keys = frozenset({"type", "schema", "metadata", "frozen"})
    fields = [(name, keys, f) for name, f in inner.get("fields", {}).items()]
    return fields if all(f.get("type") == "model-field" for _, _, f in fields) else None


def _schema_or_name(tp: Any) -> Any:
    try:
        return TypeAdapter(tp).json_schema()
    except Exception:
        return _type_name(tp)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ())) or "(value)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{loc}: {err.get('msg')}{more}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
