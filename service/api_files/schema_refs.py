"""Local JSON Schema references (`$ref`) for the TypeScript renderer: resolving, naming, cycle checks.

Only references inside the schema being rendered are followed (`#`, `#/$defs/X`, `#/definitions/X`,
any JSON pointer into the document); a remote or unresolvable reference is never fetched and renders
as `unknown`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote

__all__ = ["MISSING", "names_reaching_cycles", "resolve_local", "type_name_hint"]

#: What `resolve_local` returns for a reference it cannot follow.
MISSING = object()

_NOT_NAME = re.compile(r"[^A-Za-z0-9_]+")
_MAX_NAME_CHARS = 48
# Global types the rendered text refers to by name; a declared type of the same name would shadow them.
_SHADOWING = frozenset({"Array", "Object", "Promise", "Record"})


def resolve_local(root: object, ref: object) -> object:
    """The part of `root` a local reference points at, or `MISSING` (remote, anchor, absent)."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        return MISSING
    fragment = unquote(ref[1:])
    if fragment == "":
        return root
    if not fragment.startswith("/"):
        return MISSING  # a plain-name anchor ("#node"); finding it would mean searching the document
    node = root
    for raw in fragment[1:].split("/"):
        segment = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            if segment not in node:
                return MISSING
            node = node[segment]
        elif isinstance(node, list) and _is_index(segment) and int(segment) < len(node):
            node = node[int(segment)]
        else:
            return MISSING
    return node


def _is_index(segment: str) -> bool:
    return 0 < len(segment) <= 9 and segment.isascii() and segment.isdigit()


def type_name_hint(ref: str) -> str:
    """A TypeScript type name for a reference, from its last pointer segment.

    Capitalised, so it can never be a JavaScript reserved word or a TypeScript keyword type (all
    lower case); at most 48 ASCII identifier characters.
    """
    last = unquote(ref).rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
    text = _NOT_NAME.sub("_", last).strip("_")[:_MAX_NAME_CHARS] or "Type"
    if text[0].isalpha():
        text = text[0].upper() + text[1:]
    else:
        text = "T" + text
    return text + "_" if text in _SHADOWING else text


def names_reaching_cycles(edges: Mapping[str, set[str]]) -> set[str]:
    """Names from which a cycle of `edges` can be reached (including the names on it).

    An edge is a reference TypeScript resolves eagerly (not under an object member or array element);
    `type A = B | null; type B = A` is an error ("circularly references itself"), so such names are
    declared `unknown`. Peeling names whose references are all settled leaves exactly these; linear.
    """
    pending = {name: 0 for name in edges}
    referrers: dict[str, list[str]] = {}
    for name, targets in edges.items():
        for target in targets & edges.keys():
            pending[name] += 1
            referrers.setdefault(target, []).append(name)
    settled = [name for name, count in pending.items() if count == 0]
    while settled:
        name = settled.pop()
        for referrer in referrers.get(name, ()):
            pending[referrer] -= 1
            if pending[referrer] == 0:
                settled.append(referrer)
    return {name for name, count in pending.items() if count > 0}
