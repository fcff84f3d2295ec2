"""The `tools/<callableName>.pyi` declaration of one tool for Python cells, beside its `.d.ts`.

The same declared contract as the TypeScript file, spelled for Python: the input is a ``TypedDict``
(functional form, so any property name fits) unpacked as the function's keyword arguments, the output a
``TypedDict`` or the Python type of its schema.  What Python typing cannot express (references,
conditional schemas, ``not``) stays ``Any``: call-time validation owns the schema's constraints.
Rendering is bounded: at most ``MAX_NODES`` schema nodes, ``MAX_DEPTH`` levels and ``MAX_CHARS`` of
declarations per file; past a bound the part stays ``Any``.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Iterable, Mapping

from bridge.json_types import JsonValue
from service.api_files.discriminator import read_output_variants
from service.api_files.errors import InvalidDiscriminatorError

__all__ = [
    "MAX_CHARS",
    "StubRenderer",
    "comment_lines",
    "is_python_name",
    "output_overloads",
    "pascal_name",
    "render_tool_stub",
]

MAX_NODES = 4096
MAX_DEPTH = 24
MAX_CHARS = 65_536
_MAX_DOC_LINES = 40
#: The stub's type for a part it cannot express (or may not trust).
_UNTYPED = "Any"
_SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}
_NOT_NAME = re.compile(r"[^0-9A-Za-z]+")
#: Control characters a comment line must not hold (a NUL makes the file unreadable to Python tools).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

_HEADER = (
    "# Generated from this tool's declared contract for Python cells; shapes Python typing cannot express",
    "# stay `Any`. Call-time validation owns the schema's constraints.",
    "from typing import Any, Literal, Required, TypedDict, Unpack",
)


def is_python_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def pascal_name(text: str) -> str:
    parts = [p for p in _NOT_NAME.split(text) if p]
    name = "".join(p[:1].upper() + p[1:] for p in parts) or "Value"
    return name if name[0].isalpha() else "T" + name


class StubRenderer:
    """Turns schemas into Python type expressions, collecting the TypedDicts they need."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.blocks: list[str] = []
        self.names: set[str] = set()
        self.nodes = 0

    def name(self, hint: str) -> str:
        name = self.base + pascal_name(hint)
        candidate, n = name, 2
        while candidate in self.names:
            candidate, n = f"{name}{n}", n + 1
        self.names.add(candidate)
        return candidate

    def type_of(self, schema: object, hint: str, depth: int = 0) -> str:
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_DEPTH or not isinstance(schema, dict):
            return _UNTYPED
        if "const" in schema:
            return _literal([schema["const"]])
        if isinstance(enum := schema.get("enum"), list):
            return _literal(enum)
        for key in ("anyOf", "oneOf"):
            members = schema.get(key)
            if isinstance(members, list) and members:
                return _union(self.type_of(m, f"{hint}{i}", depth + 1) for i, m in enumerate(members))
        kind = schema.get("type")
        if isinstance(kind, list):
            return _union(self.type_of({**schema, "type": k}, hint, depth + 1) for k in kind)
        if isinstance(kind, str) and kind in _SCALARS:
            return _SCALARS[kind]
        if kind == "array":
            items = schema.get("items")
            return (
                f"list[{self.type_of(items, hint + 'Item', depth + 1)}]"
                if isinstance(items, dict)
                else f"list[{_UNTYPED}]"
            )
        if kind == "object" or "properties" in schema:
            return self.object_type(schema, hint, depth)
        return _UNTYPED

    def input_kwargs(self, schema: object, hint: str = "Input") -> str:
        """The annotation of a function's ``**input``: ``Unpack[<Name><hint>]`` for an object schema with
        properties (its ``TypedDict`` joins the blocks), else ``Any``."""
        if not isinstance(schema, dict):
            return _UNTYPED
        input_type = self.object_type(schema, hint, 0)
        return _UNTYPED if input_type.startswith("dict[") else f"Unpack[{input_type}]"

    def object_type(self, schema: Mapping[str, object], hint: str, depth: int) -> str:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            extra = schema.get("additionalProperties")
            value = self.type_of(extra, hint + "Value", depth + 1) if isinstance(extra, dict) else _UNTYPED
            return f"dict[str, {value}]"
        listed = schema.get("required")
        required = set(listed) if isinstance(listed, list) else set()
        name = self.name(hint)
        fields = []
        for key, sub in properties.items():
            if not isinstance(key, str):
                continue
            kind = self.type_of(sub, f"{hint}_{key}", depth + 1)
            fields.append(f"{key!r}: {f'Required[{kind}]' if key in required else kind}")
        self.blocks.append(f"{name} = TypedDict({name!r}, {{{', '.join(fields)}}}, total=False)")
        return name


