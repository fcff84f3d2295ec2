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
