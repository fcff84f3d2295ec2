"""JSON Schema to TypeScript type text."""

from __future__ import annotations

import pytest

from service.api_files.schema_ts import TsLimits, object_shape, property_key, schema_to_ts

CASES = [
    ({"type": "string"}, "string"),
    ({"type": "integer"}, "number"),
    ({"type": "number"}, "number"),
    ({"type": "boolean"}, "boolean"),
    ({"type": "null"}, "null"),
    ({}, "unknown"),
    (True, "unknown"),
    (False, "never"),
    ({"const": 'a"b'}, '"a\\"b"'),
    ({"const": -2}, "-2"),
    ({"enum": ["a", 1, None, False]}, '"a" | 1 | null | false'),
    ({"enum": [f"v{n}" for n in range(17)]}, "string"),
    ({"enum": ["a", {"x": 1}]}, "string | Record<string, unknown>"),
    ({"type": ["string", "null"]}, "string | null"),
    ({"type": "string", "nullable": True}, "string | null"),
    ({"anyOf": [{"type": "string"}, {"type": "number"}]}, "string | number"),
    ({"oneOf": [{"const": n} for n in range(9)]}, "unknown"),
    ({"anyOf": [{"type": "string"}], "oneOf": [{"type": "number"}]}, "unknown"),
    ({"anyOf": [{"type": "string"}, {}]}, "unknown"),
    ({"type": "array", "items": {"type": "string"}}, "string[]"),
    ({"type": "array", "items": {"type": ["string", "number"]}}, "(string | number)[]"),
    ({"type": "array", "items": {"const": -1}}, "(-1)[]"),
    ({"type": "array"}, "unknown[]"),
    ({"type": "array", "prefixItems": [{"type": "string"}]}, "unknown[]"),
    ({"type": "object"}, "Record<string, unknown>"),
    ({"type": "object", "additionalProperties": False}, "Record<string, never>"),
    ({"type": "object", "additionalProperties": {"type": "number"}}, "Record<string, number>"),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b-c": {"type": "number"}},
            "required": ["a"],
        },
        '{ a: string; "b-c"?: number; }',
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "number"},
        },
        "{ a?: string; [key: string]: number | string | undefined; }",
    ),
    ({"properties": {"a": {"type": "string"}}, "required": ["a", "z"]}, "{ a: string; z: unknown; }"),
    ({"$ref": "#/$defs/x"}, "unknown"),
    ({"type": "object", "properties": {"r": {"$dynamicRef": "#x"}}, "required": ["r"]}, "{ r: unknown; }"),
    ({"allOf": [{"type": "string"}, {"minLength": 1}]}, "string"),
    ({"type": "weird"}, "unknown"),
    ({"const": 2**80}, "number"),
    ({"anyOf": [{"type": "string"}, {"type": "null"}], "nullable": True}, "string | null"),
    ({"type": "object", "properties": {"toString": {"type": "string"}}}, "{ toString?: unknown; }"),
]


@pytest.mark.parametrize(("schema", "expected"), CASES)
def test_schema_to_ts_table(schema, expected):
    """Each schema shape renders to its expected TypeScript type text."""
    assert schema_to_ts(schema) == expected


def test_rendering_is_deterministic():
    """Rendering the same schema twice gives identical text."""
    schema = {"type": "object", "properties": {f"k{n}": {"enum": [n, str(n)]} for n in range(50)}}
    assert schema_to_ts(schema) == schema_to_ts(schema)


def test_depth_limit_turns_deep_shapes_unknown():
    """Past the depth limit, nested shapes become `unknown`."""
    schema = {
        "type": "array",
        "items": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
    }
    assert schema_to_ts(schema, TsLimits(max_depth=2)) == "unknown[][][]"


def test_node_limit_turns_remaining_shapes_unknown():
    """After the node budget is spent, remaining properties render as `unknown`."""
    schema = {
        "type": "object",
        "properties": {f"p{n}": {"type": "string"} for n in range(10)},
        "required": [],
    }
    text = schema_to_ts(schema, TsLimits(max_nodes=4))
    assert text.startswith("{ p0?: string; p1?: string; p2?: string; p3?: unknown;")


def test_property_key_quotes_non_identifiers():
    """Identifiers stay bare; others become JSON string literals with escapes."""
    assert property_key("delete") == "delete"
    assert property_key("$a_1") == "$a_1"
    assert property_key("a-b") == '"a-b"'
    assert property_key("new\nline") == '"new\\nline"'
    assert property_key("caf\u00e9") == '"caf\\u00e9"'


def test_object_shape_marks_defaults_optional_on_request():
    """Defaulted members are optional only when the caller fills defaults in."""
    schema = {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}, "required": ["a"]}
    assert object_shape(schema).members[0].optional is False
    assert object_shape(schema, defaults_optional=True).members[0].optional is True
    assert object_shape({"anyOf": [{"type": "object"}]}) is None
