"""Native tool declaration files."""

from __future__ import annotations

import pytest

from service.api_files.tool_dts import TOOL_OUTPUT_MAX_CHARS, accepts_empty_object, render_tool_declaration


def test_header_doc_and_declaration():
    """Three header comment lines, an escaped doc comment, then the declaration."""
    text = render_tool_declaration(
        "read",
        "Read a file.\nStops at */ markers.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        {"type": "string"},
        True,
    )
    lines = text.splitlines()
    assert all(line.startswith("// ") for line in lines[:3])
    assert " * Stops at *\\/ markers." in lines
    assert lines[-1] == "}): Promise<string>;"
    assert "declare function read(input: {" in text


def test_untrusted_tools_are_unknown_both_ways():
    """Client tools declare `unknown` input and output whatever their schemas say."""
    text = render_tool_declaration("client_x", "c", {"type": "string"}, {"type": "number"}, False)
    assert "declare function client_x(input?: unknown): Promise<unknown>;" in text
    assert "string" not in text.split("declare function")[1]


@pytest.mark.parametrize(
    ("schema", "optional"),
    [
        (None, True),
        ({}, True),
        ({"type": "object"}, True),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, True),
        ({"type": "object", "required": []}, True),
        ({"type": ["object", "null"]}, True),
        ({"allOf": [{"type": "object"}]}, True),
        ({"anyOf": [{"type": "object", "required": ["a"]}, {"type": "object"}]}, True),
        ({"type": "object", "required": ["a"]}, False),
        ({"type": "object", "minProperties": 1}, False),
        ({"type": "string"}, False),
        ({"type": "objet"}, False),
        ({"type": "object", "required": "a"}, False),
        ({"type": "object", "properties": []}, False),
        ({"type": "object", "additionalProperties": "no"}, False),
        ({"oneOf": [{"type": "object"}]}, False),
        ({"$ref": "#/$defs/x"}, False),
        ({"anyOf": [{"type": "object", "required": ["a"]}]}, False),
        (False, False),
        ("bad", False),
    ],
)
def test_accepts_empty_object(schema, optional):
    """`input?` only when `{}` certainly validates; invalid or doubtful schemas keep it required."""
    assert accepts_empty_object(schema) is optional


def test_optional_input_in_declaration():
    """A schema that validates `{}` gives `input?:`; one with required keys gives `input:`."""
    assert "declare function a(input?: Record<string, unknown>)" in render_tool_declaration(
        "a", "", {"type": "object"}, None, True
    )
    assert "declare function b(input: {\n    x: unknown;\n})" in render_tool_declaration(
        "b", "", {"type": "object", "required": ["x"], "properties": {}}, None, True
    )


def test_oversized_output_becomes_unknown_with_comment():
    """An output declaration over 32,768 chars is replaced by `unknown` with a comment."""
    wide = {
        "type": "object",
        "properties": {f"property_number_{n:05d}": {"type": "string"} for n in range(1500)},
    }
    text = render_tool_declaration("wide", "", None, wide, True)
    assert f"exceeds {TOOL_OUTPUT_MAX_CHARS} characters" in text
    assert text.rstrip().endswith("Promise<unknown>;")


def test_malformed_discriminator_keeps_umbrella_with_comment():
    """A malformed annotation does not break rendering; the umbrella type is declared."""
    schema = {"anyOf": [{"type": "string"}], "x-openclaw-input-discriminator": {"version": 9}}
    text = render_tool_declaration("t", "", None, schema, True)
    assert "Output narrowing unavailable" in text
    assert "Promise<string>;" in text


def test_declaration_text_is_exactly_as_documented():
    """A tool with a nested definition renders to this exact text: namespace, doc, one declaration."""
    point = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
    schema = {
        "type": "object",
        "properties": {"a": {"enum": ["x", "y"]}, "at": {"$ref": "#/$defs/Point", "description": "Where."}},
        "required": ["at"],
        "$defs": {"Point": point},
    }
    text = render_tool_declaration("t", "d", schema, {"type": "array", "items": {"type": "number"}}, True)
    assert text.split("\n")[4:] == [
        "declare namespace t {",
        "    type Point = {",
        "        x: number;",
        "    };",
        "}",
        "/**",
        " * d",
        " */",
        "declare function t(input: {",
        '    a?: "x" | "y";',
        "    /** Where. */",
        "    at: t.Point;",
        "}): Promise<number[]>;",
        "",
    ]


def test_definitions_past_the_size_limit_are_not_declared():
    """An input whose named types overflow the input allowance stays `unknown` and declares none of them."""
    wide = {"type": "object", "properties": {f"field_{n:04d}": {"type": "string"} for n in range(2000)}}
    schema = {"type": "object", "properties": {"w": {"$ref": "#/$defs/Wide"}}, "$defs": {"Wide": wide}}
    text = render_tool_declaration("t", "", schema, {"$ref": "#/$defs/P", "$defs": {"P": {"type": "string"}}}, True)
    assert "declare function t(input?: unknown): Promise<t.P>;" in text
    assert "Wide" not in text and "type P = string;" in text
