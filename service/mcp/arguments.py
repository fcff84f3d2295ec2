"""Pure shaping of MCP call arguments and results for the guest."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping

from bridge.json_types import JsonObject, JsonValue

from .errors import McpInvalidInput

ONE_OBJECT = "MCP namespace tools accept one object argument."

# Keys the SDK adds for its own negotiation (2026 caching, result kinds); not part of the MCP shapes.
_SDK_RESULT_KEYS = frozenset({"resultType", "ttlMs", "cacheScope"})


def prepare_arguments(input_schema: Mapping[str, JsonValue], value: object, *, label: str = "MCP tool") -> JsonObject:
    """Check the single object argument, fill schema defaults, and name missing required keys."""
    if not isinstance(value, dict):
        raise McpInvalidInput(ONE_OBJECT)
    schema = input_schema if isinstance(input_schema, Mapping) else {}
    arguments = dict(value)
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for key, prop in properties.items():
            if key not in arguments and isinstance(prop, Mapping) and "default" in prop:
                arguments[key] = copy.deepcopy(prop["default"])
    required = schema.get("required")
    missing = (
        [key for key in required if isinstance(key, str) and key not in arguments] if isinstance(required, list) else []
    )
    if missing:
        raise McpInvalidInput(f"{label} is missing required argument(s): {', '.join(missing)}")
    return arguments


def shape_tool_result(result: Mapping[str, JsonValue]) -> JsonObject:
    """The guest's ``{content, structuredContent?, isError?}``: block fields kept, top-level ``_meta`` dropped."""
    content = result.get("content")
    shaped: JsonObject = {"content": list(content) if isinstance(content, list) else []}
    if result.get("structuredContent") is not None:
        shaped["structuredContent"] = result["structuredContent"]
    if result.get("isError") is True:
        shaped["isError"] = True
    return shaped


def shape_native(result: Mapping[str, JsonValue]) -> JsonObject:
    """A resources/prompts result in its MCP JSON shape, without the SDK's negotiation keys."""
    return {key: value for key, value in result.items() if key not in _SDK_RESULT_KEYS}


def prompt_arguments(arguments: object, server: str) -> dict[str, str]:
    """``prompts.get(name, args)``'s arguments as MCP sends them: an object whose values are strings
    (a value that is not one is sent as its JSON text)."""
    if arguments is not None and not isinstance(arguments, dict):
        raise McpInvalidInput("MCP prompt arguments must be an object", server=server)
    given: Mapping[object, object] = arguments or {}
    return {str(k): v if isinstance(v, str) else _json_text(v) for k, v in given.items()}


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
