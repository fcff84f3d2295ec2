"""UTF-8- and JSON-escape-safe prefixes, truncation markers and bounded error text.

All sizes are UTF-8 byte counts.  Marker sizes are the length of the marker's compact JSON as
the JSON codec writes it (no spaces, non-ASCII unescaped, control characters escaped).

A *safe prefix* of compact JSON text never ends:

* inside a multi-byte UTF-8 sequence,
* on an escape's backslash (``\\`` alone, or the first half of ``\\n``),
* inside a ``\\uXXXX`` escape,
* right after a high-surrogate escape (``\\uD800``-``\\uDBFF``), which would split an escaped pair.
"""

from __future__ import annotations

import json
from typing import Any

from . import jsoncodec

#: Guidance of an ordinary truncation marker.
TRUNCATION_GUIDANCE = "Output truncated; rerun with narrower args."
#: Appended to an error message that had to be shortened.
ERROR_TRUNCATED_SUFFIX = " [error truncated]"

_HEX = frozenset(b"0123456789abcdefABCDEF")
_HIGH = frozenset(b"89abAB")


def utf8_size(text: str) -> int:
    """Return the UTF-8 length of ``text`` in bytes."""
    return len(text.encode("utf-8"))


def json_size(value: Any) -> int:
    """Return the length of ``value``'s compact JSON in bytes."""
    return len(jsoncodec.dumps(value))


def compact_json(value: Any) -> str:
    """Return the compact JSON text of ``value``."""
    return jsoncodec.dumps_text(value)


def utf8_prefix(text: str, max_bytes: int) -> str:
    """Return the longest prefix of ``text`` whose UTF-8 form fits ``max_bytes``."""
    if max_bytes <= 0:
        return ""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    # The encoding is valid UTF-8, so "ignore" can only drop the cut sequence at the tail.
    return raw[:max_bytes].decode("utf-8", "ignore")


def json_text_prefix(json_text: str, max_bytes: int) -> str:
    """Return the longest safe prefix of compact JSON text that fits ``max_bytes``."""
    raw = json_text.encode("utf-8")
    return raw[: _safe_cut(raw, max_bytes)].decode("utf-8")


def _safe_cut(raw: bytes, limit: int) -> int:
    """Return the largest safe prefix length of UTF-8 JSON bytes ``raw`` that is <= ``limit``."""
    if limit <= 0:
        return 0
    if limit >= len(raw):
        return len(raw)
    cut = limit
    while cut > 0 and (raw[cut] & 0xC0) == 0x80:  # inside a multi-byte sequence
        cut -= 1
    trailing = _backslashes_before(raw, cut)
    if trailing % 2 == 1:
        return _drop_high_surrogates(raw, cut - 1)
    # An unfinished \uXXXX: "\u" followed by 0..3 hex digits at the very end.
    for digits in range(4):
        start = cut - digits - 2
        if start < 0:
            break
        if raw[start : start + 2] == b"\\u" and all(c in _HEX for c in raw[start + 2 : cut]):
            if _backslashes_before(raw, start) % 2 == 0:
                return _drop_high_surrogates(raw, start)
            break
    return _drop_high_surrogates(raw, cut)


def _backslashes_before(raw: bytes, index: int) -> int:
    run = 0
    while index - run > 0 and raw[index - run - 1] == 0x5C:
        run += 1
    return run


def _drop_high_surrogates(raw: bytes, cut: int) -> int:
    # A prefix ending in a high-surrogate escape may have cut an escaped pair in half.
    while cut >= 6:
        start = cut - 6
        tail = raw[start:cut]
        if not (tail[:3] in (b"\\ud", b"\\uD") and tail[3] in _HIGH and all(c in _HEX for c in tail[4:])):
            break
        if _backslashes_before(raw, start) % 2 == 1:
            break
        cut = start
    return cut


def _marker(prefix: str, omitted: int, guidance: str) -> dict[str, Any]:
    return {"truncated": True, "prefix": prefix, "omittedBytes": omitted, "guidance": guidance}


def truncation_marker(
    original_json_text: str,
    original_bytes: int,
    budget_bytes: int,
    guidance: str = TRUNCATION_GUIDANCE,
) -> dict[str, Any] | None:
    """Build the largest-prefix marker for the original JSON whose compact JSON fits the budget.

    ``original_json_text`` may itself be only a known prefix of the data; ``original_bytes`` is
    the data's true size.  Returns None when not even an empty-prefix marker fits.
    """
    raw = original_json_text.encode("utf-8")
    # Fixed part: everything except the prefix's escaped characters and omittedBytes' digits.
    base = json_size(_marker("", 0, guidance)) - 1

    def fits(prefix_bytes: int, escaped_bytes: int) -> bool:
        return base + escaped_bytes + len(str(original_bytes - prefix_bytes)) <= budget_bytes

    if not fits(0, 0):
        return None
    # Binary search on the cut.  JSON escaping is per character, so the escaped size of a longer
    # prefix is the anchor's plus that of the added piece: each probe only escapes the piece,
    # and the pieces halve, so the whole search is linear in the prefix size.
    anchor, anchor_escaped = 0, 0
    lo, hi = 0, min(len(raw), budget_bytes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        cut = _safe_cut(raw, mid)
        if cut <= anchor:
            lo = mid
            continue
        escaped = anchor_escaped + len(jsoncodec.dumps(raw[anchor:cut].decode("utf-8"))) - 2
        if fits(cut, escaped):
            anchor, anchor_escaped, lo = cut, escaped, mid
        else:
            hi = mid - 1
    prefix = raw[:anchor].decode("utf-8")
    return _marker(prefix, original_bytes - anchor, guidance)


def truncate_error(message: str, max_bytes: int) -> str:
    """Shorten an error message to ``max_bytes`` UTF-8 bytes, keeping its leading cause."""
    if utf8_size(message) <= max_bytes:
        return message
    room = max_bytes - len(ERROR_TRUNCATED_SUFFIX)
    if room <= 0:
        # Too small for the suffix: the cause itself is worth more than the notice.
        return utf8_prefix(message, max_bytes)
    return utf8_prefix(message, room) + ERROR_TRUNCATED_SUFFIX


def parse_json(text: str) -> Any:
    """Parse JSON text as a guest would see it; numbers beyond 64-bit become floats, as in JS.

    Raises ValueError for anything that is not JSON, including text nested too deeply to parse.
    """
    try:
        return jsoncodec.loads(text)
    except jsoncodec.JSONDecodeError:
        # the codec refuses integers beyond 64 bits; JSON.stringify can emit them (e.g. 1e20 as digits).
        try:
            return json.loads(text, parse_int=_js_int, parse_constant=_not_json)
        except RecursionError:  # the codec stops at 1024 levels, the fallback at the stack's end
            raise ValueError("JSON text is nested too deeply to parse") from None


def _not_json(name: str) -> Any:
    # The fallback parser reads NaN and Infinity, which JSON has not: a text a worker sent with one must
    # not pass as JSON (an envelope embeds such texts as they are).
    raise ValueError(f"{name} is not JSON")


def _js_int(digits: str) -> int | float:
    number = int(digits)
    return number if -(2**63) <= number < 2**64 else float(number)
