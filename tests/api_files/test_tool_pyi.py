"""`render_tool_stub`: the Python declaration of one tool, for names and schemas Python cannot spell as-is."""

from __future__ import annotations

import ast

from service.api_files.tool_pyi import MAX_CHARS, render_tool_stub


def parses(text: str) -> str:
    ast.parse(text)  # every stub is valid Python, whatever the names and descriptions hold
    return text


def test_any_property_name_fits_and_required_keys_are_marked():
    """Keys that are keywords or not identifiers stay keys of a functional TypedDict; required ones say so."""
    schema = {"type": "object", "required": ["class"], "properties": {"class": {"type": "integer"}, "a-b": {}}}
    text = parses(render_tool_stub("t", "d", schema, None, True))
    assert "TInput = TypedDict('TInput', {'class': Required[int], 'a-b': Any}, total=False)" in text
    assert "async def t(**input: Unpack[TInput]) -> Any: ..." in text


def test_names_python_cannot_call_and_client_tools():
    """A keyword as the tool's name gets a note instead of a def; a client tool takes and answers Any."""
    assert "def " not in parses(render_tool_stub("class", "d", None, None, True))
    text = parses(render_tool_stub("w", "line one\n'''\"\"\" breaker", {"type": "object"}, None, False))
    assert "async def w(**input: Any) -> Any: ..." in text and "# '''\"\"\" breaker" in text


def test_scalars_literals_unions_lists_and_maps():
    """Enums become Literal, type lists and anyOf unions, arrays lists, property-less objects dicts."""
    out = {
        "type": "object",
        "properties": {
            "e": {"enum": ["a", 1, None]},
            "u": {"type": ["string", "null"]},
            "o": {"anyOf": [{"type": "number"}, {"type": "boolean"}]},
            "l": {"type": "array", "items": {"type": "string"}},
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
            "r": {"$ref": "#/$defs/x"},
        },
    }
    text = parses(render_tool_stub("t", "", {"type": "object"}, out, True))
    assert (
        "{'e': Literal['a', 1, None], 'u': str | None, 'o': float | bool, 'l': list[str], "
        "'m': dict[str, int], 'r': Any}" in text
    )


def test_rendering_is_bounded():
    """A schema past the size bound renders as Any instead of a huge file."""
    wide = {"type": "object", "properties": {f"p{i}" * 20: {"type": "string"} for i in range(3000)}}
    text = parses(render_tool_stub("t", "", wide, None, True))
    assert len(text) < MAX_CHARS and "async def t(**input: Any) -> Any: ..." in text


def _discriminated(selector: str, mapping: dict[str, int], version: int = 1) -> tuple[dict, dict]:
    input_schema = {
        "type": "object",
        "properties": {selector: {"enum": list(mapping)}, "id": {"type": "string"}},
        "required": [selector],
    }
    output_schema = {
        "anyOf": [{"type": "object", "properties": {"ids": {"type": "array"}}}, {"type": "string"}],
        "x-openclaw-input-discriminator": {"version": version, "inputProperty": selector, "mapping": mapping},
    }
    return input_schema, output_schema


def test_an_input_discriminated_output_gets_one_overload_per_value_and_the_union_last():
    """Each mapped selector value is a keyword-only Literal answering its branch; the last overload takes
    any input and answers the union; hostile values stay string literals."""
    text = parses(render_tool_stub("s", "d", *_discriminated("mode", {"list": 0, "one": 1, "x'\"\n": 1}), True))
    assert "from typing import overload" in text and text.count("@overload") == 4
    assert "async def s(*, mode: Literal['list'], **input: Unpack[SInputRest]) -> SOutput0: ..." in text
    assert "async def s(*, mode: Literal['one'], **input: Unpack[SInputRest]) -> str: ..." in text
    assert "mode: Literal['x\\'\"\\n']" in text
    assert text.rstrip().endswith("async def s(**input: Unpack[SInput]) -> SOutput0 | str: ...")


def test_no_overloads_where_python_cannot_spell_the_selector_or_the_annotation_is_invalid():
    """A selector that is a Python keyword, or an annotation of an unknown version, leaves one signature
    answering the whole output."""
    for schemas in (_discriminated("class", {"a": 0, "b": 1}), _discriminated("mode", {"a": 0}, version=2)):
        text = parses(render_tool_stub("s", "d", *schemas, True))
        assert "@overload" not in text and text.count("async def s(") == 1
