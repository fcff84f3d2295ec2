"""Caller-declared schemas: references stay inside, size/depth/expansion caps, RE2-only patterns."""

from __future__ import annotations

import re

import pytest

from service.tools import schema_guard
from service.tools.catalog import ClientTool, compile_client_tools
from service.tools.errors import ClientToolDeclError, InvalidInputError, SchemaRefused
from service.tools.schema_guard import SchemaLimits, check_caller_schema
from tests.support.counters import count_calls, json_objects

LIMITS = SchemaLimits()


def refusal(schema: object, limits: SchemaLimits = LIMITS) -> str:
    with pytest.raises(SchemaRefused) as info:
        check_caller_schema(schema, limits)
    return str(info.value)


def all_of_bomb(levels: int) -> dict:
    """`d{n}` is allOf [d{n-1}, d{n-1}]: 2**levels subschemas from ~70 bytes per level."""
    defs: dict = {"d0": {"type": "integer"}}
    for i in range(1, levels + 1):
        defs[f"d{i}"] = {"allOf": [{"$ref": f"#/$defs/d{i - 1}"}, {"$ref": f"#/$defs/d{i - 1}"}]}
    return {"$defs": defs, "$ref": f"#/$defs/d{levels}"}


TREE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["name"],
}


@pytest.mark.parametrize(
    "ref",
    [
        "http://127.0.0.1:9/x.json",
        "https://json-schema.org/draft/2020-12/schema",
        "other.json#/$defs/a",
        "file:///etc/passwd",
        "file:///dev/zero",
        "urn:example:thing",
    ],
)
@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
def test_references_outside_the_schema_are_refused(keyword: str, ref: str) -> None:
    """Any reference that is not a fragment of the schema itself is refused, naming the reference."""
    message = refusal({"type": "object", "properties": {"a": {keyword: ref}}})
    assert f"{keyword} {ref!r} points outside the schema" in message


def test_refusal_does_not_depend_on_whether_the_target_exists(tmp_path) -> None:
    """An existing file, a missing file and a directory give the same message (nothing is read)."""
    existing = tmp_path / "schema.json"
    existing.write_text('{"type": "integer"}')
    refs = [existing.as_uri(), (tmp_path / "missing.json").as_uri(), tmp_path.as_uri()]
    messages = {re.sub(r"'[^']*'", "REF", refusal({"$ref": ref})) for ref in refs}
    assert len(messages) == 1, messages


def test_refs_inside_the_schema_are_accepted() -> None:
    """Pointers, $defs, anchors, a root $id and recursion are all fine."""
    schema = {
        "$id": "https://example.com/order.json",
        "$defs": {
            "money": {"$anchor": "money", "type": "number", "minimum": 0},
            "line": {"type": "object", "properties": {"price": {"$ref": "#money"}}},
        },
        "type": "object",
        "properties": {
            "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
            "total": {"$ref": "#/$defs/money"},
            "tree": TREE,
        },
    }
    assert check_caller_schema(schema, LIMITS)
    assert check_caller_schema(TREE, LIMITS)


def test_dangling_internal_reference_is_refused() -> None:
    """A pointer or anchor that names nothing in the schema is refused at declaration time."""
    assert "does not point at a subschema" in refusal({"$ref": "#/$defs/nope"})
    assert "does not point at a subschema" in refusal({"$ref": "#nope"})
    assert "does not point at a subschema" in refusal({"$defs": {"a": 1}, "$ref": "#/$defs/a"})


def test_nested_id_is_refused() -> None:
    """A nested $id would re-base the references below it; only the root may set one."""
    message = refusal({"properties": {"a": {"$id": "https://evil.example/", "$ref": "#/x"}}})
    assert "nested $id 'https://evil.example/'" in message


def test_all_of_bomb_is_refused_quickly(monkeypatch) -> None:
    """1 KB of $defs doubling per level is refused naming the cap, after entering each of its ~50
    subschemas once (memoised), not the 2**16 that following every $ref would visit."""
    entered = count_calls(monkeypatch, schema_guard._Expansion, "_check_node")
    bomb = all_of_bomb(16)
    message = refusal(bomb)
    assert f"more than {LIMITS.max_expanded} subschemas" in message
    assert 0 < len(entered) <= json_objects(bomb), len(entered)
    assert check_caller_schema(all_of_bomb(8), LIMITS)  # 256 subschemas is fine


