"""A Python cell's value as JSON text: plain data written as it is gives the text the converting copy gives.

``to_json_text`` skips ``to_json_value``'s copy for plain data (``_plain``); every case here is written both
ways and must give the same text, or the same refusal.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.jsoncodec import MAX_NESTING, dumps_text
from guest_runtime.monty.values import DEEP_MARKER, NotJson, _plain, to_json_text, to_json_value


def _converted(value: Any) -> str:
    data, _ = to_json_value(value)
    return dumps_text(data)


def _same(value: Any) -> None:
    try:
        expected = _converted(value)
    except NotJson as exc:
        with pytest.raises(NotJson) as refused:
            to_json_text(value)
        assert str(refused.value) == str(exc)
        return
    assert to_json_text(value) == expected


def _nested(levels: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "value",
    [
        [1, 2.5, "x", None, True, False],
        (1, (2, 3)),
        {"a": [1, {"b": "\ud800"}]},  # a lone surrogate: U+FFFD both ways
        [2**53, 2**53 + 1, -(2**53) - 1, 2**63 - 1, 2**63, 2**70],  # past 53 bits: converted
        [math.nan, math.inf, -math.inf, -0.0],
        {1: "x"},  # not str keys: refused both ways
        [{1, 2}],  # a set: refused both ways
        _nested(MAX_NESTING - 2, 1),
        _nested(MAX_NESTING - 1, 1),
        _nested(MAX_NESTING, 1),
        _nested(MAX_NESTING + 1, 1),
        _nested(MAX_NESTING - 1, DEEP_MARKER),
        _nested(MAX_NESTING, DEEP_MARKER),
        _nested(10, DEEP_MARKER),  # shallow: the marker is only text
    ],
    ids=lambda v: repr(v)[:40],
)
def test_a_value_is_written_as_the_converting_copy_writes_it(value: Any):
    _same(value)


def test_plain_data_is_recognised_and_the_rest_is_not():
    assert _plain([{"a": (1, 2.0, "s", None, True)}])
    assert not _plain([{1: 2}]) and not _plain([object()]) and not _plain(_nested(MAX_NESTING, 1))
    assert _plain(_nested(MAX_NESTING - 1, 1))  # its deepest list is at depth 198


class Text(str):
    """A str subclass: not plain, converted."""


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=6)
    | st.builds(Text, st.text(max_size=3)),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.lists(kids, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 3), kids, max_size=4)
    ),
    max_leaves=30,
)


@given(JSONISH)
def test_any_value_is_written_alike_both_ways(value: Any):
    _same(value)
