"""The JSON text of a recorded model request and of its response, written in one pass each.

`RecordedModel` (lab/agents/recorded_model.py) secret-checks, digests and stores these texts as they are
(lab/recording.py), so they must be the very bytes `ModelMessagesTypeAdapter` and pydantic-core's `to_json`
write (docs/replay.md: a recording made before reads the same digest; a response revives to the same
`ModelResponse`). Cheaper ways to the same bytes, each checked against the adapter in
tests/agents/test_recorded_json.py:

- each message by its own class's serializer, not through the adapter's union (a third of the cost);
- a message whose `parts` is a list, and a response whose `usage` holds only its declared fields, by a
  serializer whose two Python wrap serializers are left out (pydantic's `serialize_sequence_via_list`
  on `parts`, pydantic-ai's usage serializer, which only adds a usage's undeclared fields): they call back
  into Python for each message, and write what the plain serializers write for such values;
- the request parameters (a dataclass) as the dict of their public fields, which pydantic-core infers
  the same way field by field, without reading the dataclass's field table from Rust.
"""

from __future__ import annotations

import copy
import dataclasses
import operator
from typing import Any

import pydantic_core
from pydantic import TypeAdapter
from pydantic_ai.messages import ModelRequest, ModelResponse
from pydantic_ai.usage import RequestUsage

from ..recording import SETS, encode, has_marker, sets_sorted

__all__ = ("VOLATILE", "STEADY", "KNOWN_MESSAGES", "Serializers", "SERIALIZERS", "lean_serializer", "SteadyKeys")

VOLATILE = frozenset(
    {"timestamp", "request_timestamp", "duration", "run_id", "conversation_id", "provider_response_id"}
)
"""Keys of a dumped message that change from one run to the next without changing what is asked."""


STEADY: dict[str, Any] = {**dict.fromkeys(VOLATILE, True), "parts": {"__all__": dict.fromkeys(VOLATILE, True)}}
"""What a message's dump leaves out (`exclude=`): `VOLATILE`, on it and on each of its parts."""

KNOWN_MESSAGES = (ModelRequest, ModelResponse)
"""The message classes serialized by their own serializers (another class goes through the adapter)."""

_CONFIG = pydantic_core.core_schema.CoreConfig(ser_json_bytes="base64")
"""`ModelMessagesTypeAdapter`'s serialization settings (bytes as base64)."""

_LEAN_WRAPS = {
    ModelRequest: {"parts": "serialize_sequence_via_list"},
    ModelResponse: {"parts": "serialize_sequence_via_list", "usage": "UsageBase."},
}
"""Per message class, the fields whose Python wrap serializer (by its function's qualified name) a lean
serializer leaves out."""

_USAGE_FIELDS = frozenset(f.name for f in dataclasses.fields(RequestUsage))


def lean_serializer(cls: type, wraps: dict[str, str]) -> Any:
    """`cls`'s serializer without the Python wrap serializers of the fields `wraps` names (field -> the
    start of the wrap function's qualified name), or None when its schema is not shaped as expected
    (another pydantic or pydantic-ai): then the full serializer is used, as before."""
    schema = copy.deepcopy(TypeAdapter(cls).core_schema)
    node = schema.get("schema") if schema.get("type") == "definitions" else schema
    try:
        fields = node["schema"]["fields"] if node["type"] == "dataclass" else None
    except (KeyError, TypeError):
        return None
    if not isinstance(fields, list):
        return None
    left_out = 0
    for f in fields:
        prefix = wraps.get(f.get("name")) if isinstance(f, dict) else None
        inner = f.get("schema") if prefix is not None else None
        while isinstance(inner, dict):
            ser = inner.get("serialization")
            if isinstance(ser, dict) and ser.get("type") == "function-wrap":
                if getattr(ser.get("function"), "__qualname__", "").startswith(prefix):
                    del inner["serialization"]
                    left_out += 1
                break
            inner = inner.get("schema")
    if left_out != len(wraps):
        return None
    return pydantic_core.SchemaSerializer(schema, _CONFIG)


def _type_name(value: Any) -> str:
    return f"<{type(value).__name__}>"


_SCALARS = frozenset({str, int, bool, type(None)})
_CONTAINERS = frozenset({list, tuple, set, frozenset})


class SteadyKeys:
    """Keys under which request parameters' field values always write the same JSON text (`key`).

    Only values of exactly str, int, bool or None (kept with their types: `True == 1` but writes `true`)
    and empty containers (all written `[]`) make a key; a float (`0.0 == -0.0`), a list that holds
    something (its items may change in place), an enum or any other value does not. Per tuple of the
    values' types, the positions of the scalars and of the containers are worked out once, so a key is
    taken in C (`map`, `itemgetter`, `any`), without a Python loop over the fields."""

    def __init__(self) -> None:
        self.plans: dict[tuple[type, ...], tuple[Any, Any] | None] = {}

    def key(self, values: tuple[Any, ...]) -> tuple[Any, ...] | None:
        types = tuple(map(type, values))
        plan = self.plans.get(types, False)
        if plan is False:
            plan = self.plans[types] = self._plan(types) if len(self.plans) < 64 else None
        if plan is None:
            return None
        scalars, containers = plan
        if containers is not None and any(containers(values)):
            return None
        return types, scalars(values)

    @staticmethod
    def _plan(types: tuple[type, ...]) -> tuple[Any, Any] | None:
        if not all(t in _SCALARS or t in _CONTAINERS for t in types):
            return None
        at = [i for i, t in enumerate(types) if t in _SCALARS]
        inside = [i for i, t in enumerate(types) if t in _CONTAINERS]
        # itemgetter of one position gives the value, not a 1-tuple: `any` needs the tuple, a key either
        scalars = operator.itemgetter(*at) if len(at) > 1 else (lambda v, i=tuple(at): tuple(v[j] for j in i))
        containers = (
            operator.itemgetter(*inside) if len(inside) > 1
            else (lambda v, i=tuple(inside): tuple(v[j] for j in i)) if inside else None
        )
        return scalars, containers


