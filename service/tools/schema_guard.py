"""Checks a caller-declared JSON Schema must pass before it is compiled.

A caller's schema is untrusted input: it may only refer to itself (``#/...``, ``#anchor``), must
fit the size and nesting caps, may only use patterns RE2 runs, and must not expand into more
subschemas than `SchemaLimits.max_expanded` when its references are followed (an ``allOf`` of
two references to the previous definition, 16 deep, is 65,536 subschemas in 1 KB). Every walk
here is iterative and linear in the schema, so a hostile schema is refused in little time.

The size cap comes first and costs no Python per value: `encode_caller_schema` measures the
schema by encoding it (native code), so a megabyte of empty arrays is refused before any walk
here visits a node; `check_caller_schema` then walks at most `max_schema_bytes` of JSON.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote

from bridge import jsoncodec
from bridge.json_types import JsonObject, JsonValue
from service.tools.errors import PatternError, SchemaRefused
from service.tools.patterns import check_pattern

__all__ = ["SchemaLimits", "check_caller_schema", "encode_caller_schema"]


@dataclass(frozen=True)
class SchemaLimits:
    """Caps on the schemas one exec request declares for its client tools."""

    max_schema_bytes: int = 64 * 1024  # compact JSON of one input_schema
    max_total_bytes: int = 128 * 1024  # all input_schemas of one request together
    max_depth: int = 64  # JSON nesting of one input_schema (objects and arrays)
    max_expanded: int = 20_000  # subschemas visited when references are followed
    # JSON objects in all input_schemas of one request (counted as `{` in their JSON, natively):
    # checking a schema against its meta-schema costs ~0.3 ms of pure Python per subschema.
    max_total_objects: int = 2_000


#: Keywords whose value is one subschema (or, for `items`/`additionalItems`, possibly an array).
_ONE = (
    "additionalProperties",
    "unevaluatedProperties",
    "propertyNames",
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
)
#: Keywords whose value is an array of subschemas.
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
#: Keywords whose value maps names to subschemas.
_MAP = ("properties", "patternProperties", "dependentSchemas", "dependencies")
#: Keywords applied to the same value (the rest apply to its members, one level deeper).
_IN_PLACE = frozenset({"not", "if", "then", "else", "allOf", "anyOf", "oneOf", "dependentSchemas", "dependencies"})
#: Maps of subschemas that are only reached through references (validation never visits them itself).
_DEFS = ("$defs", "definitions")
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
_ANCHORS = ("$anchor", "$dynamicAnchor")


def encode_caller_schema(schema: object, limits: SchemaLimits) -> bytes:
    """`schema`'s compact JSON, or SchemaRefused when it is no schema or over `max_schema_bytes`.

    Linear native work only (one encode), so it may run on the event loop whatever the caller sent.
    """
    if not isinstance(schema, (dict, bool)):
        raise SchemaRefused("not a JSON Schema (an object or a boolean)")
    try:
        encoded = jsoncodec.dumps(schema)
    except jsoncodec.JSONEncodeError:  # the codec refuses what nests deeper than it can encode
        raise SchemaRefused(_too_deep(limits.max_depth)) from None
    if len(encoded) > limits.max_schema_bytes:
        raise SchemaRefused(f"{len(encoded)} bytes of JSON, over the cap of {limits.max_schema_bytes} per schema")
    return encoded


def check_caller_schema(schema: object, limits: SchemaLimits) -> bytes:
    """Raise SchemaRefused unless `schema` is safe to compile; return its compact JSON."""
    encoded = encode_caller_schema(schema, limits)
    if isinstance(schema, dict):  # a bool is a schema too, with nothing to walk
        _check_depth(schema, limits.max_depth)
        _Expansion(schema, limits.max_expanded).run()
    return encoded


def _check_depth(value: JsonObject, cap: int) -> None:
    stack: list[tuple[JsonObject | list[JsonValue], int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > cap:
            raise SchemaRefused(_too_deep(cap))
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))


def _too_deep(cap: int) -> str:
    return f"nested deeper than {cap} levels of objects and arrays (cap {cap})"


def _subschemas(node: JsonObject, keys: tuple[str, ...] = _MAP + _DEFS) -> Iterator[JsonObject]:
    yield from (child for child, _ in _keyed_subschemas(node, keys))


def _keyed_subschemas(node: JsonObject, keys: tuple[str, ...]) -> Iterator[tuple[JsonObject, str]]:
    for key in _ONE:
        if isinstance(one := node.get(key), dict):
            yield one, key
    for key in _MANY:
        if isinstance(many := node.get(key), list):
            yield from ((s, key) for s in many if isinstance(s, dict))
    for key in keys:
        if isinstance(named := node.get(key), dict):
            yield from ((s, key) for s in named.values() if isinstance(s, dict))


def _anchors(root: JsonObject) -> dict[str, JsonObject]:
    """Plain-name anchors (`$anchor`, `$dynamicAnchor`, draft 6/7 `"$id": "#name"`) by name."""
    found: dict[str, JsonObject] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        for key in _ANCHORS:
            if isinstance(name := node.get(key), str):
                found.setdefault(name, node)
        for key in ("$id", "id"):
            value = node.get(key)
            if isinstance(value, str) and value.startswith("#") and len(value) > 1:
                found.setdefault(value[1:], node)
        stack.extend(_subschemas(node))
    return found


class _Expansion:
    """Follows subschemas and references depth-first, memoised, counting what validation visits.

    A reference back to a schema still being expanded (recursion) counts once: it is expanded
    again only one level deeper in the value, which the value's own size bounds.
    """

    def __init__(self, root: JsonObject, cap: int) -> None:
        self.root = root
        self.cap = cap
        self.anchors = _anchors(root)
        dialect = root.get("$schema")
        # Draft 3/4 spell $id as `id`; elsewhere `id` is an ordinary (ignored) keyword.
        legacy = isinstance(dialect, str) and ("draft-03" in dialect or "draft-04" in dialect)
        self.id_keys = ("$id", "id") if legacy else ("$id",)
        self.in_place: dict[int, list[JsonObject]] = {}  # id -> subschemas applied to the same value
        self.members: dict[int, list[JsonObject]] = {}  # id -> subschemas applied to its members

    def run(self) -> None:
        self._count()
        self._refuse_endless_loops()

    def _count(self) -> None:
        done: dict[int, int] = {}
        active: set[int] = set()
        stack: list[_Frame] = []

        def enter(node: JsonObject, counted: bool) -> None:
            self._check_node(node)
            active.add(id(node))
            stack.append(_Frame(node, self._children(node), 1, counted))

        enter(self.root, True)
        while stack:
            frame = stack[-1]
            child, counted = next(frame.children, (None, False))
            if child is None:
                stack.pop()
                active.discard(id(frame.node))
                done[id(frame.node)] = frame.visits
                if stack and frame.counted:
                    stack[-1].visits += frame.visits
                    self._check_total(stack[-1].visits)
            elif id(child) in done:
                frame.visits += done[id(child)] if counted else 0
                self._check_total(frame.visits)
            elif id(child) in active:
                frame.visits += 1 if counted else 0
            else:
                enter(child, counted)

    def _check_total(self, total: int) -> None:
        if total > self.cap:
            raise SchemaRefused(
                f"following its $refs visits more than {self.cap} subschemas (cap {self.cap}); "
                "refer to each definition fewer times"
            )

    def _refuse_endless_loops(self) -> None:
        """A cycle of references and in-place keywords (allOf, not, ...) never reaches a leaf."""
        state: dict[int, bool] = {}  # False while on the path, True when finished
        for start in self._visited():
            if id(start) in state:
                continue
            state[id(start)] = False
            path = [(start, iter(self.in_place.get(id(start), ())))]
            while path:
                node, pending = path[-1]
                child = next(pending, None)
                if child is None:
                    state[id(node)] = True
                    path.pop()
                elif id(child) not in state:
                    state[id(child)] = False
                    path.append((child, iter(self.in_place.get(id(child), ()))))
                elif state[id(child)] is False:
                    raise SchemaRefused(
                        "refers back to itself without descending into the value (a $ref loop through "
                        "$ref/allOf/anyOf/oneOf/not/if alone never ends); validate a member of the value instead"
                    )

    def _visited(self) -> list[JsonObject]:
        """Subschemas validation can reach from the root (not those only under unused $defs)."""
        seen = {id(self.root)}
        order = [self.root]
        for node in order:
            for child in (*self.in_place.get(id(node), ()), *self.members.get(id(node), ())):
                if id(child) not in seen:
                    seen.add(id(child))
                    order.append(child)
        return order

    def _children(self, node: JsonObject) -> Iterator[tuple[JsonObject, bool]]:
        """(subschema, whether validating `node` visits it): definitions are checked, not counted."""
        same_value = self.in_place.setdefault(id(node), [])
        members = self.members.setdefault(id(node), [])
        for child, key in _keyed_subschemas(node, _MAP):
            (same_value if key in _IN_PLACE else members).append(child)
            yield child, True
        for key in _REFS:
            if key in node:
                target = self._resolve(key, node[key])
                if isinstance(target, dict):
                    same_value.append(target)
                    yield target, True
        for key in _DEFS:
            if isinstance(defs := node.get(key), dict):
                yield from ((child, False) for child in defs.values() if isinstance(child, dict))

    def _check_node(self, node: JsonObject) -> None:
        for key in self.id_keys if node is not self.root else ():
            base = node.get(key)
            if isinstance(base, str) and not base.startswith("#"):
                raise SchemaRefused(
                    f"nested {key} {_clip(base)!r}: only the root may set {key} "
                    "(put shared parts under $defs and refer to them with #/$defs/...)"
                )
        pattern = node.get("pattern")
        patterns = [pattern] if isinstance(pattern, str) else []
        if isinstance(named := node.get("patternProperties"), dict):
            patterns += list(named)
        for each in patterns:
            try:
                check_pattern(each)
            except PatternError as exc:
                raise SchemaRefused(f"pattern {_clip(each)!r}: {exc}") from None

    def _resolve(self, key: str, ref: JsonValue) -> JsonObject | bool:
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaRefused(
                f"{key} {_clip(str(ref))!r} points outside the schema; only references inside it "
                "are allowed (#/$defs/name, #/properties/..., #anchor)"
            )
        fragment = unquote(ref[1:])
        target: JsonValue | object
        if fragment and not fragment.startswith("/"):
            target = self.anchors.get(fragment)
        else:
            target = _pointer(self.root, fragment)
        if not isinstance(target, (dict, bool)):
            raise SchemaRefused(f"{key} {_clip(ref)!r} does not point at a subschema of this schema")
        return target


@dataclass(slots=True)
class _Frame:
    """A subschema being expanded: the children still to visit and the visits counted so far."""

    node: JsonObject
    children: Iterator[tuple[JsonObject, bool]]
    visits: int
    counted: bool  # whether its visits count toward its parent's


_MISSING = object()


def _pointer(root: JsonObject, pointer: str) -> JsonValue | object:
    node: JsonValue | object = root
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(part, _MISSING)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
