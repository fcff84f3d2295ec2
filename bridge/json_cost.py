"""What a JSON text costs once parsed into Python objects, reckoned from its bytes without parsing it.

Parsed, JSON is many times its text: ``[0],`` is four bytes and about 88 bytes of objects, ``{"a":0},``
eight bytes and about 200.  So what the service holds parsed for a while (a native tool's arguments
while the tool runs) is charged at this reckoning, not at its bytes, and it is made *before* the
text is parsed, so that arguments that do not fit are refused without ever being built.

The reckoning is an upper bound of the memory the objects take (CPython 3.12, 64-bit, objects
built by orjson, with each object's garbage-collector header and the allocator's rounding), from
counts of the text's parts:

=====================  ==========================================================================
each value             8 bytes: the slot that holds it (a list's item pointer)
each array             80 bytes: the list and its block of item pointers
each object            72 bytes; a non-empty one 120 more (its smallest key table), and 56 per
                       member (table entries and index, the table up to twice what it holds)
each string            56 bytes (the object's header), keys included: a key the parser shares
                       between objects (its key cache) is charged in each, since a text of unique
                       keys costs that much
each boxed number      32 bytes: every number but the small integers CPython shares, i.e. every
                       number of three or more characters or with a minus sign
the text's bytes       once, for the characters of strings: ×2 if a character may need two bytes
                       in Python (a code point above U+00FF), ×4 if one may need four (above U+FFFF)
=====================  ==========================================================================

``true``, ``false``, ``null`` and the numbers 0-99 are shared objects: they cost only their slot.
Measured against what parsing allocates, the reckoning is 1 to 1.6 times it for arrays, strings and
numbers and for objects of unique keys (the dearest shapes per byte), and up to about 4 times it for
objects of a few repeated keys and small values (``[{"a":0,"b":1,...}, ...]``), whose keys the parser
shares; a table is cheaper sent as one string.  ``tests/bridge/test_json_cost.py`` pins both ends.

Counting runs on ``bytes.translate``, ``bytes.replace`` and ``bytes.count`` (walks in C), in slices
of about ``CHUNK_BYTES`` cut outside strings, with strings split out as in ``bridge.json_values``:
a few passes over the text and a bytes object per string of a slice, never an object per value.
An invalid text is reckoned some number, which is fine: the parser refuses it later.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

#: Slices of the text counted at once (bounds the bytes objects alive at a time).
CHUNK_BYTES = 256 * 1024
#: Texts up to this long are reckoned more loosely, in a fraction of the time (``_short_cost``).
SHORT_TEXT_BYTES = 256

SLOT_BYTES = 8
ARRAY_BYTES = 80
OBJECT_BYTES = 72
FILLED_OBJECT_BYTES = 120
MEMBER_BYTES = 56
STRING_BYTES = 56
BOXED_NUMBER_BYTES = 32

#: Number characters become ``0`` (a minus stays: it marks a negative number); whitespace, letters and
#: every other byte but quotes and structure go.  ``true`` and ``false`` leave one ``0`` (their ``e``): a
#: short, shared "number", as they are.
_NUMBER_CHARS = b"0123456789.eE+"
_TO_ZERO = bytes.maketrans(_NUMBER_CHARS, b"0" * len(_NUMBER_CHARS))
_DROPPED = bytes(b for b in range(256) if b not in _NUMBER_CHARS + b'-",:[]{}')
#: Where a string was (so ``["a"]`` does not read as an empty array).
_STRING = b"\x03"
#: The separators a number may follow, as one.
_TO_COMMA = bytes.maketrans(b"[:", b",,")
#: A code point above U+FFFF (a four-byte UTF-8 sequence, or an escaped surrogate), or above U+00FF.
_ASTRAL = re.compile(rb"[\xf0-\xf7]|\\u[dD][89abAB]")
_WIDE = re.compile(rb"[\xc4-\xef]|\\u(?!00)")


def parsed_cost(data: bytes) -> int:
    """An upper bound, in bytes, of the memory ``data`` (a JSON text) takes once parsed."""
    if not data or data.isspace():
        return 0
    if len(data) <= SHORT_TEXT_BYTES:
        return _short_cost(data)
    chars = len(data) * _char_width(data)
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    strings = data.count(b'"') // 2
    text = data.translate(_TO_ZERO, _DROPPED).replace(b'""', _STRING)
    commas = arrays = empty_arrays = objects = empty_objects = members = boxed = 0
    for outside in _outside_strings(text):
        commas += outside.count(b",")
        arrays += outside.count(b"[")
        empty_arrays += outside.count(b"[]")
        objects += outside.count(b"{")
        empty_objects += outside.count(b"{}")
        members += outside.count(b":")
        # A number of three or more characters, or a negative one, after a separator (or first in the text).
        spaced = outside.translate(_TO_COMMA)
        boxed += spaced.count(b",000") + spaced.count(b",00-") + spaced.count(b",-")
    boxed += text[:1] in (b"0", b"-")
    values = 1 + commas + arrays + objects - empty_arrays - empty_objects  # as bridge.json_values counts them
    return (
        chars
        + SLOT_BYTES * values
        + ARRAY_BYTES * arrays
        + OBJECT_BYTES * objects
        + FILLED_OBJECT_BYTES * (objects - empty_objects)
        + MEMBER_BYTES * members
        + STRING_BYTES * strings
        + BOXED_NUMBER_BYTES * boxed
    )


def _short_cost(data: bytes) -> int:
    """A looser upper bound for a short text (most requests), in a few counts over all of it: brackets,
    separators and quotes inside strings count as well, every value as a boxed number, every key as a string."""
    arrays = data.count(b"[")
    objects = data.count(b"{")
    values = 1 + data.count(b",") + arrays + objects
    return (
        len(data) * (1 if data.isascii() and b"\\u" not in data else 4)
        + (SLOT_BYTES + BOXED_NUMBER_BYTES) * values
        + ARRAY_BYTES * arrays
        + (OBJECT_BYTES + FILLED_OBJECT_BYTES) * objects
        + MEMBER_BYTES * data.count(b":")
        + STRING_BYTES * (data.count(b'"') // 2)
    )


def _char_width(data: bytes) -> int:
    """The most bytes one character of ``data``'s strings may take in Python (1, 2 or 4)."""
    if data.isascii() and b"\\u" not in data:
        return 1
    if _ASTRAL.search(data):
        return 4
    return 2 if _WIDE.search(data) else 1


def _outside_strings(text: bytes) -> Iterator[bytes]:
    """``text`` (every quote a string's delimiter) cut into slices of about ``CHUNK_BYTES`` between
    tokens, each with every string replaced by one ``_STRING`` byte."""
    start, size = 0, len(text)
    while start < size:
        end = min(start + CHUNK_BYTES, size)
        if end < size:
            end = _cut(text, start, end)
        piece = text[start:end]
        yield _STRING.join(piece.split(b'"')[0::2]) if b'"' in piece else piece
        start = end


def _cut(text: bytes, start: int, end: int) -> int:
    """Where a slice starting at ``start`` ends, at ``end`` or just after: outside any string and any token."""
    if text.count(b'"', start, end) % 2:  # inside a string: just after it closes
        closing = text.find(b'"', end)
        return len(text) if closing < 0 else closing + 1
    # Outside strings: before the next string or separator.  A run of a slice's length with neither is no
    # JSON an honest guest writes; cutting it anywhere counts at most one number too many or too few.
    window = end + CHUNK_BYTES
    found = [i for i in (text.find(b'"', end, window), text.find(b",", end, window)) if i >= 0]
    return min(found) if found else end
