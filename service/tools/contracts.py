"""Input/output contracts of tools; the only module that imports `jsonschema` and `referencing`.

Validation messages are built here from the schema side (keyword, path, schema values), never
from the validated value, so an output-contract failure does not leak the rejected data.

Every schema, the operator's and the caller's, compiles against a registry that refuses to
retrieve anything: left to itself jsonschema resolves an unknown `$ref` by fetching the URL
(urllib, no timeout) or reading a `file:` path. Patterns run on RE2: our validator classes are
each draft's, `extend()`-ed with RE2 `pattern`, `patternProperties` and `additionalProperties`
keywords (jsonschema itself, and its other users, keep theirs). One validation may evaluate at
most `MAX_VALIDATION_STEPS` keywords, so no schema/value pair holds a thread long.
A pattern search is charged by its worst cost (RE2 program size × text bytes, see
`patterns.search_work`), `PATTERN_WORK_PER_STEP` units a step, before it runs: a pattern RE2
can only run on its NFA cannot spend seconds on one long string inside a single step.
`uniqueItems` is ours too, for the same reason: linear, each item's values charged (jsonschema's
compares every pair of items that do not sort, objects for one, inside a single step); an `enum`
is charged a step for every `ENUM_ENTRIES_PER_STEP` entries it compares.
Callers on the event loop pass a small `max_steps` and get `ValidationDeferred` when the check
needs more; they then repeat it in a thread with the full budget.
A flat object input schema (most tools') is also compiled into `flat_schemas`' check, which only
ever accepts: the common valid call skips jsonschema, anything else takes the check above.
"""

from __future__ import annotations

import contextvars
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn, cast

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from referencing import Registry
from referencing.exceptions import NoSuchResource

from bridge.json_types import JsonObject, JsonValue, json_type
from service.api_files.discriminator import (
    OutputVariants,
    read_output_variants,
    select_output_schema,
)
from service.api_files.errors import InvalidDiscriminatorError
from service.tools import patterns
from service.tools.errors import (
    InvalidContractError,
    InvalidInputError,
    OutputContractError,
    PatternError,
    ToolCallError,
)
from service.tools.flat_schemas import FlatObjectCheck, flat_object_check

__all__ = [
    "MAX_DETAIL_BYTES",
    "MAX_DETAILS",
    "MAX_VALIDATION_STEPS",
    "PATTERN_WORK_PER_STEP",
    "SchemaCheck",
    "ToolContract",
    "ValidationDeferred",
    "accepts",
    "schema_problem",
]

#: A JSON Schema as jsonschema takes it: an object (read only) or a boolean.
Schema = Mapping[str, object] | bool
#: A keyword's check as jsonschema calls it: (validator, the keyword's value, instance, schema).
Keyword = Callable[..., Iterator[ValidationError] | None]

MAX_DETAILS = 5
MAX_DETAIL_BYTES = 256
_MAX_SCHEMA_VALUE_CHARS = 80
#: Keyword evaluations one validation may make: 2-15 us each in jsonschema, so at most a few
#: seconds of a thread. Honest values need one or two per node (an array of 100,000 typed items).
MAX_VALIDATION_STEPS = 250_000
#: Units of pattern work (RE2 instructions × text bytes) one step stands for: RE2's NFA costs
#: 5-15 ns a unit, so a step of pattern work takes about as long as a keyword evaluation.
PATTERN_WORK_PER_STEP = 500
#: Values of an array item made into a key for `uniqueItems` (~0.3 us each) a step stands for.
VALUES_PER_STEP = 16
#: Entries of an `enum` compared with a value (~0.5 us each) a step stands for: a 10,000-entry enum
#: would otherwise check a 600-item array in 2,000 steps, 7 s of the event loop.
ENUM_ENTRIES_PER_STEP = 8
#: Names of a `required` list looked up (~0.1 us each) a step stands for.
REQUIRED_NAMES_PER_STEP = 64


