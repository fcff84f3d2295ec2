"""How many JSON values a text holds, counted without parsing it.

Parsed, a value costs far more than its bytes: ``[0]`` is 3 bytes of JSON and about 80 bytes of
Python objects.  So the service caps the values one request may carry (``max_request_values``)
and counts them *before* anything is parsed, with bounded work and no Python object per value.

Counting.  Every array element and object member value is preceded by ``[``, ``{`` or ``,``, so a
valid JSON text holds ``1 + commas + opens - empty containers`` values, counting only the bytes
outside strings (object keys are not values).  The count runs on ``bytes.translate`` and
``bytes.count``, which walk the text in C:

0. A value takes at least two bytes (``0,``), so a text of at most ``2 * cap`` bytes is within the
   cap without a look at it (most requests).
1. Escapes are removed (``\\\\`` then ``\\"``), so every quote left opens or closes a string.
2. Counted over the whole text, the formula is an upper bound: bytes inside strings can only add
   to it (a string's ``[]`` adds one open and one empty container).  Within the cap, that is the
   answer; a text without strings is exact already.
3. Otherwise strings matter.  A text with ``S`` strings holds at least ``S / 2`` values (each key
   has a value), so over ``2 * cap`` strings it is over the cap without a closer look.
4. Else every string is replaced by one placeholder byte, in slices of about ``CHUNK_BYTES``, and
   the formula is exact.  That costs one bytes object per string, at most ``2 * cap`` of them.

The count of an invalid text is some number, which is fine: the parser refuses that text later.
"""

from __future__ import annotations

from typing import Any

from bridge import jsoncodec

#: JSON whitespace, removed so that ``[ ]`` is an empty array like ``[]``.
_WHITESPACE = b" \t\r\n"
#: Slices of the text whose strings are split apart at once (bounds the bytes objects alive at a time).
CHUNK_BYTES = 256 * 1024
#: Every byte but the quote, separators, opening brackets and the empty-container marker.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'",[{\x01')


def _formula(text: bytes) -> int:
    text = text.translate(None, _WHITESPACE)
    opens = text.count(b"[") + text.count(b"{")
    return 1 + text.count(b",") + opens - text.count(b"[]") - text.count(b"{}")


def count_values(data: bytes, cap: int) -> int:
    """A count of the JSON values in ``data`` that is over ``cap`` exactly when the true count is.

    Within the cap it is an upper bound; over it, it is some number above the cap.  Arrays, objects, strings, numbers and literals count one each; object
    keys do not.
    """
    if not data or data.isspace():
        return 0
    # Every value but the last takes at least two bytes (``0,``): a short text cannot be over the cap.
    most = (len(data) + 1) // 2
    if most <= cap:
        return most
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    bound = _formula(data)
    quotes = data.count(b'"')
    if bound <= cap or not quotes:
        return bound
    # S = quotes / 2 strings; at most one per colon is a key, the rest are values.
    least = quotes // 2 - data.count(b":")
    if least > cap:
        return least
    return _without_strings(data)


def _without_strings(data: bytes) -> int:
    """The exact count: the formula over the bytes outside strings.

    Only separators and brackets matter, so the text shrinks to them first (empty containers become
    one marker byte each, which JSON text cannot hold raw); a string left empty then is dropped with
    its quotes (``""`` is an empty string, or two adjacent strings merging into one: either way no
    byte changes sides).  Only strings holding a separator or a bracket are left to split apart.
    """
    text = data.translate(None, _WHITESPACE).replace(b"[]", b"\x01").replace(b"{}", b"\x01")
    text = text.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    counts = 1
    start = 0
    size = len(text)
    while start < size:
        end = min(start + CHUNK_BYTES, size)
        if end < size:
            # Cut just before a quote that opens a string (an even number of quotes precede it).
            q = text.find(b'"', end)
            if q < 0:
                end = size
            else:
                end = q if text.count(b'"', start, q) % 2 == 0 else q + 1
        outside = b"".join(text[start:end].split(b'"')[0::2])
        # Empty containers are markers now, so the opens counted are exactly the non-empty ones.
        counts += outside.count(b",") + outside.count(b"[") + outside.count(b"{")
        start = end
    return counts


def over_cap_message(cap: int, subject: str = "this request body holds") -> str:
    """Why a text over ``cap`` values is refused, naming the setting and what to do instead."""
    return (
        f"{subject} more than {cap} JSON values, over the max_request_values cap; pass fewer, "
        "larger values (for example a table as one CSV or JSON string), or split the data over several calls"
    )


def nested_deeper_than(value: Any, limit: int, text: bytes) -> bool:
    """Whether ``value`` (parsed from ``text``) nests arrays/objects more than ``limit`` deep.

    A text with at most ``limit`` brackets cannot be deeper (most texts).  Otherwise the value is
    wrapped in ``jsoncodec.ENCODER_DEPTH - limit`` lists and encoded: the encoder refuses it exactly
    when the value is deeper than ``limit``, after a walk at native speed.
    """
    if text.count(b"[") + text.count(b"{") <= limit or not isinstance(value, dict | list):
        return False
    wrapped: Any = value
    for _ in range(jsoncodec.ENCODER_DEPTH - limit):
        wrapped = [wrapped]
    try:
        jsoncodec.dumps(wrapped)
    except jsoncodec.JSONEncodeError:
        return True
    return False
