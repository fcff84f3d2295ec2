"""The `tools/<callableName>.d.ts` declaration of one tool global."""

from __future__ import annotations

from collections.abc import Mapping

from bridge.json_types import JsonObject
from service.api_files.discriminator import OutputVariants, read_output_variants
from service.api_files.errors import InvalidDiscriminatorError
from service.api_files.schema_ts import (
    DEFAULT_TS_LIMITS,
    TsNamespace,
    TsType,
    doc_text,
    object_block,
    object_shape,
    property_key,
    schema_to_ts,
    schema_type,
    ts_string,
)

__all__ = ["TOOL_INPUT_MAX_CHARS", "TOOL_OUTPUT_MAX_CHARS", "accepts_empty_object", "render_tool_declaration"]

TOOL_OUTPUT_MAX_CHARS = 32_768
TOOL_INPUT_MAX_CHARS = 32_768
_MAX_DOC_LINES = 40
_INSPECT_MAX_NODES = 4096
_INSPECT_MAX_DEPTH = 64
_REF_KEYS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})
_TYPE_NAMES = frozenset({"string", "number", "integer", "boolean", "null", "array", "object"})
# Keywords that may reject `{}` and that we do not evaluate; their presence keeps `input` required.
_MAY_REJECT_EMPTY = ("oneOf", "not", "if", "then", "else", "const", "enum", "$ref", "$dynamicRef")

_HEADER = (
    "// Generated from this tool's declared contract; shapes TypeScript cannot express stay `unknown`.",
    "// Call-time validation owns the schema's constraints; a handle's describe() has the original schemas.",
    "// Results arrive whole, or the call rejects when the program-data inbox cannot admit them.",
)


def render_tool_declaration(
    callable_name: str,
    description: str,
    input_schema: JsonObject | None,
    output_schema: JsonObject | None,
    trusted: bool,
) -> str:
    """Render the declaration file of one tool global."""
    lines = [*_HEADER, ""]
    doc = _doc_comment(description)
    if not trusted:
        lines.append("// Client tool: its metadata is not trusted, so input and output stay `unknown`.")
        lines.extend(doc)
        lines.append(f"declare function {callable_name}(input?: unknown): Promise<unknown>;")
        return "\n".join(lines) + "\n"
    # Named types of the schemas' local references: `<callable>.<Name>`, declared next to the function.
    types = TsNamespace(callable_name)
    input_type, input_note = _input_type(input_schema, types)
    if input_note:
        lines.append(input_note)
    optional = "?" if accepts_empty_object(input_schema) else ""
    try:
        variants = read_output_variants(output_schema)
    except InvalidDiscriminatorError as error:
        lines.append(f"// Output narrowing unavailable: {_comment(str(error))}.")
        variants = None
    if variants is not None and output_schema is not None:
        if not _bounded_without_refs(output_schema):
            lines.append("// Reference-bearing or structurally complex output schemas keep the complete output union.")
        else:
            narrowed = _discriminated(callable_name, input_type, optional, output_schema, variants, doc)
            if narrowed is not None:
                return "\n".join([*lines, *types.block(), *narrowed]) + "\n"
            lines.append(
                f"// Per-{_comment(variants.input_property)} output declarations exceed "
                f"{TOOL_OUTPUT_MAX_CHARS} characters; one declaration for every input is used instead."
            )
    output_type = _umbrella_output(output_schema, types)
    if output_type is None:
        lines.append(f"// The output declaration exceeds {TOOL_OUTPUT_MAX_CHARS} characters; it stays `unknown`.")
        output_type = "unknown"
    lines.extend(types.block())
    lines.extend(doc)
    lines.append(f"declare function {callable_name}(input{optional}: {input_type}): Promise<{output_type}>;")
    return "\n".join(lines) + "\n"


def accepts_empty_object(schema: object) -> bool:
    """Whether `{}` certainly validates against the schema; anything doubtful or invalid says no."""
    if schema is None or schema is True:
        return True
    if not isinstance(schema, Mapping):
        return False
    if any(key in schema for key in _MAY_REJECT_EMPTY):
        return False
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else None
    if kinds is not None and (not kinds or "object" not in kinds or not _TYPE_NAMES.issuperset(kinds)):
        return False
    required = schema.get("required", [])
    if not isinstance(required, list) or required:
        return False
    minimum = schema.get("minProperties", 0)
    if not isinstance(minimum, int) or isinstance(minimum, bool) or minimum != 0:
        return False
    if not isinstance(schema.get("properties", {}), Mapping):
        return False
    if not isinstance(schema.get("additionalProperties", True), (bool, Mapping)):
        return False
    all_of = schema.get("allOf", [])
    if not isinstance(all_of, list) or not all(accepts_empty_object(member) for member in all_of):
        return False
    any_of = schema.get("anyOf")
    if any_of is not None:
        return isinstance(any_of, list) and any(accepts_empty_object(member) for member in any_of)
    return True