# Not a ToolError: a control-flow signal (nothing failed; the caller repeats the check off the loop).
class ValidationDeferred(Exception):
    """The check needs more than the `max_steps` it was given; run it again with the full budget."""


def _refuse_retrieval(uri: str) -> NoReturn:
    # referencing builds its classes with its own attrs wrapper, which hides __init__ from mypy.
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


#: jsonschema adds the bundled meta-schemas to this; nothing else is ever looked up.
_NO_FETCH = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


# Private control-flow signal: unwinds jsonschema's recursion when the step budget runs out.
class _TooMuchWork(Exception):
    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail  # what used the budget up, when one step was too large on its own


_STEPS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("codemode_schema_steps", default=None)


def _charge(steps: int, what: Callable[[], str]) -> None:
    """Charge `steps` to the running validation's budget (if any); `what` names the work when it alone is
    over the whole budget (a thread would refuse it too)."""
    left = _STEPS.get()
    if left is None:
        return
    left[0] -= steps
    if left[0] < 0:
        raise _TooMuchWork(f"{what()} would take {steps} steps" if steps > MAX_VALIDATION_STEPS else None)


def _charged_search(pattern: str, text: str, flags: int = 0) -> object:
    """`patterns.search`, its worst-case work charged to the running validation's step budget first."""
    if _STEPS.get() is not None and isinstance(text, str):
        cost = patterns.search_work(pattern, text) // PATTERN_WORK_PER_STEP
        _charge(cost, lambda: f"matching pattern {_show(pattern)} against a string of {len(text)} characters")
    return patterns.search(pattern, text, flags)


# The keywords that match a pattern, on RE2 (jsonschema's own use Python's backtracking `re`), and
# `uniqueItems` in linear time. Our validator classes extend each draft with these (`_bounded`);
# jsonschema itself keeps its stock keywords (the MCP SDK would use them on results:
# `service.mcp.client` never lets it validate).


