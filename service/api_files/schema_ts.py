"""JSON Schema to TypeScript type text, bounded and deterministic, always valid TypeScript."""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeGuard

from bridge.json_types import json_type
from service.api_files.schema_refs import MISSING, names_reaching_cycles, resolve_local
from service.api_files.ts_text import (
    TsDeclaration,
    TsMember,
    TsNamespace,
    TsObject,
    TsType,
    doc_text,
    member_doc,
    object_block,
    one_line,
    property_key,
    ts_string,
)

__all__ = [
    "DEFAULT_TS_LIMITS",
    "TsLimits",
    "TsMember",
    "TsNamespace",
    "TsObject",
    "TsType",
    "doc_text",
    "member_doc",
    "object_block",
    "object_shape",
    "one_line",
    "property_key",
    "schema_to_ts",
    "schema_type",
    "ts_string",
]

_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
# Resolved against the dynamic scope at validation time, which a static rendering does not have.
_DYNAMIC_REF_KEYS = ("$dynamicRef", "$recursiveRef")
_OBJECT_HINTS = ("properties", "additionalProperties", "patternProperties", "required")
_ARRAY_HINTS = ("items", "prefixItems")
_MAX_SAFE_INTEGER = 2**53 - 1
# Every object has these through Object.prototype, so TypeScript checks an omitted optional member of
# that name against the inherited method; any type but `unknown` would reject plain object literals.
_OBJECT_PROTOTYPE_MEMBERS = frozenset(
    {
        "constructor",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    }
)

# Precedence of a rendered type, for deciding where parentheses are needed.
_UNION, _INTERSECTION, _ATOM = 0, 1, 2


@dataclass(frozen=True)
class TsLimits:
    """Bounds on one rendering; past them the remaining shapes become `unknown`."""

    max_depth: int = 32
    max_nodes: int = 4096
    max_enum_literals: int = 16
    max_union_members: int = 8


DEFAULT_TS_LIMITS = TsLimits()


@dataclass(frozen=True)
class _Ts:
    text: str
    precedence: int
    alternatives: tuple[str, ...] = ()  # A union's members, so nested unions flatten and dedupe.


_UNKNOWN = _Ts("unknown", _ATOM)
_NEVER = _Ts("never", _ATOM)


def schema_to_ts(schema: object, limits: TsLimits = DEFAULT_TS_LIMITS) -> str:
    """Render a JSON Schema as a TypeScript type expression; references render as `unknown`."""
    return _Renderer(limits).render(schema, 0).text


def schema_type(schema: object, namespace: TsNamespace, limits: TsLimits = DEFAULT_TS_LIMITS) -> TsType:
    """Render a JSON Schema whose local references become named types of `namespace`.

    The declarations are returned, not added: the caller adds them if it keeps the text.
    """
    renderer = _Renderer(limits, schema, namespace)
    text = renderer.render(schema, 0).text
    return TsType(text, renderer.finish())


def object_shape(
    schema: object,
    limits: TsLimits = DEFAULT_TS_LIMITS,
    *,
    defaults_optional: bool = False,
    namespace: TsNamespace | None = None,
) -> TsObject | None:
    """Members of an object schema for multi-line rendering; None when it is not a plain object.

    With `defaults_optional`, members that have a schema default may be omitted (the caller fills them).
    With a `namespace`, local references become its named types (returned in `declarations`).
    """
    if not _is_plain_object(schema):
        return None
    renderer = _Renderer(limits, schema, namespace)
    shape = renderer.object_shape(schema, 0, defaults_optional=defaults_optional)
    return TsObject(shape.members, shape.index_type, shape.closed, renderer.finish())


def _is_plain_object(schema: object) -> TypeGuard[Mapping[str, object]]:
    if not isinstance(schema, Mapping) or any(key in schema for key in _REF_KEYS):
        return False
    kind = schema.get("type")
    if kind is None and not any(key in schema for key in _OBJECT_HINTS):
        return False
    if kind is not None and kind != "object":
        return False
    return not any(key in schema for key in ("anyOf", "oneOf", "allOf", "enum", "const"))


