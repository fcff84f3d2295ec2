"""The fast input check: a flat object schema compiled once, which only ever accepts what jsonschema accepts."""

from __future__ import annotations

import itertools

import pytest
from jsonschema import Draft4Validator, Draft202012Validator

from service.tools.contracts import ToolContract
from service.tools.errors import InvalidInputError
from service.tools.flat_schemas import MAX_FAST_FIELDS, flat_object_check

TYPES = ("string", "integer", "number", "boolean", "null", "object", "array")
VALUES = ("x", "", 0, 7, -3, 1.0, 2.5, True, False, None, {}, {"a": 1}, [], [1], "\ud800")

FLAT = {
    "type": "object",
    "description": "a tool's usual input",
    "properties": {"q": {"type": "string", "title": "query"}, "n": {"type": "integer"}, "any": {}},
    "required": ["q"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("kind", TYPES)
def test_a_field_of_each_type_is_accepted_only_where_jsonschema_accepts_it(kind):
    """For every JSON type and a spread of values (floats that are whole, booleans, a lone surrogate), the
    fast check never accepts what jsonschema (2020-12 and draft 4) refuses, and accepts the plain cases."""
    for draft, validator_class in (
        ("https://json-schema.org/draft/2020-12/schema", Draft202012Validator),
        ("http://json-schema.org/draft-04/schema#", Draft4Validator),
    ):
        schema = {"$schema": draft, "type": "object", "properties": {"f": {"type": kind}}, "required": ["f"]}
        check = flat_object_check(schema)
        assert check is not None
        full = validator_class(schema)
        accepted = 0
        for value in VALUES:
            if check({"f": value}):
                accepted += 1
                assert full.is_valid({"f": value}), (draft, kind, value)
        assert accepted > 0, kind


def test_a_flat_schema_checks_required_closed_and_typed_fields():
    """Missing required fields, unknown fields of a closed object, wrong types and non-objects are not accepted."""
    check = flat_object_check(FLAT)
    assert check is not None
    assert check({"q": "x"}) and check({"q": "x", "n": 3, "any": [1, {"b": None}]})
    for value in ({}, {"n": 3}, {"q": 1}, {"q": "x", "n": 1.5}, {"q": "x", "other": 1}, [], "q", None):
        assert not check(value), value
    full = Draft202012Validator(FLAT)
    for value in itertools.islice(({"q": v, "n": w} for v in VALUES for w in VALUES), 200):
        assert not check(value) or full.is_valid(value), value


@pytest.mark.parametrize(
    "schema",
    [
        True,
        {"type": "object", "properties": {"q": {"type": "string", "minLength": 1}}},
        {"type": "object", "properties": {"q": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"q": {"$ref": "#/$defs/q"}}, "$defs": {"q": {"type": "string"}}},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"q": False}},
        {"type": "object", "properties": {"q": {"type": "string"}}, "minProperties": 1},
        {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object", "properties": {}},
        {"type": "array"},
        {"properties": {"q": {"type": "string"}}},
    ],
)
def test_any_other_shape_has_no_fast_check(schema):
    """A keyword with a rule of its own, a union type, a reference, draft 3, or no ``type: object``: full check only."""
    assert flat_object_check(schema) is None


def test_a_wide_input_takes_the_full_check():
    """An object of more than MAX_FAST_FIELDS fields is not accepted at once (the full check is bounded by steps)."""
    check = flat_object_check({"type": "object"})
    assert check is not None
    assert check({f"k{i}": i for i in range(MAX_FAST_FIELDS)})
    assert not check({f"k{i}": i for i in range(MAX_FAST_FIELDS + 1)})


def test_a_refusal_is_worded_by_the_full_check():
    """An input the fast check does not accept is refused with jsonschema's words, naming the fields."""
    contract = ToolContract(FLAT, None)
    contract.check_input({"q": "x", "n": 2}, "t")
    with pytest.raises(InvalidInputError) as info:
        contract.check_input({"n": "two", "extra": 1}, "t")
    assert set(info.value.details) == {
        '$: missing required property "q"',
        '$: unexpected properties "extra"',
        "$.n: expected integer, got string",
    }
