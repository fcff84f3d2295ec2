"""A Python cell's value as JSON text: plain data written as it is gives the text the converting copy gives.

``to_json_text`` skips ``to_json_value``'s copy for plain data: the codec refuses every type but JSON's own
and the C scan bounds the nesting, or, in an install without the extension, the Python walk (``_plain``)
decides.  Every case here is written each of those ways and by the copy, and must give the same text, or the
same refusal.  The values Monty itself hands the worker are among them (``MONTY_VALUES``, made by a real
Monty child).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge import json_syntax
from bridge.jsoncodec import MAX_NESTING, dumps_text
from guest_runtime.monty.engine import MontyPool
from guest_runtime.monty.values import DEEP_MARKER, NotJson, _plain, to_json_text, to_json_value


def _converted(value: Any) -> str:
    data, _ = to_json_value(value)
    return dumps_text(data)


@contextmanager
def _without_the_scan() -> Iterator[None]:
    """As in an install where the optional extension was not built."""
    built, json_syntax._json_syntax = json_syntax._json_syntax, None
    try:
        yield
    finally:
        json_syntax._json_syntax = built


def _same(value: Any) -> None:
    assert json_syntax.built(), "the extension is built here (pyproject.toml), so both ways are tested"
    for _ in _each_way():
        try:
            expected = _converted(value)
        except NotJson as exc:
            with pytest.raises(NotJson) as refused:
                to_json_text(value)
            assert str(refused.value) == str(exc)
            continue
        assert to_json_text(value) == expected


def _each_way() -> Iterator[None]:
    yield  # with the C scan
    with _without_the_scan():
        yield


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


class Text(str):
    """A str subclass: not plain, converted."""


@dataclasses.dataclass
class Point:
    x: int


class Counts(dict[str, int]):
    pass


def _monty_values() -> list[Any]:
    """What a real Monty child hands the worker for values that are not JSON's own types."""
    pool = MontyPool()
    try:
        session = pool.open({})
        sources = [
            "import datetime\ndatetime.date(2020, 1, 2)",
            "b'x'",
            "1 + 2j",
            "import decimal\ndecimal.Decimal('1.5')",
            "frozenset([1])",
            "{1, 2}",
            "import collections\ncollections.namedtuple('N', 'a')(1)",
            "class P:\n    x = 1\nP()",
            "type(1)",
        ]
        values = [session.feed_start(source).output for source in sources]  # type: ignore[union-attr]
        pool.release(session)
        return values
    finally:
        pool.close()


MONTY_VALUES = _monty_values()


@pytest.mark.parametrize(
    "value",
    [
        *MONTY_VALUES,
        datetime.datetime(2020, 1, 2, 3, 4, 5),
        decimal.Decimal("2.5"),
        Point(1),
        Counts(a=1),
        [Text("x")],
        collections.namedtuple("Pair", "a b")(1, 2),
    ],
    ids=lambda v: type(v).__name__,
)
def test_a_value_of_another_type_goes_as_the_converting_copy_says(value: Any):
    """Refused with the conversion's own message, or (a tuple's subclass) written as its list."""
    _same(value)
    _same([value])
    _same({"k": value})


def test_monty_cannot_make_the_two_other_types_the_codec_writes():
    """The codec writes UUIDs and enums its own way; the written path relies on Monty never handing one over.
    If a Monty release can make them, this fails: the written path must then refuse them too."""
    pool = MontyPool()
    try:
        session = pool.open({})
        uuid_call = session.feed_start("import uuid\nuuid.uuid4()")
        assert type(uuid_call).__name__ == "FunctionSnapshot", "uuid is not Monty's: it asks the host for it"
        pool.release(session)
        session = pool.open({})
        with pytest.raises(Exception, match="class inheritance"):
            session.feed_start("from enum import Enum\nclass C(Enum):\n    A = 1\nC.A")
        pool.release(session)
    finally:
        pool.close()


def test_plain_data_is_recognised_and_the_rest_is_not():
    assert _plain([{"a": (1, 2.0, "s", None, True)}])
    assert not _plain([{1: 2}]) and not _plain([object()]) and not _plain(_nested(MAX_NESTING, 1))
    assert _plain(_nested(MAX_NESTING - 1, 1))  # its deepest list is at depth 198


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
