"""JSON Schema to TypeScript type text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.api_files.schema_ts import (
    DEFAULT_TS_LIMITS,
    TsLimits,
    TsNamespace,
    object_shape,
    property_key,
    schema_to_ts,
    schema_type,
)

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


def test_rendering_does_not_depend_on_the_hash_seed():
    """Two processes with different hash seeds render the same text as this one (sets never leak order)."""
    script = (
        "import json, sys\n"
        "from service.api_files.schema_ts import TsNamespace, schema_type\n"
        "schema = json.loads(sys.argv[1])\n"
        "rendered = schema_type(schema, TsNamespace('t'))\n"
        "print(json.dumps([rendered.text, [d.lines('') for d in rendered.declarations]]))\n"
    )
    rendered = schema_type(SEED_SCHEMA, TsNamespace("t"))
    here = [rendered.text, [d.lines("") for d in rendered.declarations]]
    assert here[0].startswith("{ a: t.Node; b: string; c: number; d: boolean;")
    for seed in ("1", "2"):
        completed = subprocess.run(
            [sys.executable, "-c", script, json.dumps(SEED_SCHEMA)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)},
        )
        assert json.loads(completed.stdout) == here, seed


ROOT = Path(__file__).resolve().parents[2]
SEED_SCHEMA = {
    "type": "object",
    "properties": {"a": {"$ref": "#/$defs/Node"}},
    "required": ["e", "d", "c", "b", "a", "f", "g"],
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}, "z": {"$ref": "#/$defs/Leaf"}},
            "required": ["z", "kids"],
        },
        "Leaf": {"enum": ["x", "y", 3]},
    },
}
SEED_SCHEMA["properties"].update({k: {"type": t} for k, t in zip("bcdefg", ["string", "number", "boolean"] * 2)})


def _declared(schema: object, name: str = "t") -> tuple[str, dict[str, str]]:
    rendered = schema_type(schema, TsNamespace(name))
    return rendered.text, {d.name: "\n".join(d.lines("")) for d in rendered.declarations}


def test_local_reference_renders_as_a_named_type():
    """`#/$defs/X` and `#/definitions/X` become `<namespace>.X`, each declared once."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Address"},
            "b": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
            "c": {"$ref": "#/definitions/Code"},
        },
        "required": ["a"],
        "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
        "definitions": {"Code": {"type": "string", "description": "A code."}},
    }
    text, declared = _declared(schema, "ship")
    assert text == "{ a: ship.Address; b?: ship.Address | null; c?: ship.Code; }"
    assert declared == {
        "Address": "type Address = {\n    city: string;\n};",
        "Code": "/** A code. */\ntype Code = string;",
    }


def test_recursive_reference_is_a_named_recursive_type():
    """A tree refers to itself through its children: one recursive declaration, the root names it."""
    tree = {
        "$defs": {
            "Tree": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
                },
                "required": ["value"],
            }
        },
        "$ref": "#/$defs/Tree",
    }
    text, declared = _declared(tree)
    assert text == "t.Tree"
    assert declared == {"Tree": "type Tree = {\n    value: number;\n    children?: t.Tree[];\n};"}
    assert _declared({"type": "object", "properties": {"up": {"$ref": "#"}}}) == (
        "{ up?: t.Type; }",
        {"Type": "type Type = {\n    up?: t.Type;\n};"},
    )


def test_keywords_beside_a_reference_intersect_with_it():
    """`$ref` with sibling keywords is the intersection; a description alone adds nothing."""
    schema = {"$defs": {"A": {"type": "object", "properties": {"x": {"type": "string"}}}}}
    assert _declared({**schema, "$ref": "#/$defs/A", "description": "d"})[0] == "t.A"
    assert _declared({**schema, "$ref": "#/$defs/A", "nullable": True})[0] == "t.A | null"
    assert _declared({**schema, "$ref": "#/$defs/A", "required": ["y"]})[0] == "t.A & { y: unknown; }"


@pytest.mark.parametrize(
    "ref",
    [
        "#/$defs/Missing",
        "https://example.com/schema.json",
        "other.json#/$defs/A",
        "#anchor",
        "#/$defs/A/properties/nope",
        "#/items/5",
        "#/items/99999999999999999999",
        "#/items/\u00b2",
        7,
        None,
    ],
)
def test_reference_it_cannot_resolve_is_unknown(ref):
    """Remote, missing, anchor and malformed references render as `unknown` and declare nothing."""
    schema = {"type": "object", "properties": {"r": {"$ref": ref}}, "items": [{}], "$defs": {"A": {"type": "object"}}}
    assert _declared(schema) == ("{ r?: unknown; }", {})


def test_references_render_unknown_without_a_namespace():
    """`schema_to_ts` has nowhere to declare named types, so every reference stays `unknown`."""
    assert schema_to_ts({"$ref": "#/$defs/A", "$defs": {"A": {"type": "string"}}}) == "unknown"


def test_definition_names_become_valid_distinct_identifiers():
    """Names that are not identifiers, keywords, or the global types the text uses are made safe."""
    names = ["my-def", "1abc", "a b/c~d", "", "Record", "caf\u00e9", "string", "delete", "My_def", "t"]
    defs = {name: {"type": "object", "properties": {"n": {"const": index}}} for index, name in enumerate(names)}
    escaped = [name.replace("~", "~0").replace("/", "~1").replace(" ", "%20") for name in names]
    schema = {"type": "object", "properties": {f"p{i}": {"$ref": f"#/$defs/{e}"} for i, e in enumerate(escaped)}}
    text, declared = _declared({**schema, "$defs": defs})
    assert list(declared) == [
        "My_def",
        "T1abc",
        "A_b_c_d",
        "Type",
        "Record_",
        "Caf",
        "String",
        "Delete",
        "My_def2",
        "T",
    ]
    assert text.startswith("{ p0?: t.My_def; p1?: t.T1abc; p2?: t.A_b_c_d;")


def test_eager_reference_cycles_declare_unknown():
    """Aliases that refer to each other outside members and elements (which tsc rejects) become `unknown`."""
    schema = {
        "type": "object",
        "properties": {name: {"$ref": f"#/$defs/{name}"} for name in ("A", "M", "S", "Ok", "Via")},
        "$defs": {
            "A": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "null"}]},
            "B": {"allOf": [{"$ref": "#/$defs/A"}]},
            "M": {"type": "object", "additionalProperties": {"$ref": "#/$defs/M"}},
            "S": {"$ref": "#/$defs/S"},
            "Ok": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/Ok"}}]},
            "Via": {"anyOf": [{"$ref": "#/$defs/S"}, {"type": "number"}]},
        },
    }
    _, declared = _declared(schema)
    assert {name: text.split(" = ", 1)[1] for name, text in declared.items()} == {
        "A": "unknown;",
        "B": "unknown;",
        "M": "unknown;",
        "S": "unknown;",
        "Via": "unknown;",
        "Ok": "string | t.Ok[];",
    }


def test_long_reference_chains_render_without_recursion():
    """5,000 definitions each naming the next: no recursion, the node budget ends the chain in `unknown`."""
    defs = {f"D{n}": {"type": "array", "items": {"$ref": f"#/$defs/D{n + 1}"}} for n in range(5000)}
    text, declared = _declared({"$ref": "#/$defs/D0", "$defs": defs}, "t")
    assert text == "t.D0"
    assert len(declared) <= DEFAULT_TS_LIMITS.max_nodes
    assert declared["D1"] == "type D1 = t.D2[];"
    assert list(declared.values())[-1].endswith("= unknown;") or list(declared.values())[-1].endswith("unknown[];")


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
