"""Callable names: the JavaScript global each tool is reachable under (SPEC §7.2)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["JS_RESERVED_WORDS", "RESERVED_NAMES", "RESERVED_PREFIXES", "assign_callable_names", "base_name", "is_exact"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_$]")
_START = re.compile(r"^[A-Za-z_$]")

# Host hooks live under these prefixes; a tool must never shadow or look like one.
RESERVED_PREFIXES = ("__codemode", "__openclaw")

#: ECMAScript's reserved words (strict-mode and future-reserved ones included) and ``arguments``:
#: no guest identifier may be one.  The one base set; each kind of identifier adds its own extras.
JS_RESERVED_WORDS = frozenset(
    [
        "await",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "function",
        "if",
        "import",
        "in",
        "instanceof",
        "new",
        "null",
        "return",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "var",
        "void",
        "while",
        "with",
        "yield",
        "let",
        "static",
        "implements",
        "interface",
        "package",
        "private",
        "protected",
        "public",
        "arguments",
    ]
)
# A tool's callable name is a global called as ``name(...)``: ``async`` there would read as the
# start of an async arrow function.  (``eval``, ``NaN`` and the like are in the globals below.)
_TOOL_RESERVED_WORDS = JS_RESERVED_WORDS | {"async"}

# Every own property of a fresh QuickJS-ng globalThis (measured on quickjs-ng 0.17), plus common
# web/Node globals an author could confuse with a tool.
_STANDARD_GLOBALS = frozenset(
    [
        "Object",
        "Function",
        "Error",
        "EvalError",
        "RangeError",
        "ReferenceError",
        "SyntaxError",
        "TypeError",
        "URIError",
        "InternalError",
        "AggregateError",
        "SuppressedError",
        "Iterator",
        "Array",
        "parseInt",
        "parseFloat",
        "isNaN",
        "isFinite",
        "queueMicrotask",
        "decodeURI",
        "decodeURIComponent",
        "encodeURI",
        "encodeURIComponent",
        "escape",
        "unescape",
        "Infinity",
        "NaN",
        "undefined",
        "eval",
        "Number",
        "Boolean",
        "String",
        "Math",
        "Reflect",
        "Symbol",
        "DisposableStack",
        "globalThis",
        "BigInt",
        "Date",
        "RegExp",
        "JSON",
        "Proxy",
        "Map",
        "Set",
        "WeakMap",
        "WeakSet",
        "ArrayBuffer",
        "SharedArrayBuffer",
        "Uint8ClampedArray",
        "Int8Array",
        "Uint8Array",
        "Int16Array",
        "Uint16Array",
        "Int32Array",
        "Uint32Array",
        "BigInt64Array",
        "BigUint64Array",
        "Float16Array",
        "Float32Array",
        "Float64Array",
        "DataView",
        "Atomics",
        "Promise",
        "AsyncDisposableStack",
        "WeakRef",
        "FinalizationRegistry",
        "DOMException",
        "btoa",
        "atob",
        "performance",
        "Intl",
        "structuredClone",
        "setInterval",
        "clearInterval",
        "fetch",
        "self",
        "window",
        "global",
        "print",
        "gc",
        "std",
        "os",
        "scriptArgs",
        "constructor",
        "prototype",
        "__proto__",
        "toString",
        "toLocaleString",
        "valueOf",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
    ]
)

# Names the codemode guest defines or deliberately leaves undefined (SPEC §4).
_CODEMODE_GLOBALS = frozenset(
    [
        "catalog",
        "API",
        "MCP",
        "text",
        "json",
        "store",
        "load",
        "results",
        "console",
        "setTimeout",
        "clearTimeout",
        "yield_control",
        "TextEncoder",
        "TextDecoder",
        "namespaces",
        "nodes",
        "skills",
        "agents",
        "phase",
        "log",
        "process",
        "require",
        "module",
        "exports",
    ]
)

RESERVED_NAMES = _TOOL_RESERVED_WORDS | _STANDARD_GLOBALS | _CODEMODE_GLOBALS


def base_name(name: str) -> str:
    """Identifier-safe spelling of a tool name before collision handling."""
    base = _UNSAFE.sub("_", name)
    if not _START.match(base) or base.startswith(RESERVED_PREFIXES):
        base = "tool_" + base
    return base


def is_exact(name: str) -> bool:
    """True when the tool name is already a safe, unreserved identifier (it keeps its spelling)."""
    return base_name(name) == name and name not in RESERVED_NAMES


def assign_callable_names(tools: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Map tool id -> callable name for (tool_id, tool_name) pairs; deterministic for a given set.

    Exact safe names win their plain spelling; reserved or taken names get `_` plus hex of
    sha256(tool id), 8 chars, lengthened by 2 while it collides.
    """
    items = sorted(((0 if is_exact(name) else 1, base_name(name), tool_id) for tool_id, name in tools))
    if len({tool_id for _, _, tool_id in items}) != len(items):
        raise ValueError("duplicate tool id")
    taken: set[str] = set()
    names: dict[str, str] = {}
    # Plain spellings first (exact names before sanitised ones), so a hash-suffixed name can never
    # take a spelling that some tool would otherwise keep.
    for rank in (0, 1):
        for exact, base, tool_id in items:
            if exact == rank and base not in RESERVED_NAMES and base not in taken:
                taken.add(base)
                names[tool_id] = base
    for _, base, tool_id in items:
        if tool_id not in names:
            names[tool_id] = _suffixed(base, tool_id, taken)
            taken.add(names[tool_id])
    return names


def _suffixed(base: str, tool_id: str, taken: set[str]) -> str:
    digest = hashlib.sha256(tool_id.encode("utf-8")).hexdigest()
    for width in range(8, len(digest) + 1, 2):
        candidate = f"{base}_{digest[:width]}"
        if candidate not in taken and candidate not in RESERVED_NAMES:
            return candidate
    counter = 2
    while f"{base}_{digest}_{counter}" in taken:
        counter += 1
    return f"{base}_{digest}_{counter}"