# jsonschema calls these with its validator (the stubs' protocol lacks ``descend``) and the value as it walks it.
def _pattern(validator: Any, pattern: str, instance: Any, schema: Schema) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _charged_search(pattern, instance):
        yield ValidationError(f"does not match {_show(pattern)}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Schema], instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _charged_search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Schema, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in known and not any(_charged_search(p, k) for p in patterns)]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif not additional and extras:
        yield ValidationError(f"{len(extras)} additional properties are not allowed")


def _unique_items(validator: Any, unique: bool, instance: Any, schema: Schema) -> Iterator[ValidationError]:
    """`uniqueItems` in time linear in the array: each item becomes a hashable key under JSON equality
    (1 equals 1.0, true is not 1, objects ignore key order), its values charged to the step budget.
    jsonschema's own compares every pair of items that do not sort (objects, arrays, mixed kinds) in
    one step of the budget: 4,000 small objects took it 19 s."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[object] = set()
    for item in instance:
        values = [0]
        key = _json_key(item, values)
        _charge(values[0] // VALUES_PER_STEP + 1, lambda: f"comparing {len(instance)} array items")
        if key in seen:
            yield ValidationError("has non-unique elements")
            return
        seen.add(key)


def _json_key(value: object, values: list[int]) -> object:
    """A hashable key equal for JSON-equal values; counts the values it visits into `values[0]`."""
    values[0] += 1
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)  # 1 == 1.0, and their hashes agree
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_json_key(v, values) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _json_key(v, values)) for k, v in value.items()))
    return ("other", id(value))


_REPLACED: dict[str, Keyword] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}

#: Keywords whose value maps names (not keywords) to subschemas, and keywords whose value is data.
_NAMED = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"})
_DATA = frozenset({"enum", "const", "default", "examples"})


def _keywords_used(schema: object) -> set[str]:
    """Every keyword `schema` uses at any depth (one iterative pass, linear in the schema)."""
    used: set[str] = set()
    stack: list[object] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                used.add(key)
                if key in _NAMED and isinstance(value, dict):
                    stack.extend(value.values())
                elif key not in _DATA:
                    stack.append(value)
    return used


def _per_entry(entries_per_step: int) -> Callable[[object], int]:
    """The extra steps of a keyword that goes through its value's entries (a list) one by one."""
    return lambda value: len(value) // entries_per_step if isinstance(value, list) else 0


#: Keywords one evaluation of which costs more than a step: the extra steps, from the keyword's value.
#: `enum` compares the value with each entry (~0.5 us each), `required` looks each name up (~0.1 us).
_EXTRA_STEPS: dict[str, Callable[[object], int]] = {
    "enum": _per_entry(ENUM_ENTRIES_PER_STEP),
    "required": _per_entry(REQUIRED_NAMES_PER_STEP),
}


def _counted(keyword: Keyword, extra: Callable[[object], int] | None = None) -> Keyword:
    @functools.wraps(keyword)
    def run(validator: Validator, value: Any, instance: object, schema: Schema) -> Iterator[ValidationError] | None:
        left = _STEPS.get()
        if left is None:
            return keyword(validator, value, instance, schema)
        left[0] -= 1 if extra is None else 1 + extra(value)
        if left[0] < 0:
            raise _TooMuchWork
        errors = keyword(validator, value, instance, schema)
        return None if errors is None else _charged_errors(errors, left)

    return run


def _charged_errors(errors: Iterator[ValidationError], left: list[int]) -> Iterator[ValidationError]:
    """Each error a keyword yields, charged a step: one evaluation of `required` (or `dependentRequired`)
    yields an error per missing name, thousands for one step otherwise."""
    for error in errors:
        left[0] -= 1
        if left[0] < 0:
            raise _TooMuchWork
        yield error


@functools.cache
def _bounded(base: type[Validator]) -> type[Validator]:
    """`base` (a draft's validator class) with its pattern keywords on RE2, `uniqueItems` linear, and every
    keyword counted against the step budget."""
    # The stubs type a draft's keyword table by the bare ``function``.
    stock = cast("dict[str, Keyword]", base.VALIDATORS)
    keywords = {name: _REPLACED.get(name, fn) for name, fn in stock.items()}
    # jsonschema's ``extend`` is untyped: what it makes is a validator class like ``base``.
    counted = {name: _counted(fn, _EXTRA_STEPS.get(name)) for name, fn in keywords.items()}
    return cast("type[Validator]", extend(base, counted))  # type: ignore[no-untyped-call]


@functools.cache
def _schema_checker(base: type[Validator]) -> FormatChecker:
    """The draft's format checker for meta-validation, with `format: regex` checked by RE2."""
    checker = FormatChecker(())
    checker.checkers = dict(base.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=PatternError)(patterns.is_pattern)
    return checker


class ToolContract:
    """Compiled input and output schemas of one tool; `problem` is set when they are unusable."""

    def __init__(self, input_schema: JsonObject, output_schema: JsonObject | None, *, vetted: bool = False) -> None:
        """With `vetted`, the schemas already passed `schema_problem` (elsewhere): they are not checked again."""
        self.input_schema = input_schema
        self.output_schema = output_schema
        self.variants: OutputVariants | None = None
        self.problem: str | None = None
        self._input: Validator | None = None
        #: Accepts the common input (a small flat object) without jsonschema; None: every input takes the full check.
        self._accepts_at_once: FlatObjectCheck | None = None
        self._output: dict[object, Validator] = {}
        try:
            self._input = _validator(input_schema) if vetted else _compile(input_schema, "input schema")
            self._accepts_at_once = flat_object_check(input_schema)
            if output_schema is not None:
                self._output[None] = _validator(output_schema) if vetted else _compile(output_schema, "output schema")
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
        params: JsonValue,
        tool: str,
        *,
        error: type[ToolCallError] = InvalidInputError,
        effect_started: bool = False,
        max_steps: int = MAX_VALIDATION_STEPS,
    ) -> None:
        """Raise `error` (invalid_input by default) naming the failing fields."""
        self.ensure_usable(tool)
        if self._accepts_at_once is not None and self._accepts_at_once(params):
            return  # what jsonschema would accept too; anything else (even a valid input) gets the full check
        assert self._input is not None  # it compiled: ensure_usable did not raise
        details = _errors(self._input, params, reveal_keys=True, tool=tool, max_steps=max_steps)
        if details:
            lead = "invalid input" if error is InvalidInputError else "arguments prepared by a hook are invalid"
            raise error(
                f"{tool}: {lead}: {'; '.join(details)}",
                tool=tool,
                details=details,
                effect_started=effect_started,
            )

    def check_output(
        self,
        value: JsonValue,
        tool: str,
        *,
        caller_input: JsonValue,
        prepared_input: JsonValue,
        max_steps: int = MAX_VALIDATION_STEPS,
    ) -> None:
        """Raise output_contract unless `value` fits the branches of the caller's and the prepared input."""
        self.ensure_usable(tool)
        schema = self.output_schema
        if schema is None:
            return
        seen: set[object] = set()
        for tool_input in (caller_input, prepared_input):
            key = self._branch_key(tool_input)
            if key in seen:
                continue
            seen.add(key)
            details = _errors(
                self._output_validator(schema, key, tool_input),
                value,
                reveal_keys=False,
                tool=tool,
                max_steps=max_steps,
            )
            if details:
                raise OutputContractError(
                    f"{tool} returned a value that does not match its output schema (value withheld): "
                    f"{'; '.join(details)}",
                    tool=tool,
                    details=details,
                    effect_started=True,
                )

    def _branch_key(self, tool_input: object) -> object:
        if self.variants is None:
            return None
        return self.variants.branch_for(tool_input)

    def _output_validator(self, schema: JsonObject, key: object, tool_input: object) -> Validator:
        if key not in self._output:
            narrowed = select_output_schema(schema, self.variants, tool_input)
            self._output[key] = _validator(narrowed)
        return self._output[key]


