"""The JSON type of a decoded value, under the names JSON Schema gives them.

Shape summaries, validation messages and TypeScript renderings all describe values by these
names; they map from this one switch so that ``bool`` (an ``int`` in Python) is never a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeAlias

JsonType = Literal["null", "boolean", "integer", "number", "string", "array", "object"]


def json_type(value: object, *, integers: bool = False) -> JsonType | None:
    """The JSON type of ``value``, or None when JSON has no such value (a set, bytes, an object).

    Numbers are ``"number"``; with ``integers`` a Python ``int`` is ``"integer"`` instead.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer" if integers else "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return None


#: A decoded JSON value, as the codec produces it.  Code that only passes a value on (it never looks
#: inside) takes ``object``; code that walks or builds JSON takes these.
JsonValue: TypeAlias = "None | bool | int | float | str | list[JsonValue] | dict[str, JsonValue]"
#: A decoded JSON object (an envelope, a tool's input, a JSON Schema document).
JsonObject: TypeAlias = "dict[str, JsonValue]"