def _input_type(schema: JsonObject | None, types: TsNamespace) -> tuple[str, str | None]:
    if schema is None:
        return "Record<string, unknown>", None
    shape = object_shape(schema, DEFAULT_TS_LIMITS, namespace=types)
    if shape is not None and shape.members:
        rendered = TsType(object_block(shape, ""), shape.declarations)
    else:
        if shape is not None:
            types.release(shape.declarations)
        rendered = schema_type(schema, types)
    if not _keep(rendered, types, TOOL_INPUT_MAX_CHARS):
        return (
            "unknown",
            f"// The input declaration exceeds {TOOL_INPUT_MAX_CHARS} characters; it stays `unknown`.",
        )
    return rendered.text, None


def _umbrella_output(schema: JsonObject | None, types: TsNamespace) -> str | None:
    if schema is None:
        return "unknown"
    rendered = schema_type(schema, types)
    return rendered.text if _keep(rendered, types, TOOL_OUTPUT_MAX_CHARS) else None


def _keep(rendered: TsType, types: TsNamespace, max_chars: int) -> bool:
    """Declare a rendering's named types if it fits `max_chars` with them, else free their names."""
    if len(rendered.text) + types.chars(rendered.declarations) > max_chars:
        types.release(rendered.declarations)
        return False
    types.add(rendered.declarations)
    return True


def _discriminated(
    name: str,
    input_type: str,
    optional: str,
    schema: JsonObject,
    variants: OutputVariants,
    doc: list[str],
) -> list[str] | None:
    prefix = f"__Codemode_{name}_"
    branch_names = [f"{prefix}Output{index}" for index in range(len(variants.branches))]
    output_lines = [
        f"type {branch_name} = {schema_to_ts(branch)};"
        for branch_name, branch in zip(branch_names, variants.branches, strict=True)
    ]
    output_lines.append(f"type {prefix}Output = {' | '.join(branch_names)};")
    output_lines.append(f"type {prefix}OutputByInput = {{")
    output_lines.extend(f"    {ts_string(value)}: {branch_names[index]};" for value, index in variants.mapping.items())
    output_lines.append("};")
    output_lines.append(
        f"type {prefix}OutputFor<S> = S extends keyof {prefix}OutputByInput"
        f" ? {prefix}OutputByInput[S] : {prefix}Output;"
    )
    if sum(len(line) + 1 for line in output_lines) > TOOL_OUTPUT_MAX_CHARS:
        return None
    selector = property_key(variants.input_property)
    return [
        f"type {prefix}Input = {input_type};",
        *output_lines,
        "",
        f"// A literal `{_comment(variants.input_property)}` selects its result type; "
        "missing, broad or unmapped values give the union.",
        *doc,
        f"declare function {name}<S extends string>(input: {prefix}Input & {{ {selector}: S }})"
        f": Promise<{prefix}OutputFor<S>>;",
        f"declare function {name}(input{optional}: {prefix}Input): Promise<{prefix}Output>;",
    ]


def _bounded_without_refs(schema: object) -> bool:
    """True when the schema has no reference keywords and fits the bounded inspection."""
    stack: list[tuple[object, int]] = [(schema, 0)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > _INSPECT_MAX_NODES or depth > _INSPECT_MAX_DEPTH:
            return False
        if isinstance(node, Mapping) and _REF_KEYS.intersection(node):
            return False
        children = node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (Mapping, list)))
    return True


def _doc_comment(description: str) -> list[str]:
    lines = [line.rstrip() for line in (description or "").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    if not lines:
        return []
    if len(lines) > _MAX_DOC_LINES:
        lines = [*lines[:_MAX_DOC_LINES], "\u2026"]
    return ["/**", *(f" * {doc_text(line)}".rstrip() for line in lines), " */"]


def _comment(text: str) -> str:
    """Text safe on a `//` line: no line breaks, no comment terminators."""
    return " ".join(text.split()).replace("*/", "*\\/")
