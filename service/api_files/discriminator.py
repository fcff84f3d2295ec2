"""Input-discriminated output schemas: the `x-openclaw-input-discriminator` annotation (v1)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from bridge.json_types import JsonObject
from service.api_files.errors import InvalidDiscriminatorError

__all__ = [
    "DISCRIMINATOR_KEY",
    "OutputVariants",
    "read_output_variants",
    "select_output_schema",
]

DISCRIMINATOR_KEY = "x-openclaw-input-discriminator"

_SUPPORTED_VERSION = 1
_ANNOTATION_KEYS = frozenset({"version", "inputProperty", "mapping"})
_MAX_PROPERTY_CHARS = 256


@dataclass(frozen=True)
class OutputVariants:
    """A validated annotation: which input property selects which root branch."""

    input_property: str
    mapping: Mapping[str, int]
    branches: tuple[JsonObject, ...]

    def branch_for(self, tool_input: object) -> int | None:
        """Index of the branch selected by `tool_input`, or None when missing or unmapped."""
        if not isinstance(tool_input, Mapping):
            return None
        value = tool_input.get(self.input_property)
        if not isinstance(value, str):
            return None
        return self.mapping.get(value)


def read_output_variants(schema: JsonObject | None) -> OutputVariants | None:
    """Parse the annotation of an output schema; None when the schema carries none."""
    if not isinstance(schema, Mapping) or DISCRIMINATOR_KEY not in schema:
        return None
    annotation = schema[DISCRIMINATOR_KEY]
    if not isinstance(annotation, Mapping):
        raise _invalid("must be an object")
    unknown = sorted(str(key) for key in annotation if key not in _ANNOTATION_KEYS)
    if unknown:
        raise _invalid(f"has unsupported keys: {', '.join(unknown)}")
    version = annotation.get("version")
    if not _is_int(version) or version != _SUPPORTED_VERSION:
        raise _invalid(f"version must be {_SUPPORTED_VERSION}, got {version!r}")
    input_property = annotation.get("inputProperty")
    if not isinstance(input_property, str) or not input_property.strip():
        raise _invalid("inputProperty must be a non-empty string")
    if len(input_property) > _MAX_PROPERTY_CHARS:
        raise _invalid(f"inputProperty must be at most {_MAX_PROPERTY_CHARS} characters")
    branches = _read_branches(schema)
    mapping = _read_mapping(annotation.get("mapping"), len(branches))
    return OutputVariants(input_property, MappingProxyType(mapping), branches)


def select_output_schema(schema: JsonObject, variants: OutputVariants | None, tool_input: object) -> JsonObject:
    """The schema a result for `tool_input` must satisfy: the root narrowed to the selected branch.

    The root is kept (with `allOf: [{"$ref": "#/anyOf/<i>"}]` appended) rather than returning the bare
    branch, so root keywords such as `$defs` still resolve for references inside the branch.
    Missing, non-string or unmapped selector values keep the whole schema.
    """
    if variants is None:
        return schema
    index = variants.branch_for(tool_input)
    if index is None:
        return schema
    union_key = "anyOf" if "anyOf" in schema else "oneOf"
    narrowed = dict(schema)
    existing = schema.get("allOf")
    prior = list(existing) if isinstance(existing, list) else []
    narrowed["allOf"] = [*prior, {"$ref": f"#/{union_key}/{index}"}]
    return narrowed


def _read_branches(schema: Mapping[str, object]) -> tuple[JsonObject, ...]:
    has_any, has_one = "anyOf" in schema, "oneOf" in schema
    if has_any and has_one:
        raise _invalid("requires exactly one root anyOf or oneOf, found both")
    if not (has_any or has_one):
        raise _invalid("requires a root anyOf or oneOf")
    raw = schema["anyOf" if has_any else "oneOf"]
    if not isinstance(raw, list) or not raw:
        raise _invalid("requires a non-empty root anyOf/oneOf list")
    branches: list[JsonObject] = []
    for index, branch in enumerate(raw):
        # Boolean schemas are legal JSON Schema; normalise them to their object spelling.
        if branch is True:
            branches.append({})
        elif branch is False:
            branches.append({"not": {}})
        elif isinstance(branch, Mapping):
            branches.append(dict(branch))
        else:
            raise _invalid(f"branch {index} of the root union is not a schema object")
    return tuple(branches)


def _read_mapping(raw: object, branch_count: int) -> dict[str, int]:
    if not isinstance(raw, Mapping):
        raise _invalid("mapping must be an object of selector value to branch index")
    if not raw:
        raise _invalid("mapping must not be empty")
    mapping: dict[str, int] = {}
    for value, index in raw.items():
        if not isinstance(value, str):
            raise _invalid(f"mapping key {value!r} must be a string")
        if not _is_int(index):
            raise _invalid(f"mapping[{value!r}] must be an integer branch index, got {index!r}")
        if not 0 <= index < branch_count:
            raise _invalid(f"mapping[{value!r}] = {index} is out of range for {branch_count} root branches")
        mapping[value] = index
    return mapping


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _invalid(problem: str) -> InvalidDiscriminatorError:
    return InvalidDiscriminatorError(f"{DISCRIMINATOR_KEY} {problem}")
