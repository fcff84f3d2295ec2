"""The one JSON-type switch: names as JSON Schema gives them, booleans never numbers."""

from __future__ import annotations

import types

import pytest

from bridge.json_types import json_type


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "boolean"),
        (False, "boolean"),
        (0, "number"),
        (1.5, "number"),
        ("", "string"),
        ([], "array"),
        ({}, "object"),
        (types.MappingProxyType({"a": 1}), "object"),
    ],
)
def test_each_json_value_is_named_by_its_type(value, expected):
    """Every kind of decoded JSON value gets its JSON Schema type name; bool is checked before int."""
    assert json_type(value) == expected


def test_integers_are_told_apart_only_when_asked():
    """With ``integers`` an int (not a bool, not a float) is "integer", as JSON Schema's type keyword says."""
    assert json_type(3, integers=True) == "integer"
    assert json_type(3.0, integers=True) == "number"
    assert json_type(True, integers=True) == "boolean"


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, (1, 2), object()])
def test_values_json_cannot_hold_have_no_type(value):
    """Anything a JSON decoder never produces is None, so callers choose their own fallback."""
    assert json_type(value) is None
