"""The parsed-cost reckoning (bridge/json_cost.py): never below what parsing a text allocates, for any JSON
text, and close to it for the shapes that cost the most per byte; a few passes over the bytes, never
an object per value."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge import json_cost
from bridge.json_cost import parsed_cost
from tests.support.allocations import peak_allocated

MiB = 1024 * 1024
# Strings of the bytes that matter to the reckoning: separators, brackets, quotes, escapes, digits, wide characters.
TEXT = st.text(alphabet=st.sampled_from(list('ab0-e,[]{}"\\ :\u00e9\u0100\n\U0001f600')), max_size=8)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(TEXT, inner, max_size=6),
    max_leaves=60,
)


def allocated(text: bytes) -> int:
    """Bytes the parse of ``text`` allocates and its value keeps (traced: without the allocator's rounding)."""
    orjson.loads(text)  # the parser's key cache and the interpreter's first-use allocations, outside the count
    tracemalloc.start()
    try:
        value = orjson.loads(text)
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del value
    return size


@contextmanager
def reckoning(chunk: int = json_cost.CHUNK_BYTES, short: int = json_cost.SHORT_TEXT_BYTES) -> Iterator[None]:
    """The reckoning with slices of ``chunk`` bytes and texts up to ``short`` bytes reckoned loosely."""
    old = json_cost.CHUNK_BYTES, json_cost.SHORT_TEXT_BYTES
    json_cost.CHUNK_BYTES, json_cost.SHORT_TEXT_BYTES = chunk, short
    try:
        yield
    finally:
        json_cost.CHUNK_BYTES, json_cost.SHORT_TEXT_BYTES = old


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(value=VALUES, indent=st.sampled_from([None, 1]), slicing=st.sampled_from([(256 * 1024, 256), (7, 0), (64, 0)]))
def test_the_reckoning_is_never_below_what_parsing_allocates(value, indent, slicing):
    """Compact or indented, with strings full of brackets, quotes, escapes and wide characters, reckoned
    loosely (short texts) or exactly in slices cut anywhere: at least what the parsed value holds."""
    text = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    with reckoning(*slicing):
        cost = parsed_cost(text)
    assert cost >= allocated(text), text


@settings(max_examples=300, deadline=None)
@given(value=VALUES)
def test_a_short_text_is_reckoned_no_lower_than_exactly(value):
    """The loose reckoning of short texts is never below the exact one."""
    text = json.dumps(value, ensure_ascii=False).encode()[: json_cost.SHORT_TEXT_BYTES]
    with reckoning(short=0):
        exact = parsed_cost(text)
    assert parsed_cost(text) >= exact


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_any_bytes_are_reckoned_some_count(data):
    """Bytes that are no JSON are reckoned too (the parser refuses them later), as a count that is never negative."""
    assert parsed_cost(data) >= 0


SHAPES = {
    # The dearest shapes per byte: the reckoning stays within 1.6 times what they hold.
    "one-digit arrays (the issue's)": ([[i % 10] for i in range(450_000)], 1.6),
    "nested arrays": ([[[[[[[i % 10]]]]]] for i in range(100_000)], 1.6),
    "empty objects": ([{}] * 300_000, 1.6),
    "one-member objects of unique keys": ([{f"k{i}": 0} for i in range(150_000)], 1.6),
    # Just past a size where the key table doubles: the table is at its emptiest per member.
    "one object of unique keys": ({f"k{i}": 0 for i in range(87_382)}, 1.6),
    "short strings": ([f"{i % 100}x" for i in range(300_000)], 1.6),
    "floats": ([i + 0.5 for i in range(300_000)], 1.6),
    "negative one-digit numbers": ([-9] * 300_000, 1.6),
    "a long string, one astral character": (["a" * 2_000_000 + "\U0001f600"], 1.1),
    # Objects of a few repeated keys: the parser shares the keys, the reckoning charges each.
    "records of five fields": (
        [
            {"id": i, "name": f"user{i}", "email": f"u{i}@example.com", "active": True, "score": i * 1.5}
            for i in range(40_000)
        ],
        3.5,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHAPES))
def test_the_reckoning_is_close_to_what_the_shape_holds(name):
    """For each shape, the reckoning is at least what parsing it allocates and at most the stated multiple."""
    value, most = SHAPES[name]
    text = orjson.dumps(value)
    del value
    cost, held = parsed_cost(text), allocated(text)
    assert held <= cost <= most * held, (name, len(text), held, cost)


@pytest.mark.slow
@pytest.mark.parametrize(
    "value",
    [[[i % 10] for i in range(1_800_000)], [",a,[b{"] * 1_000_000, [f"{i}" * 3 for i in range(500_000)]],
    ids=["one-digit arrays", "strings holding separators", "numbers in strings"],
)
def test_reckoning_holds_no_object_per_value(value):
    """The reckoning's peak memory stays within a couple of copies of the text, far below what parsing
    it allocates: it builds no Python object per value."""
    text = orjson.dumps(value)
    del value
    counted = peak_allocated(parsed_cost, text)
    parsed = peak_allocated(orjson.loads, text)
    assert counted <= 2 * len(text) + 8 * MiB, (counted, len(text))
    assert counted * 3 < parsed, (counted, parsed)


@pytest.mark.parametrize(
    "text, parts",
    [
        (b"[]", dict(values=1, arrays=1)),
        (b"[ 1 , 22 , 333 , -4 , 1e5 , true , null ]", dict(values=8, arrays=1, boxed=3)),
        (b'{"a": [], "b": {}}', dict(values=3, arrays=1, objects=2, filled=1, members=2, strings=2)),
        (b'["a,b", "[{", "\\"", ":1"]', dict(values=5, arrays=1, strings=4)),
        (b'[""]', dict(values=2, arrays=1, strings=1)),
    ],
)
def test_exact_reckonings(text, parts):
    """Hand-counted texts, reckoned exactly: every part counted once, nothing inside strings counted."""
    with reckoning(short=0):
        cost = parsed_cost(text)
    expected = (
        len(text)
        + json_cost.SLOT_BYTES * parts.get("values", 0)
        + json_cost.ARRAY_BYTES * parts.get("arrays", 0)
        + json_cost.OBJECT_BYTES * parts.get("objects", 0)
        + json_cost.FILLED_OBJECT_BYTES * parts.get("filled", 0)
        + json_cost.MEMBER_BYTES * parts.get("members", 0)
        + json_cost.STRING_BYTES * parts.get("strings", 0)
        + json_cost.BOXED_NUMBER_BYTES * parts.get("boxed", 0)
    )
    assert cost == expected
    assert parsed_cost(b"") == parsed_cost(b"  ") == 0
