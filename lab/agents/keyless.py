"""Which recorded messages and responses can hold no secret: those whose JSON has no dict key of its own.

The recorder leaves out every dict key that looks like a secret (lab/recording.py `SECRET_MARKERS`), and
only a key is ever left out, never a value: a model's text or a user's prompt that says "password" is
kept as it is. So the search of a message's JSON text for a marker (a lower-cased copy of the text, twelve
substring scans: ~40 k instructions for a short response) only matters where the text can hold a key
that is not a field name of pydantic-ai's classes: inside a dict (a tool call's arguments, a
`provider_details`, a usage's `details`, metadata, model settings). `keyless` answers that from the
objects, before their text is searched: a pydantic-ai dataclass whose field names hold no marker (checked
once per class) and whose values are plain scalars, empty dicts, or lists and dataclasses of the same. A
non-empty dict, or any value of another type, says "not known": the text is searched as before.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from typing import Any

from ..recording import has_marker

__all__ = ("keyless",)

_PLAIN = frozenset(
    {str, int, float, bool, type(None), datetime.datetime, datetime.timedelta, datetime.date, decimal.Decimal}
)
"""Values written as a JSON scalar (a string or a number): no key in them."""

_classes: dict[type, bool] = {}
"""Per dataclass: none of its field names (the keys its serializer writes) holds a secret marker."""


def _clean_class(cls: type) -> bool:
    found = _classes.get(cls)
    if found is None:
        names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else None
        found = names is not None and not has_marker(",".join(names).encode())
        if len(_classes) < 256:
            _classes[cls] = found
    return found


def keyless(value: Any) -> bool:
    """True when `value` (a message, a response, a part, a usage) writes no dict key but its classes' field
    names, none of which looks like a secret: its JSON text holds nothing the secret check would leave out.
    False means only "not known here" (a non-empty dict, another type): search the text."""
    fields = getattr(value, "__dict__", None)
    if fields is None or not _clean_class(type(value)):
        return False
    for v in fields.values():
        t = type(v)
        if t in _PLAIN:
            continue
        if t is dict:
            if v:
                return False
        elif t is list or t is tuple:
            if not all(type(item) in _PLAIN or keyless(item) for item in v):
                return False
        elif not keyless(v):
            return False
    return True
