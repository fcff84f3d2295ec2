"""Compact quick-index hints."""

from __future__ import annotations

import pytest

from service.api_files.hints import input_hint, output_hint


def closed(properties: dict, required: list[str] | None = None) -> dict:
    """A closed object schema."""
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "required": list(properties) if required is None else required,
    }


INPUT_CASES = [
    (None, "unknown"),
    ({}, "unknown"),
    (
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        "{ path: string; ... }",
    ),
    (
        closed({"z": {"type": "integer"}, "b": {"type": "boolean"}, "a": {"type": "string"}}, ["z"]),
        "{ z: number; a?: string; b?: boolean }",
    ),
    (closed({"a-b": {"type": "array", "items": {"type": "string"}}}), '{ "a-b": Array<string> }'),
    (closed({"m": {"enum": ["x", "y"]}}), '{ m: "x" | "y" }'),
    (closed({"n": {"type": ["string", "null"]}}), "{ n: string | null }"),
    (closed({"n": {"type": "string", "nullable": True}}), "{ n: string | null }"),
    (closed({"u": {"anyOf": [{"type": "string"}, {"type": "number"}]}}), "{ u: string | number }"),
    (closed({}), "{}"),
    (
        {
            "type": "object",
            "properties": {f"p{n}": {"type": "string", "enum": ["a" * 40]} for n in range(16)},
        },
        "unknown",
    ),
]


@pytest.mark.parametrize(("schema", "expected"), INPUT_CASES)
def test_input_hint_table(schema, expected):
    """Input hints render compactly and fall back to "unknown" when absent or too long."""
    assert input_hint(schema) == expected


def test_input_hint_is_at_most_300_chars():
    """A hint just over 300 chars becomes "unknown"; one under stays."""
    assert len(input_hint(closed({"k": {"const": "x" * 280}}))) <= 300
    assert input_hint(closed({"k": {"const": "x" * 300}})) == "unknown"


OUTPUT_COMPLETE = [
    (closed({"text": {"type": "string"}}), "{ text: string }"),
    (
        {"type": "array", "items": closed({"id": {"type": "string"}, "paid": {"type": "boolean"}})},
        "Array<{ id: string; paid: boolean }>",
    ),
    (
        {
            "oneOf": [
                closed({"ok": {"const": True}}),
                closed({"ok": {"const": False}, "error": {"type": "string"}}),
            ]
        },
        "{ ok: true } | { ok: false; error: string }",
    ),
    ({"type": "string"}, "string"),
    ({"enum": ["a", "b"]}, '"a" | "b"'),
]


@pytest.mark.parametrize(("schema", "expected"), OUTPUT_COMPLETE)
def test_output_hint_complete_table(schema, expected):
    """Complete output schemas produce their hint."""
    assert output_hint(schema) == expected


OUTPUT_INCOMPLETE = [
    None,
    {},
    {"type": "object", "properties": {"a": {"type": "string"}}},
    closed({"a": {"$ref": "#/$defs/a"}}),
    {"allOf": [closed({"a": {"type": "string"}})]},
    {**closed({"a": {"type": "string"}}), "patternProperties": {"^x": {"type": "string"}}},
    {**closed({"a": {"type": "string"}}), "if": {"required": ["a"]}, "then": {}},
    {"type": "array", "prefixItems": [{"type": "string"}]},
    {**closed({"a": {"type": "string"}}), "dependentRequired": {"a": ["b"]}},
    {**closed({"a": {"type": "string"}}), "unevaluatedProperties": False},
    {"type": "array"},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"anyOf": [{"type": "string"}] * 5},
    {"enum": [f"v{n}" for n in range(9)]},
    closed({f"p{n}": {"type": "string"} for n in range(21)}),
    closed(
        {
            "a": closed(
                {"b": closed({"c": closed({"d": closed({"e": closed({"f": closed({"g": {"type": "string"}})})})})})}
            )
        }
    ),
    closed({"x" * 129: {"type": "string"}}),
    closed({f"p{n}": {"const": "v" * 60} for n in range(15)}),
]


@pytest.mark.parametrize("schema", OUTPUT_INCOMPLETE)
def test_output_hint_incomplete_is_none(schema):
    """Open, reference-bearing, conditional or oversized output schemas give no hint."""
    assert output_hint(schema) is None


def test_output_hint_allows_850_chars():
    """A complete hint up to 850 chars is kept."""
    schema = closed({f"p{n}": {"const": "v" * 30} for n in range(20)})
    hint = output_hint(schema)
    assert hint is not None and 600 < len(hint) <= 850