class Serializers:
    """pydantic-core serializers of request messages, responses and request parameters, built on first use."""

    def __init__(self) -> None:
        self.built: dict[type, Any] = {}
        self.lean: dict[type, Any] = {}
        self.parameter_fields: dict[type, tuple[tuple[str, ...], Any] | None] = {}
        self.texts: dict[str, bytes] = {}
        self.clean_parameters: set[bytes] = set()
        self.steady_parameters: dict[tuple[type, tuple[Any, ...]], bytes] = {}
        self.steady = SteadyKeys()

    def of(self, cls: type) -> Any:
        """`cls`'s own serializer, with the adapter's settings."""
        found = self.built.get(cls)
        if found is None:
            found = self.built[cls] = pydantic_core.SchemaSerializer(TypeAdapter(cls).core_schema, _CONFIG)
        return found

    def for_message(self, m: Any) -> Any:
        """The serializer that writes message `m` (a request or a response) as the adapter does, cheapest first."""
        cls = type(m)
        lean = self.lean.get(cls)
        if lean is None:
            wraps = _LEAN_WRAPS.get(cls)
            lean = self.lean[cls] = (lean_serializer(cls, wraps) if wraps else None) or False
        if lean is not False and type(m.parts) is list:
            if cls is ModelRequest:
                return lean
            usage = m.usage
            if type(usage) is RequestUsage and usage.__dict__.keys() <= _USAGE_FIELDS:
                return lean
        return self.of(cls)

    def messages(self, messages: list[Any]) -> bytes:
        """The messages' JSON text without `VOLATILE` keys: a list, as the adapter writes it."""
        of = self.for_message
        return b"[" + b",".join([of(m).to_json(m, exclude=STEADY) for m in messages]) + b"]"

    def response(self, response: ModelResponse) -> bytes:
        """One response's JSON text, as `ModelMessagesTypeAdapter` writes it in a list."""
        return self.for_message(response).to_json(response)

    def text(self, value: Any) -> bytes:
        """`encode(value)`, kept for a string (a model's name and system: the same few strings each request)."""
        found = self.texts.get(value) if type(value) is str else None
        if found is None:
            found = encode(value)
            if type(value) is str and len(self.texts) < 256:
                self.texts[value] = found
        return found

    def parameters(self, parameters: Any) -> bytes:
        """The request parameters' JSON text, without their private (`_`) fields: pydantic-core's `to_json`
        of the dataclass, written from the dict of its public fields in their order (the same bytes: it
        infers each field's value alike). Kept per `SteadyKeys.key` when every field is a plain scalar or an empty
        container (an agent without tools: the same text request after request, while pydantic-ai makes the
        parameters anew each time); a list that holds something is never a key (its items may change in
        place), so an agent with tools serializes them each request. (Not by their class's
        serializer either: it writes some fields otherwise, an instruction part's `id` as its custom
        serializer's string, so a recording made before would no longer match its digest.) A set of two
        or more items is written sorted (`sets_sorted`), so the text is the same in every process."""
        cls = type(parameters)
        if cls not in self.parameter_fields:
            names = tuple(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")) if dataclasses.is_dataclass(cls) else ()
            self.parameter_fields[cls] = (names, operator.attrgetter(*names)) if len(names) > 1 else None
        found = self.parameter_fields[cls]
        if found is None:  # not a dataclass of several fields: its own `to_json`, private fields left out
            exclude = {f.name for f in dataclasses.fields(cls) if f.name.startswith("_")} if dataclasses.is_dataclass(cls) else None
            return pydantic_core.to_json(parameters, exclude=exclude or None, fallback=_type_name)
        names, values = found
        got = values(parameters)
        key = self.steady.key(got)
        if key is not None:
            text = self.steady_parameters.get((cls, key))
            if text is not None:
                return text
        if any(type(v) in SETS and len(v) > 1 for v in got):
            got = tuple(map(sets_sorted, got))
        text = pydantic_core.to_json(dict(zip(names, got, strict=True)), fallback=_type_name)
        if key is not None and len(self.steady_parameters) < 256:
            self.steady_parameters[(cls, key)] = text
        return text

    def clean(self, parameters: bytes) -> bool:
        """No secret marker in request parameters' JSON text (`has_marker`): searched once per distinct text
        (an agent's tools and output schema: the same request after request), then a set lookup."""
        if parameters in self.clean_parameters:
            return True
        if has_marker(parameters):
            return False
        if len(self.clean_parameters) < 256:
            self.clean_parameters.add(parameters)
        return True


SERIALIZERS = Serializers()