def _literal(values: list[JsonValue]) -> str:
    shown = [repr(v) for v in values if isinstance(v, (str, int, bool)) or v is None]
    if len(shown) != len(values) or not shown:
        return _UNTYPED
    return f"Literal[{', '.join(shown)}]"


def _union(types: Iterable[str]) -> str:
    unique = list(dict.fromkeys(types))
    return _UNTYPED if _UNTYPED in unique else " | ".join(unique)


def comment_lines(text: str) -> list[str]:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()][:_MAX_DOC_LINES]
    return [f"# {_CONTROL.sub(' ', line)}" for line in lines]


def render_tool_stub(
    callable_name: str,
    description: str,
    input_schema: Mapping[str, object] | None,
    output_schema: Mapping[str, object] | None,
    trusted: bool,
) -> str:
    """The stub of one tool: ``async def <name>(**input: Unpack[<Name>Input]) -> <output>``."""
    lines = [*_HEADER, ""]
    if not is_python_name(callable_name):
        lines.append(f"# {callable_name!r} is not a Python name: call it as a handle, `await h.call(**input)`.")
        return "\n".join(lines) + "\n"
    if not trusted:
        lines.append("# Client tool: its metadata is not trusted, so input and output stay `Any`.")
        lines.extend(comment_lines(description))
        lines.append(f"async def {callable_name}(**input: Any) -> Any: ...")
        return "\n".join(lines) + "\n"
    renderer = StubRenderer(pascal_name(callable_name))
    kwargs = renderer.input_kwargs(input_schema)
    overloads = output_overloads(renderer, callable_name, input_schema, output_schema, kwargs)
    if overloads is not None:
        lines.insert(len(_HEADER), "from typing import overload")
        signatures = overloads
    else:
        output_type = renderer.type_of(output_schema, "Output") if output_schema is not None else _UNTYPED
        signatures = [f"async def {callable_name}(**input: {kwargs}) -> {output_type}: ..."]
    body = [*renderer.blocks, "", *comment_lines(description), *signatures]
    if sum(len(line) + 1 for line in body) > MAX_CHARS:
        lines.append(f"# The declarations exceed {MAX_CHARS} characters; input and output stay `Any`.")
        body = [*comment_lines(description), f"async def {callable_name}(**input: Any) -> Any: ..."]
    return "\n".join(lines + body) + "\n"


def output_overloads(
    renderer: StubRenderer,
    name: str,
    input_schema: object,
    output_schema: object,
    kwargs: str,
    *,
    method: bool = False,
    answer: Callable[[str], str] = str,
) -> list[str] | None:
    """Per-input signatures for an input-discriminated output, as the `.d.ts` declares them.

    One ``@overload`` per mapped value: the selector property as a keyword-only ``Literal`` (the rest of
    the input unpacked beside it) answers that value's branch; a last overload takes any input and answers
    the union. None when the output carries no valid annotation or the selector cannot be a keyword.
    ``method``: signatures of a method (``self`` first); ``answer``: the return type an output type makes
    (an MCP tool answers its result, whose ``structuredContent`` is the output).
    """
    try:
        variants = read_output_variants(output_schema if isinstance(output_schema, dict) else None)
    except InvalidDiscriminatorError:
        return None  # the .d.ts says why; here the output is the plain union
    selector = variants.input_property if variants is not None else ""
    properties = input_schema.get("properties") if isinstance(input_schema, dict) else None
    if (
        variants is None
        or not is_python_name(selector)
        or not isinstance(properties, dict)
        or selector not in properties
    ):
        return None
    assert isinstance(input_schema, dict)
    required = input_schema.get("required")
    rest = {
        **input_schema,
        "properties": {key: sub for key, sub in properties.items() if key != selector},
        "required": [key for key in required if key != selector] if isinstance(required, list) else [],
    }
    rest_type = renderer.input_kwargs(rest, "InputRest")
    rest_kwargs = "" if rest_type == _UNTYPED else f", **input: {rest_type}"
    branches = [renderer.type_of(branch, f"Output{index}") for index, branch in enumerate(variants.branches)]
    this = "self, " if method else ""
    lines = [f"# A literal `{selector}` selects its result type; another value, or none, gives the union."]
    for value, index in variants.mapping.items():
        literal = _literal([value])
        signature = f"async def {name}({this}*, {selector}: {literal}{rest_kwargs}) -> {answer(branches[index])}: ..."
        lines += ["@overload", signature]
    # The union of the answers, not the answer of the union: an MCP result is a TypedDict, invariant in it.
    lines += ["@overload", f"async def {name}({this}**input: {kwargs}) -> {_union(map(answer, branches))}: ..."]
    return lines
