"""Input/output contracts of tools; the only module that imports `jsonschema`.

Validation messages are built here from the schema side (keyword, path, schema values), never
from the validated value, so an output-contract failure does not leak the rejected data.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.validators import validator_for

from service.tools.discriminator import (
    InvalidDiscriminatorError,
    OutputVariants,
    read_output_variants,
    select_output_schema,
)
from service.tools.errors import (
    InvalidContractError,
    InvalidInputError,
    OutputContractError,
    ToolCallError,
)

__all__ = ["MAX_DETAIL_BYTES", "MAX_DETAILS", "ToolContract", "accepts", "schema_problem"]

MAX_DETAILS = 5
MAX_DETAIL_BYTES = 256
_MAX_SCHEMA_VALUE_CHARS = 80


class ToolContract:
    """Compiled input and output schemas of one tool; `problem` is set when they are unusable."""

    def __init__(self, input_schema: dict[str, Any], output_schema: dict[str, Any] | None) -> None:
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.variants: OutputVariants | None = None
        self.problem: str | None = None
        self._input: Any = None
        self._output: dict[Any, Any] = {}
        try:
            self._input = _compile(input_schema, "input schema")
            if output_schema is not None:
                self._output[None] = _compile(output_schema, "output schema")
                self.variants = read_output_variants(output_schema)
        except _SchemaProblem as exc:
            self.problem = str(exc)
        except InvalidDiscriminatorError as exc:
            self.problem = f"output schema: {exc}"

    def ensure_usable(self, tool: str) -> None:
        """Raise invalid_contract if the schemas did not compile (before any side effect)."""
        if self.problem is not None:
            raise InvalidContractError(
                f"{tool} cannot run: its {self.problem}. The tool's author must fix the schema.", tool=tool
            )

    def check_input(
        self,
        params: Any,
        tool: str,
        *,
        error: type[ToolCallError] = InvalidInputError,
        effect_started: bool = False,
    ) -> None:
        """Raise `error` (invalid_input by default) naming the failing fields."""
        self.ensure_usable(tool)
        details = _errors(self._input, params, reveal_keys=True, tool=tool)
        if details:
            lead = (
                "invalid input" if error is InvalidInputError else "arguments prepared by a hook are invalid"
            )
            raise error(
                f"{tool}: {lead}: {'; '.join(details)}",
                tool=tool,
                details=details,
                effect_started=effect_started,
            )

    def check_output(self, value: Any, tool: str, *, caller_input: Any, prepared_input: Any) -> None:
        """Raise output_contract unless `value` fits the branches of the caller's and the prepared input."""
        self.ensure_usable(tool)
        if self.output_schema is None:
            return
        seen: set[Any] = set()
        for tool_input in (caller_input, prepared_input):
            key = self._branch_key(tool_input)
            if key in seen:
                continue
            seen.add(key)
            details = _errors(self._output_validator(key, tool_input), value, reveal_keys=False, tool=tool)
            if details:
                raise OutputContractError(
                    f"{tool} returned a value that does not match its output schema (value withheld): "
                    f"{'; '.join(details)}",
                    tool=tool,
                    details=details,
                    effect_started=True,
                )

    def _branch_key(self, tool_input: Any) -> Any:
        if self.variants is None:
            return None
        return self.variants.branch_for(tool_input)

    def _output_validator(self, key: Any, tool_input: Any) -> Any:
        if key not in self._output:
            narrowed = select_output_schema(self.output_schema, self.variants, tool_input)
            self._output[key] = validator_for(narrowed, default=Draft202012Validator)(narrowed)
        return self._output[key]


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a usable JSON Schema, or None when it is."""
    try:
        _compile(schema, "schema")
    except _SchemaProblem as exc:
        return str(exc)
    return None


def accepts(schema: Any, value: Any) -> bool:
    """True when `schema` is valid and accepts `value` (e.g. whether `{}` may be omitted)."""
    try:
        validator = _compile(schema, "schema")
        return not any(True for _ in validator.iter_errors(value))
    except Exception:  # noqa: BLE001 - an unusable schema accepts nothing
        return False


class _SchemaProblem(Exception):
    pass


def _compile(schema: Any, what: str) -> Any:
    if not isinstance(schema, (dict, bool)):
        raise _SchemaProblem(f"{what} is not a JSON Schema object")
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise _SchemaProblem(f"{what} is invalid at {where}: {_clip(exc.message, 160)}") from None
    return cls(schema)


def _errors(validator: Any, value: Any, *, reveal_keys: bool, tool: str) -> tuple[str, ...]:
    try:
        found = list(validator.iter_errors(value))
    except RecursionError:
        return ("$: value is nested too deeply to validate",)
    except Exception as exc:  # noqa: BLE001 - e.g. an unresolvable $ref only shows up while validating
        raise InvalidContractError(
            f"{tool} cannot run: its schema could not be applied ({type(exc).__name__}). "
            "The tool's author must fix the schema.",
            tool=tool,
        ) from None
    if not found:
        return ()
    found.sort(key=lambda e: (e.validator in ("anyOf", "oneOf", "not"), e.json_path, str(e.validator)))
    lines: list[str] = []
    for err in found:
        for line in _describe(err, reveal_keys):
            if line not in lines:
                lines.append(line)
    shown = [_clip_bytes(line, MAX_DETAIL_BYTES) for line in lines[:MAX_DETAILS]]
    if len(lines) > MAX_DETAILS:
        more = f" (+{len(lines) - MAX_DETAILS} more)"
        shown[-1] = _clip_bytes(shown[-1], MAX_DETAIL_BYTES - len(more)) + more
    return tuple(shown)


def _describe(err: ValidationError, reveal_keys: bool) -> list[str]:
    path, kw, rule = err.json_path, str(err.validator), err.validator_value
    if kw == "required" and isinstance(err.instance, dict) and isinstance(rule, list):
        missing = [p for p in rule if p not in err.instance]
        return [f"{path}: missing required property {_show(p)}" for p in missing] or [
            f"{path}: fails required"
        ]
    if kw == "type":
        return [f"{path}: expected {_show_types(rule)}, got {_json_type(err.instance)}"]
    if kw in ("additionalProperties", "unevaluatedProperties") and isinstance(err.instance, dict):
        if reveal_keys and isinstance(err.schema, dict):
            known = err.schema.get("properties") or {}
            extra = sorted(k for k in err.instance if k not in known)[:5]
            if extra:
                return [f"{path}: unexpected properties {', '.join(_show(k) for k in extra)}"]
        return [f"{path}: has properties the schema does not allow"]
    if kw == "enum":
        return [f"{path}: must be one of {_show(rule)}"]
    if kw == "const":
        return [f"{path}: must equal {_show(rule)}"]
    if kw in ("anyOf", "oneOf"):
        return [f"{path}: does not match any allowed variant ({kw})"]
    if kw == "not":
        return [f"{path}: matches a shape the schema forbids"]
    if kw == "false":
        return [f"{path}: no value is allowed here"]
    if kw in _RULES:
        return [f"{path}: {_RULES[kw]} {_show(rule)}"]
    return [f"{path}: fails {kw}"]


_RULES: dict[str, str] = {
    "minimum": "must be >=",
    "maximum": "must be <=",
    "exclusiveMinimum": "must be >",
    "exclusiveMaximum": "must be <",
    "multipleOf": "must be a multiple of",
    "minLength": "must have length >=",
    "maxLength": "must have length <=",
    "minItems": "must have items >=",
    "maxItems": "must have items <=",
    "minProperties": "must have properties >=",
    "maxProperties": "must have properties <=",
    "pattern": "must match pattern",
    "format": "must have format",
    "uniqueItems": "must have unique items:",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _show_types(rule: Any) -> str:
    if isinstance(rule, list):
        return " or ".join(str(t) for t in rule)
    return str(rule)


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return _clip(text, _MAX_SCHEMA_VALUE_CHARS)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_bytes(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    cut = raw[: max(0, limit - 3)].decode("utf-8", errors="ignore")
    return cut + "…"
