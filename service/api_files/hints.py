"""Compact one-line input/output hints for the quick index."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bridge.json_types import json_type
from service.api_files.schema_ts import property_key, ts_string

__all__ = ["INPUT_HINT_LIMITS", "OUTPUT_HINT_LIMITS", "HintLimits", "input_hint", "output_hint"]

# Keywords whose meaning a compact hint cannot carry; their presence makes a hint incomplete.
_INEXPRESSIBLE = (
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "allOf",
    "not",
    "patternProperties",
    "if",
    "then",
    "else",
    "prefixItems",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "unevaluatedItems",
)
_UNRENDERABLE = ("$ref", "$dynamicRef", "$recursiveRef", "allOf", "not")
_STRUCTURAL = ("type", "properties", "items", "additionalProperties", "required", "enum", "const")


@dataclass(frozen=True)
class HintLimits:
    """Bounds for one kind of hint."""

    max_chars: int
    max_properties: int
    max_depth: int
    max_union: int = 4
    max_enum_values: int = 8
    max_enum_chars: int = 96
    max_key_chars: int = 128
    max_nodes: int = 512


INPUT_HINT_LIMITS = HintLimits(max_chars=300, max_properties=16, max_depth=4)
OUTPUT_HINT_LIMITS = HintLimits(max_chars=850, max_properties=20, max_depth=6)


def input_hint(schema: object, limits: HintLimits = INPUT_HINT_LIMITS) -> str:
    """Hint for a tool's input; "unknown" when absent or longer than the limit."""
    if schema is None:
        return "unknown"
    text = _HintRenderer(limits).render(schema, 0)
    return text if len(text) <= limits.max_chars else "unknown"


def output_hint(schema: object, limits: HintLimits = OUTPUT_HINT_LIMITS) -> str | None:
    """Hint for a trusted output schema; None unless it describes the value completely."""
    if schema is None:
        return None
    renderer = _HintRenderer(limits)
    text = renderer.render(schema, 0)
    if not renderer.complete or len(text) > limits.max_chars:
        return None
    return text


class _HintRenderer:
    """One hint rendering; `complete` drops to False at the first lossy step."""

    def __init__(self, limits: HintLimits) -> None:
        self._limits = limits
        self._nodes = 0
        self.complete = True

    def render(self, schema: object, depth: int) -> str:
        self._nodes += 1
        if depth > self._limits.max_depth or self._nodes > self._limits.max_nodes:
            return self._lossy("unknown")
        if not isinstance(schema, Mapping):
            return self._lossy("never" if schema is False else "unknown")
        if any(key in schema for key in _INEXPRESSIBLE):
            self.complete = False
            if any(key in schema for key in _UNRENDERABLE):
                return "unknown"
        text = self._shape(schema, depth)
        if schema.get("nullable") is True and text != "null" and not text.endswith("| null"):
            text = f"{text} | null"
        return text

    def _shape(self, schema: Mapping[str, object], depth: int) -> str:
        if "anyOf" in schema or "oneOf" in schema:
            if "anyOf" in schema and "oneOf" in schema:
                return self._lossy("unknown")
            if any(key in schema for key in _STRUCTURAL):
                self.complete = False  # Sibling constraints would be dropped by a bare union.
            else:
                return self._union(schema.get("anyOf", schema.get("oneOf")), depth)
        if "const" in schema:
            return self._literal(schema["const"])
        if "enum" in schema:
            return self._enum(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            names = [name for name in dict.fromkeys(kind) if isinstance(name, str)]
            if not names:
                return self._lossy("unknown")
            return _join([self._typed(name, schema, depth) for name in names])
        if isinstance(kind, str):
            return self._typed(kind, schema, depth)
        if "properties" in schema or "additionalProperties" in schema:
            return self._object(schema, depth)
        if "items" in schema:
            return self._array(schema, depth)
        return self._lossy("unknown")

    def _typed(self, kind: str, schema: Mapping[str, object], depth: int) -> str:
        if kind in ("string", "boolean", "null"):
            return kind
        if kind in ("number", "integer"):
            return "number"
        if kind == "array":
            return self._array(schema, depth)
        if kind == "object":
            return self._object(schema, depth)
        return self._lossy("unknown")

    def _union(self, branches: object, depth: int) -> str:
        if not isinstance(branches, list) or not branches or len(branches) > self._limits.max_union:
            return self._lossy("unknown")
        return _join([self.render(branch, depth + 1) for branch in branches])

    def _enum(self, values: object) -> str:
        if not isinstance(values, list) or not values:
            return self._lossy("unknown")
        literals = [_literal_text(value) for value in values]
        if len(values) <= self._limits.max_enum_values and all(literals):
            text = _join([literal for literal in literals if literal])
            if len(text) <= self._limits.max_enum_chars:
                return text
        self.complete = False
        return _join([_kind_text(value) for value in values])

    def _literal(self, value: object) -> str:
        text = _literal_text(value)
        return text if text is not None else self._lossy(_kind_text(value))

    def _array(self, schema: Mapping[str, object], depth: int) -> str:
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return f"Array<{self._lossy('unknown')}>"
        return f"Array<{self.render(items, depth + 1)}>"

    def _object(self, schema: Mapping[str, object], depth: int) -> str:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required_raw = schema.get("required")
        required = [name for name in required_raw if isinstance(name, str)] if isinstance(required_raw, list) else []
        names = [name for name in properties if isinstance(name, str)]
        if any(name not in properties for name in required):
            self.complete = False
        ordered = [name for name in names if name in required]
        ordered += sorted(name for name in names if name not in required)
        if len(ordered) > self._limits.max_properties:
            ordered = ordered[: self._limits.max_properties]
            self.complete = False
        fields: list[str] = []
        for name in ordered:
            if len(name) > self._limits.max_key_chars:
                self.complete = False
                continue
            mark = "" if name in required else "?"
            fields.append(f"{property_key(name)}{mark}: {self.render(properties[name], depth + 1)}")
        if schema.get("additionalProperties") is not False or len(fields) < len(names):
            self.complete = False
            fields.append("...")
        return "{ " + "; ".join(fields) + " }" if fields else "{}"

    def _lossy(self, text: str) -> str:
        self.complete = False
        return text


def _join(parts: list[str]) -> str:
    return " | ".join(dict.fromkeys(parts))


def _literal_text(value: object) -> str | None:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return ts_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value == value and abs(value) != float("inf"):
        return repr(value)
    return None


def _kind_text(value: object) -> str:
    kind = json_type(value)
    return kind if kind in ("null", "boolean", "string", "number") else "unknown"