class _Renderer:
    """One bounded rendering pass; the node budget is shared by the whole pass and its named types."""

    def __init__(self, limits: TsLimits, root: object = None, namespace: TsNamespace | None = None) -> None:
        self._limits = limits
        self._nodes = 0
        self._root = root
        self._namespace = namespace
        self._names: dict[int, str] = {}  # id() of a reference target (alive inside root) -> its name
        self._pending: deque[tuple[str, object]] = deque()
        # Names referenced where TypeScript resolves them eagerly (outside object members and array
        # elements) while the current declaration renders: cycles of these do not compile.
        self._eager: set[str] = set()

    def finish(self) -> tuple[TsDeclaration, ...]:
        """Render every referenced target once, breadth-first (no recursion across references)."""
        rendered: list[TsDeclaration] = []
        eager: dict[str, set[str]] = {}
        while self._pending:
            name, target = self._pending.popleft()
            self._eager = set()
            if _is_plain_object(target):
                shape = self.object_shape(target, 0)
                body: str | TsObject = shape if shape.members else self._object_text(shape)
            else:
                body = self.render(target, 0).text
            eager[name] = self._eager
            description = target.get("description") if isinstance(target, Mapping) else None
            rendered.append(TsDeclaration(name, body, description if isinstance(description, str) else None))
        cyclic = names_reaching_cycles(eager)
        return tuple(TsDeclaration(d.name, "unknown", d.description) if d.name in cyclic else d for d in rendered)

    def _reference(self, ref: object) -> _Ts:
        if self._namespace is None:
            return _UNKNOWN
        target = resolve_local(self._root, ref)
        if target is MISSING:
            return _UNKNOWN
        name = self._names.get(id(target))
        if name is None:
            assert isinstance(ref, str)
            name = self._namespace.allocate(ref)
            self._names[id(target)] = name
            self._pending.append((name, target))
        self._eager.add(name)
        return _Ts(f"{self._namespace.name}.{name}", _ATOM)

    def _guarded(self, schema: object, depth: int) -> _Ts:
        """Render where TypeScript defers resolving names (an object member or an array element)."""
        outer, self._eager = self._eager, set()
        try:
            return self.render(schema, depth)
        finally:
            self._eager = outer

    def render(self, schema: object, depth: int) -> _Ts:
        self._nodes += 1
        if self._nodes > self._limits.max_nodes or depth > self._limits.max_depth:
            return _UNKNOWN
        if schema is True:
            return _UNKNOWN
        if schema is False:
            return _NEVER
        if not isinstance(schema, Mapping) or any(key in schema for key in _DYNAMIC_REF_KEYS):
            return _UNKNOWN
        # Keywords beside a reference constrain the same value: the type is their intersection.
        parts = [self._reference(schema["$ref"]) if "$ref" in schema else None, self._base(schema, depth)]
        if "anyOf" in schema and "oneOf" in schema:
            parts.append(None)  # Both together intersect two unions; not worth expressing.
        else:
            parts.append(self._union(schema.get("anyOf", schema.get("oneOf")), depth))
        parts.extend(self._all_of(schema.get("allOf"), depth))
        result = _intersection([part for part in parts if part is not None])
        if schema.get("nullable") is True:
            result = _union([result, _Ts("null", _ATOM)])
        return result

    def object_shape(self, schema: Mapping[str, object], depth: int, *, defaults_optional: bool = False) -> TsObject:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required_raw = schema.get("required")
        required = {name for name in required_raw if isinstance(name, str)} if isinstance(required_raw, list) else set()
        members: list[TsMember] = []
        for name, sub in properties.items():
            if not isinstance(name, str):
                continue
            sub_map = sub if isinstance(sub, Mapping) else {}
            description = sub_map.get("description")
            optional = name not in required or (defaults_optional and "default" in sub_map)
            type_text = self._guarded(sub, depth + 1).text
            if optional and name in _OBJECT_PROTOTYPE_MEMBERS:
                type_text = "unknown"
            members.append(
                TsMember(
                    name=name,
                    key=property_key(name),
                    optional=optional,
                    type_text=type_text,
                    description=description if isinstance(description, str) else None,
                    has_default="default" in sub_map,
                    default=sub_map.get("default"),
                )
            )
        for name in sorted(required - {name for name in properties if isinstance(name, str)}):
            members.append(TsMember(name, property_key(name), False, "unknown", None, False, None))
        additional = schema.get("additionalProperties")
        closed = additional is False
        index_type: str | None = None
        if isinstance(additional, Mapping) and additional:
            # Without members this becomes `Record<string, T>`, whose argument TypeScript resolves eagerly.
            value = self._guarded(additional, depth + 1) if members else self.render(additional, depth + 1)
            if members:
                # An index signature must admit every declared property type as well.
                extra = [_Ts(member.type_text, _UNION) for member in members]
                if any(member.optional for member in members):
                    extra.append(_Ts("undefined", _ATOM))
                value = _union([value, *extra])
            index_type = value.text
        return TsObject(tuple(members), index_type, closed)

    def _base(self, schema: Mapping[str, object], depth: int) -> _Ts | None:
        if "const" in schema:
            return _literal(schema["const"]) or _kind_of(schema["const"])
        if "enum" in schema:
            return self._enum(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            names = [name for name in kind if isinstance(name, str)]
            if not names:
                return _UNKNOWN
            return _union([self._typed(name, schema, depth) for name in dict.fromkeys(names)])
        if isinstance(kind, str):
            return self._typed(kind, schema, depth)
        if any(key in schema for key in _OBJECT_HINTS):
            return self._object(schema, depth)
        if any(key in schema for key in _ARRAY_HINTS):
            return self._array(schema, depth)
        return None

    def _typed(self, kind: str, schema: Mapping[str, object], depth: int) -> _Ts:
        if kind == "string":
            return _Ts("string", _ATOM)
        if kind in ("number", "integer"):
            return _Ts("number", _ATOM)
        if kind == "boolean":
            return _Ts("boolean", _ATOM)
        if kind == "null":
            return _Ts("null", _ATOM)
        if kind == "array":
            return self._array(schema, depth)
        if kind == "object":
            return self._object(schema, depth)
        return _UNKNOWN

    def _enum(self, values: object) -> _Ts:
        if not isinstance(values, list) or not values:
            return _UNKNOWN
        literals = [_literal(value) for value in values]
        if len(values) <= self._limits.max_enum_literals and all(literals):
            return _union([literal for literal in literals if literal is not None])
        return _union([_kind_of(value) for value in values])

    def _union(self, branches: object, depth: int) -> _Ts | None:
        if branches is None:
            return None
        if not isinstance(branches, list) or not branches:
            return _UNKNOWN
        if len(branches) > self._limits.max_union_members:
            return _UNKNOWN
        return _union([self.render(branch, depth + 1) for branch in branches])

    def _all_of(self, members: object, depth: int) -> list[_Ts]:
        if members is None:
            return []
        if not isinstance(members, list) or len(members) > self._limits.max_union_members:
            return [_UNKNOWN]
        return [self.render(member, depth + 1) for member in members]

    def _array(self, schema: Mapping[str, object], depth: int) -> _Ts:
        items = schema.get("items")
        if "prefixItems" in schema or isinstance(items, list):
            element = _UNKNOWN  # Tuples: the per-position types are left to validation.
        elif items is None:
            element = _UNKNOWN
        else:
            element = self._guarded(items, depth + 1)
        return _Ts(f"{_wrap(element, _ATOM)}[]", _ATOM)

    def _object(self, schema: Mapping[str, object], depth: int) -> _Ts:
        return _Ts(self._object_text(self.object_shape(schema, depth)), _ATOM)

    @staticmethod
    def _object_text(shape: TsObject) -> str:
        if not shape.members:
            if shape.index_type is not None:
                return f"Record<string, {shape.index_type}>"
            return "Record<string, never>" if shape.closed else "Record<string, unknown>"
        fields = [f"{m.key}{'?' if m.optional else ''}: {m.type_text};" for m in shape.members]
        if shape.index_type is not None:
            fields.append(f"[key: string]: {shape.index_type};")
        return "{ " + " ".join(fields) + " }"


def _literal(value: object) -> _Ts | None:
    if value is None:
        return _Ts("null", _ATOM)
    if isinstance(value, bool):
        return _Ts("true" if value else "false", _ATOM)
    if isinstance(value, str):
        return _Ts(ts_string(value), _ATOM)
    if isinstance(value, int):
        if abs(value) > _MAX_SAFE_INTEGER:
            return None
        return _Ts(str(value), _INTERSECTION if value < 0 else _ATOM)
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > _MAX_SAFE_INTEGER:
            return None
        text = json.dumps(value)
        return _Ts(text, _INTERSECTION if text.startswith("-") else _ATOM)
    return None


#: The TypeScript type of a value of each JSON type, when only its type is known.
_TS_OF_JSON_TYPE = {
    "null": "null",
    "boolean": "boolean",
    "string": "string",
    "number": "number",
    "array": "unknown[]",
    "object": "Record<string, unknown>",
}


def _kind_of(value: object) -> _Ts:
    kind = json_type(value)
    return _UNKNOWN if kind is None else _Ts(_TS_OF_JSON_TYPE[kind], _ATOM)


def _wrap(ts: _Ts, minimum: int) -> str:
    return ts.text if ts.precedence >= minimum else f"({ts.text})"


def _union(members: list[_Ts]) -> _Ts:
    kept: dict[str, _Ts] = {}
    for member in members:
        if member.text == "unknown":
            return _UNKNOWN
        if member.text == "never":
            continue
        if member.alternatives:
            for text in member.alternatives:
                kept.setdefault(text, _Ts(text, _INTERSECTION))
        else:
            kept.setdefault(member.text, member)
    if not kept:
        return _NEVER
    if len(kept) == 1:
        return next(iter(kept.values()))
    return _Ts(" | ".join(kept), _UNION, tuple(kept))


def _intersection(parts: list[_Ts]) -> _Ts:
    if any(part.text == "never" for part in parts):
        return _NEVER
    kept = {part.text: part for part in parts if part.text != "unknown"}
    if not kept:
        return _UNKNOWN
    if len(kept) == 1:
        return next(iter(kept.values()))
    return _Ts(" & ".join(_wrap(part, _INTERSECTION) for part in kept.values()), _INTERSECTION)
