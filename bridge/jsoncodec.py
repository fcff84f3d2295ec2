"""Compact JSON for everything that crosses the guest boundary (the one importer of orjson).

Compact means what ``JSON.stringify`` writes in the guest: no spaces, non-ASCII as UTF-8,
control characters escaped.  Encoding errors are ``JSONEncodeError`` (a ``TypeError``),
decoding errors ``JSONDecodeError`` (a ``ValueError``), whatever the library underneath.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson


class JSONEncodeError(TypeError):
    """Raised when a value is not JSON (a set, a non-string key, an unknown object)."""

    code = "json.encode"


class JSONDecodeError(ValueError):
    """Raised when text is not JSON."""

    code = "json.decode"


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None) -> bytes:
    """Compact JSON of ``value`` as UTF-8 bytes; non-finite floats become null, as in JS."""
    try:
        return orjson.dumps(value, default=default)
    except orjson.JSONEncodeError as exc:
        raise JSONEncodeError(str(exc)) from None


def fragment(data: bytes) -> Any:
    """Compact JSON bytes that ``dumps`` embeds as they are, for data kept encoded because its
    parsed form would be many times larger."""
    return orjson.Fragment(data)


def dumps_text(value: Any) -> str:
    """Compact JSON of ``value`` as text."""
    return dumps(value).decode("utf-8")


def dumps_pretty(value: Any) -> str:
    """Indented JSON for people (the CLI)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8")
    except orjson.JSONEncodeError as exc:
        raise JSONEncodeError(str(exc)) from None


def loads(data: bytes | str) -> Any:
    """Parse JSON text or UTF-8 bytes."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise JSONDecodeError(str(exc)) from None
