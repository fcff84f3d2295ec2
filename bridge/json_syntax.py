"""Whether bytes are one JSON value, known without building it: the scan in C (``json_syntax.c``).

A worker's texts are checked to be JSON before an envelope embeds them (``bridge.output.check_json``).
Parsing to check builds every object of a large value only to drop it; where the optional extension was
built, this scan answers first, and only a text it does not vouch for is parsed (to be refused, or accepted
in a form the scan leaves to the parser: an escaped lone surrogate, nesting past 512 levels).
"""

from __future__ import annotations

try:
    from . import _json_syntax
except ImportError:  # the optional extension was not built (pyproject.toml: ext-modules)
    _json_syntax = None  # type: ignore[assignment]


def built() -> bool:
    """Whether the extension is there (it is optional: building it needs a C compiler)."""
    return _json_syntax is not None


def surely_json(data: bytes, max_depth: int = 512, *, strict: bool = False) -> bool:
    """True only if ``data`` is exactly one JSON value (RFC 8259) nested at most ``max_depth`` (at most 512)
    arrays and objects deep; False: it is not, or parse it to know.

    ``strict``: also False for an object key spelled like a number, a bool, null, NaN or an infinity, and for
    an integer of 19 digits or more: what a Python ``json.dumps`` writes of values the host refuses (keys
    that are not str) or writes otherwise (integers past 64 bits, as doubles)."""
    return _json_syntax is not None and _json_syntax.is_json(data, max_depth, strict)
