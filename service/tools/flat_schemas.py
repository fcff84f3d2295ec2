"""The fast path of input validation: a flat object schema compiled once into a plain Python check.

Most tools take a small object of typed fields (``{"type": "object", "properties": {"q": {"type":
"string"}}, "required": ["q"]}``), and jsonschema spends tens of microseconds a call walking such a
schema.  ``flat_object_check`` turns a schema of exactly that shape into a check that only ever
*accepts*: when it says yes, jsonschema would say yes too; when it says no (a wrong type, a missing
field, an integer sent as ``1.0``, an object over ``MAX_FAST_FIELDS`` fields) the caller runs the full
check, which finds and words the problem.  So the fast path changes how long a valid call takes,
never which calls are valid or what a refusal says.  Its work is bounded by ``MAX_FAST_FIELDS``, not by
the caller's data.
"""

from __future__ import annotations

from collections.abc import Callable

from bridge.json_types import JsonValue

__all__ = ["MAX_FAST_FIELDS", "FlatObjectCheck", "flat_object_check"]

#: Inputs with more fields than this skip the fast path (the full check is bounded by its step budget).
MAX_FAST_FIELDS = 64
#: Whether a value certainly fits the schema (False: not known, run the full check).
FlatObjectCheck = Callable[[JsonValue], bool]

#: Keywords that say nothing about which values are valid.
_ANNOTATIONS = frozenset(
    {"title", "description", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly"}
)
_OBJECT_KEYWORDS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema"}
_FIELD_KEYWORDS = _ANNOTATIONS | {"type"}
#: Drafts whose ``type``, ``properties``, ``required`` and ``additionalProperties`` all mean the same as
#: in 2020-12 for these shapes (draft 3's ``required`` differs: its schemas take the full check).
_DRAFTS = frozenset(
    {
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    }
)


def _is_integer(v: JsonValue) -> bool:
    # A float such as 1.0 is an integer to drafts 6+, not to draft 4: left to the full check.
    return type(v) is int


#: Each JSON type's test, never wider than jsonschema's.
_TYPE_TESTS: dict[str, Callable[[JsonValue], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": _is_integer,
    "number": lambda v: type(v) is int or type(v) is float,
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


def flat_object_check(schema: object) -> FlatObjectCheck | None:
    """The fast check of ``schema`` when it is a flat object schema (fields of one JSON type each, or
    of any value), else None.  Linear in the schema; run once per tool contract."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or not set(schema) <= _OBJECT_KEYWORDS:
        return None
    if "$schema" in schema and schema["$schema"] not in _DRAFTS:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    additional = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or not isinstance(additional, bool):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    tests: list[tuple[str, Callable[[JsonValue], bool]]] = []
    for name, field in properties.items():
        if field is True or field == {}:
            continue
        if not isinstance(field, dict) or not set(field) <= _FIELD_KEYWORDS:
            return None
        if "type" in field:
            test = _TYPE_TESTS.get(field["type"]) if isinstance(field["type"], str) else None
            if test is None:
                return None
            tests.append((name, test))
    return _FlatObject(frozenset(properties), tuple(required), tuple(tests), closed=not additional)


class _FlatObject:
    """One compiled flat object schema (see the module's docstring)."""

    __slots__ = ("closed", "known", "required", "tests")

    def __init__(
        self,
        known: frozenset[str],
        required: tuple[str, ...],
        tests: tuple[tuple[str, Callable[[JsonValue], bool]], ...],
        *,
        closed: bool,
    ) -> None:
        self.known = known
        self.required = required
        self.tests = tests
        self.closed = closed

    def __call__(self, value: JsonValue) -> bool:
        if not isinstance(value, dict) or len(value) > MAX_FAST_FIELDS:
            return False
        # Plain loops: a generator per check cost more than the whole check of a small input.
        for name in self.required:
            if name not in value:
                return False
        if self.closed and not self.known.issuperset(value):
            return False
        for name, test in self.tests:  # noqa: SIM110 - see above
            if name in value and not test(value[name]):
                return False
        return True
