"""Guest identifiers for MCP servers and tools (``MCP.<server>.<tool>``); pure and deterministic."""

from __future__ import annotations

import re
from collections.abc import Sequence

from service.tools.names import JS_RESERVED_WORDS

# An MCP identifier is a member (``MCP.server.tool``), so ``async`` is harmless there; but the
# literals and globals that cannot be rebound safely are refused like the reserved words.
JS_RESERVED = JS_RESERVED_WORDS | {"eval", "undefined", "NaN", "Infinity"}
# Names that would reach Object.prototype machinery instead of a plain member.
UNSAFE_MEMBERS = frozenset({"__proto__", "constructor", "prototype"})
# Members the namespace itself defines next to the tools.
NAMESPACE_MEMBERS = frozenset({"$api", "resources", "prompts"})
RESERVED = JS_RESERVED | UNSAFE_MEMBERS | NAMESPACE_MEMBERS

_WORD_BREAK = re.compile(r"[^A-Za-z0-9_$]+")


def camel_identifier(name: str, fallback: str = "tool") -> str:
    """CamelCase ``name``: non-identifier characters split words; a leading digit gets ``_``."""
    words = [word for word in _WORD_BREAK.split(name) if word]
    if not words:
        return fallback
    ident = words[0] + "".join(word[0].upper() + word[1:] for word in words[1:])
    return "_" + ident if ident[0].isdigit() else ident


def assign_identifiers(names: Sequence[str], fallback: str = "tool") -> list[str]:
    """One distinct, safe identifier per name, in order; reserved or taken ones get ``2``, ``3``…"""
    bases = [camel_identifier(name, fallback) for name in names]
    result: list[str | None] = [None] * len(names)
    taken: set[str] = set()
    # Names that are already safe identifiers keep their spelling even if a later-listed name would
    # camelCase into the same one, so a tool's identifier does not depend on its neighbours' names.
    for i, (name, base) in enumerate(zip(names, bases)):
        if name == base and base not in RESERVED and base not in taken:
            result[i] = base
            taken.add(base)
    for i, base in enumerate(bases):
        if result[i] is not None:
            continue
        ident, n = base, 1
        while ident in RESERVED or ident in taken:
            n += 1
            ident = f"{base}{n}"
        result[i] = ident
        taken.add(ident)
    return [ident for ident in result if ident is not None]