class SchemaCheck:
    """One schema that passed `schema_problem` (elsewhere: it is not checked again), compiled once and
    applied to many values: the output contract of a tool the operator did not write (an MCP server's
    `outputSchema`). Its findings are worded from the schema side; the value is never quoted."""

    def __init__(self, schema: Schema) -> None:
        self._validator = _validator(schema)

    def problems(self, value: JsonValue, *, max_steps: int = MAX_VALIDATION_STEPS) -> tuple[str, ...]:
        """Why `value` does not fit (empty: it does), at most `MAX_DETAILS` lines; `ValidationDeferred`
        when the check needs more than `max_steps` (below `MAX_VALIDATION_STEPS`)."""
        try:
            return _errors(self._validator, value, reveal_keys=False, tool="", max_steps=max_steps)
        except InvalidContractError:  # e.g. a $ref that resolves only while validating
            return ("$: the schema could not be applied to this value",)


def schema_problem(schema: object) -> str | None:
    """Why `schema` is not a usable JSON Schema, or None when it is."""
    try:
        _compile(schema, "schema")
    except _SchemaProblem as exc:
        return str(exc)
    return None


def accepts(schema: object, value: JsonValue) -> bool:
    """True when `schema` is valid and accepts `value` (e.g. whether `{}` may be omitted)."""
    token = _STEPS.set([MAX_VALIDATION_STEPS])
    try:
        validator = _compile(schema, "schema")
        return not any(True for _ in validator.iter_errors(value))
    except Exception:  # noqa: BLE001 - an unusable schema (or one too costly for `value`) accepts nothing
        return False
    finally:
        _STEPS.reset(token)


# Private to this module: always caught here and turned into an InvalidContractError or a message.
class _SchemaProblem(Exception):
    pass