def test_recursive_self_reference_counts_once() -> None:
    """A recursive reference is expanded once (the value's depth bounds it), so recursion is allowed."""
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"left": {"$ref": "#/$defs/node"}, "right": {"$ref": "#/$defs/node"}},
            }
        },
        "$ref": "#/$defs/node",
    }
    assert check_caller_schema(schema, SchemaLimits(max_expanded=10))


def test_size_and_depth_caps_name_the_cap() -> None:
    """Too many bytes or too deep nesting is refused with the cap in the message."""
    huge = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    assert f"over the cap of {LIMITS.max_schema_bytes} per schema" in refusal(huge)
    deep: dict = {"type": "object"}
    for _ in range(200):
        deep = {"type": "object", "properties": {"a": deep}}
    assert f"(cap {LIMITS.max_depth})" in refusal(deep)


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("(?=a)b", "not supported"), ("(a)\\1", "not supported"), ("(" * 2000 + ")" * 2000, "cap 2048")],
)
def test_patterns_re2_cannot_run_are_refused(pattern: str, why: str) -> None:
    """Lookaround, backreferences and overlong patterns are refused (pattern and patternProperties)."""
    assert why in refusal({"type": "string", "pattern": pattern})
    assert why in refusal({"type": "object", "patternProperties": {pattern: {}}})


def test_total_bytes_and_field_are_named() -> None:
    """The request-wide byte cap names the schema that crossed it; each refusal names its field."""
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(60)}}
    size = len(check_caller_schema(schema, LIMITS))
    limits = SchemaLimits(max_total_bytes=2 * size - 1)
    tools = [ClientTool(f"t{i}", input_schema=schema) for i in range(3)]
    with pytest.raises(ClientToolDeclError) as info:
        compile_client_tools(tools, limits)
    assert info.value.field == "client_tools[1].input_schema"
    assert f"add up to {2 * size} bytes of JSON (cap {2 * size - 1} per request)" in info.value.message
    with pytest.raises(ClientToolDeclError) as info:
        compile_client_tools([ClientTool("ok"), ClientTool("bad", input_schema={"$ref": "http://x/"})])
    assert info.value.field == "client_tools[1].input_schema"


def test_internal_refs_validate_through_the_compiled_contract() -> None:
    """Anchors, pointers under a root $id and draft-04 definitions resolve when a value is checked."""
    schema = {
        "$id": "https://example.com/order.json",
        "$defs": {
            "money": {"$anchor": "money", "type": "number", "minimum": 0},
            "line": {"type": "object", "properties": {"price": {"$ref": "#money"}}},
        },
        "type": "object",
        "properties": {
            "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
            "total": {"$ref": "#/$defs/money"},
        },
    }
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "definitions": {"a": {"type": "string", "pattern": "^x"}},
        "properties": {"a": {"$ref": "#/definitions/a"}},
    }
    order, old = compile_client_tools(
        [ClientTool("order", input_schema=schema), ClientTool("old", input_schema=draft4)]
    )
    order.contract.check_input({"lines": [{"price": 1}], "total": 2}, "order")
    with pytest.raises(InvalidInputError, match=r"\$.lines\[0\].price: must be >= 0"):
        order.contract.check_input({"lines": [{"price": -1}]}, "order")
    old.contract.check_input({"a": "xy"}, "old")
    with pytest.raises(InvalidInputError, match="must match pattern"):
        old.contract.check_input({"a": "y"}, "old")


@pytest.mark.parametrize(
    "schema",
    [
        {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"allOf": [{"$ref": "#"}]},
        {
            "$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]}, "b": {"not": {"$ref": "#/$defs/a"}}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
        },
    ],
)
def test_reference_loops_that_never_descend_are_refused(schema: dict) -> None:
    """A cycle through $ref and in-place keywords alone would recurse forever on any value."""
    assert "refers back to itself without descending into the value" in refusal(schema)


def test_loops_that_descend_or_sit_in_unused_definitions_are_fine() -> None:
    """Recursion through a member keyword is legitimate; a loop only among unused $defs is never run."""
    json_value = {
        "anyOf": [
            {"type": ["string", "number", "boolean", "null"]},
            {"type": "array", "items": {"$ref": "#"}},
            {"type": "object", "additionalProperties": {"$ref": "#"}},
        ]
    }
    assert check_caller_schema(json_value, LIMITS)
    assert check_caller_schema({"$defs": {"self": {"$ref": "#/$defs/self"}, "x": {"$ref": "#"}}}, LIMITS)
