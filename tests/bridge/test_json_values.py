"""The JSON value counter (bridge/json_values.py): the same verdict as a walk of the parsed value, for
any JSON text and any cap, at the cost of a few passes over the bytes and never an object per value."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge import json_values
from bridge.json_values import count_values, nested_deeper_than
from tests.support.allocations import peak_allocated

MiB = 1024 * 1024
# Strings made of the bytes that matter to the counter: separators, brackets, quotes, escapes, spaces.
TEXT = st.text(alphabet=st.sampled_from(list('ab,[]{}"\\ :\u00e9\n\U0001f600')), max_size=8)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=40,
)


def walked(value: Any) -> int:
    """Values of a parsed JSON value, by walking it (arrays, objects and scalars; keys are not values)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(VALUES, st.sampled_from([None, 1, 2]), st.integers(0, 60), st.sampled_from([7, 64, 256 * 1024]))
def test_the_verdict_is_the_walks_for_every_text_and_cap(value, indent, cap, chunk):
    """Compact or indented, with strings full of brackets, commas, quotes and escapes, and slices cut
    anywhere: the count is over the cap exactly when the walk is, and within it never below the walk."""
    old = json_values.CHUNK_BYTES
    json_values.CHUNK_BYTES = chunk
    try:
        text = json.dumps(value, indent=indent, ensure_ascii=False).encode()
        counted, real = count_values(text, cap), walked(value)
    finally:
        json_values.CHUNK_BYTES = old
    assert (counted > cap) == (real > cap), (text, counted, real)
    if counted <= cap:
        assert counted >= real, (text, counted, real)


@pytest.mark.parametrize(
    "text, values",
    [
        (b"[]", 1),
        (b"[ ]", 1),
        (b'["a,b", "[{"]', 3),
        (b'{"a": [], "b": {}}', 3),
        (b'"\\\\"', 1),
        (b'["\\"", ",", "\\\\\\""]', 4),
    ],
)
def test_exact_counts(text, values):
    """Hand-checked texts: within a cap of exactly their values, one over a cap one lower."""
    assert count_values(text, 10**6) >= values
    assert count_values(text, values) <= values
    assert count_values(text, values - 1) > values - 1
    assert count_values(b"  ", 0) == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, value, cap",
    [
        ("1.8M one-digit arrays", {"x": 1, "pad": [[i % 10] for i in range(1_800_000)]}, 1_000_000),
        ("a million strings holding commas", [",a,[b{"] * 1_000_000, 1_500_000),
        ("a 50k-row table of 10 fields", [{f"f{j}": f"v{i}" for j in range(10)} for i in range(50_000)], 10**6),
    ],
)
def test_counting_holds_no_object_per_value(name, value, cap):
    """The counter's peak memory stays within a couple of copies of the text, far below what parsing
    it allocates (tens of bytes per value): it builds no Python object per value."""
    text = orjson.dumps(value)
    del value
    counted = peak_allocated(count_values, text, cap)
    parsed = peak_allocated(orjson.loads, text)
    assert counted <= 2 * len(text) + 8 * MiB, (name, counted, len(text))
    assert counted * 3 < parsed, (name, counted, parsed)


def test_nesting_past_the_limit_is_found_only_when_it_can_be_there():
    """Deeper than the limit is found exactly; a text with fewer brackets than the limit is not walked."""
    deep: Any = 1
    for _ in range(201):
        deep = [deep]
    text = orjson.dumps(deep)
    assert nested_deeper_than(deep, 200, text) is True
    assert nested_deeper_than(deep[0], 200, orjson.dumps(deep[0])) is False
    wide = [[1]] * 500
    assert nested_deeper_than(wide, 200, orjson.dumps(wide)) is False
    assert nested_deeper_than("x", 0, b'"x"') is False