def _compile(schema: object, what: str) -> Validator:
    if not isinstance(schema, (dict, bool)):
        raise _SchemaProblem(f"{what} is not a JSON Schema object")
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        # The stubs' Validator protocol takes only a dict and no format_checker; every validator
        # class jsonschema creates accepts both a boolean schema and that keyword.
        cls.check_schema(schema, format_checker=_schema_checker(cls))  # type: ignore[call-arg, arg-type]
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise _SchemaProblem(f"{what} is invalid at {where}: {_clip(exc.message, 160)}") from None
    except RecursionError:
        raise _SchemaProblem(f"{what} is nested too deeply to check") from None
    if {"unevaluatedProperties", "patternProperties"} <= _keywords_used(schema):
        # jsonschema finds the properties unevaluatedProperties skips with its own (backtracking)
        # pattern matching, which no public extension point reaches: refused rather than run.
        raise _SchemaProblem(
            f"{what} uses unevaluatedProperties together with patternProperties, which cannot be checked in "
            "linear time here; use additionalProperties next to patternProperties instead"
        )
    return _validator(schema)


def _validator(schema: Schema) -> Validator:
    return _bounded(validator_for(schema, default=Draft202012Validator))(schema, registry=_NO_FETCH)


def _errors(validator: Validator, value: JsonValue, *, reveal_keys: bool, tool: str, max_steps: int) -> tuple[str, ...]:
    token = _STEPS.set([min(max_steps, MAX_VALIDATION_STEPS)])
    try:
        found = list(validator.iter_errors(value))
    except RecursionError:
        return ("$: value is nested too deeply to validate",)
    except _TooMuchWork as exc:
        if exc.detail is not None:  # one search over the whole budget: a thread would refuse it too
            return (
                f"$: {exc.detail}, over the budget of {MAX_VALIDATION_STEPS} (RE2 program size × text bytes, "
                f"{PATTERN_WORK_PER_STEP} a step); send shorter strings",
            )
        if max_steps < MAX_VALIDATION_STEPS:
            raise ValidationDeferred from None
        return (
            f"$: checking this value against the schema takes more than {MAX_VALIDATION_STEPS} steps; "
            "send a smaller value",
        )
    except Exception as exc:  # noqa: BLE001 - e.g. an unresolvable $ref only shows up while validating
        raise InvalidContractError(
            f"{tool} cannot run: its schema could not be applied ({type(exc).__name__}). "
            "The tool's author must fix the schema.",
            tool=tool,
        ) from None
    finally:
        _STEPS.reset(token)
    if not found:
        return ()
    found.sort(key=lambda e: (e.validator in ("anyOf", "oneOf", "not"), e.json_path, str(e.validator)))
    lines: dict[str, None] = {}  # in order, without repeats
    described: set[tuple[int, int]] = set()  # (object, list) of `required` errors described already
    for err in found:
        if err.validator == "required":  # one error per missing name; the first describes them all
            pair = (id(err.instance), id(err.validator_value))
            if pair in described:
                continue
            described.add(pair)
        lines.update(dict.fromkeys(_describe(err, reveal_keys)))
    shown = [_clip_bytes(line, MAX_DETAIL_BYTES) for line in list(lines)[:MAX_DETAILS]]
    if len(lines) > MAX_DETAILS:
        more = f" (+{len(lines) - MAX_DETAILS} more)"
        shown[-1] = _clip_bytes(shown[-1], MAX_DETAIL_BYTES - len(more)) + more
    return tuple(shown)


def _describe(err: ValidationError, reveal_keys: bool) -> list[str]:
    path, kw, rule = err.json_path, str(err.validator), err.validator_value
    if kw == "required" and isinstance(err.instance, dict) and isinstance(rule, list):
        missing = [p for p in rule if p not in err.instance]
        return [f"{path}: missing required property {_show(p)}" for p in missing] or [f"{path}: fails required"]
    if kw == "type":
        got = json_type(err.instance, integers=True) or type(err.instance).__name__
        return [f"{path}: expected {_show_types(rule)}, got {got}"]
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


def _show_types(rule: object) -> str:
    if isinstance(rule, list):
        return " or ".join(str(t) for t in rule)
    return str(rule)


def _show(value: object) -> str:
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
