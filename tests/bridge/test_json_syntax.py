"""The JSON syntax scan in C (``bridge/json_syntax.c``): it vouches only for text that is one JSON value.

A worker's texts are embedded in envelopes as written once checked; the scan answers first, and anything it
does not vouch for is parsed.  So the property that matters is one way: whatever it calls JSON, the parsers
(``orjson`` through ``parse_json``, and Python's strict reading of RFC 8259) read as one value.  The other
way it need only be useful: JSON that ``json.dumps`` writes, in any spacing, is vouched for.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bridge import json_syntax
from bridge.errors import InvalidSource
from bridge.output import check_json, check_json_bytes
from bridge.truncation import parse_json

pytestmark = pytest.mark.skipif(
    not json_syntax.built(), reason="bridge/_json_syntax was not built (no C compiler at install: scripts/test)"
)


def _no_constants(name: str) -> Any:
    raise ValueError(name)


def _strictly_json(data: bytes) -> bool:
    """Python's own reading: one value, RFC 8259 (no NaN or Infinity), as UTF-8."""
    try:
        json.loads(data.decode("utf-8"), parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return False
    return True


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=5),
    max_leaves=30,
)
#: Characters a JSON text is made of, and some it must not hold.
PIECES = st.sampled_from(list('{}[]":,.-+eE0123456789 \t\n\r\\/ubfnrtaxlsTNI') + ["\x00", "\x1f", "é", "\ud800"])


def _mutants(text: str) -> st.SearchStrategy[str]:
    """``text`` with one character deleted, replaced or inserted."""
    at = st.integers(0, len(text))
    return st.one_of(
        at.map(lambda i: text[:i] + text[i + 1 :]),
        st.tuples(at, PIECES).map(lambda t: text[: t[0]] + t[1] + text[t[0] + 1 :]),
        st.tuples(at, PIECES).map(lambda t: text[: t[0]] + t[1] + text[t[0] :]),
    )


def test_the_scan_is_built_where_the_suite_runs():
    """scripts/test installs a C compiler before the service, so the suite runs the scan it ships."""
    assert json_syntax.built()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON, st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", "\t:\r")]), st.booleans())
def test_json_as_written_is_vouched_for_and_read_alike(value: Any, separators: tuple[str, str], ascii_only: bool):
    """Completeness where it counts: JSON that ``json.dumps`` writes (characters of every plane, pairs of
    escaped surrogates, any spacing JSON allows) is vouched for, and reads as the value it was written from."""
    text = json.dumps(value, separators=separators, ensure_ascii=ascii_only)
    data = text.encode("utf-8")
    assert json_syntax.surely_json(data), text
    assert _strictly_json(data) and parse_json(text) == value


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, max_size=24).map("".join) | JSON.map(json.dumps).flatmap(_mutants))
@example('{"a":[1,2.5e-3,"\\u00e9\\ud83d\\ude00"]}')
@example("[" * 512 + "]" * 512)
def test_whatever_the_scan_vouches_for_the_parsers_read(text: str):
    """Soundness, on random texts of JSON's own characters and on JSON texts with one character changed."""
    data = text.encode("utf-8", "surrogatepass")
    if json_syntax.surely_json(data):
        assert _strictly_json(data), text
        parse_json(text)  # raises ValueError if the codec and its fallback both refuse
        check_json(text)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"01",
        b"1.",
        b".5",
        b"+1",
        b"-",
        b"1e",
        b"[1,]",
        b"{,}",
        b'{"a"}',
        b'{"a":}',
        b"[1 2]",
        b"1 2",
        b"NaN",
        b"-Infinity",
        b'"\\x"',
        b'"\x01"',
        b'"\\ud800"',
        b'"\\udc00"',
        b'"\\ud800\\u0041"',
        b"tru",
        b"[",
        b'{"a":1',
        b'"abc',
        b"\xef\xbb\xbf1",
        b"[1]]",
        b'{"a":1}}',
        b"'a'",
        b"[1,,2]",
        b'"\xc0\x80"',
        b'"\xed\xa0\x80"',
        b'"\xf4\x90\x80\x80"',
        b'"\xe0\x80\x80"',
        b'"\xc3"',
        b'"\xff"',
        b'"\x80"',
        b"[" * 513 + b"]" * 513,
    ],
)
def test_what_is_not_json_or_left_to_the_parser_is_not_vouched_for(data: bytes):
    assert not json_syntax.surely_json(data)


def test_a_text_the_scan_leaves_is_still_decided_by_the_parser():
    """An escaped lone surrogate is JSON the parser reads (the scan leaves it); NaN is refused either way."""
    check_json('"\\ud800"')
    check_json_bytes(b'["\\udfff"]')
    with pytest.raises(InvalidSource):
        check_json_bytes(b"[NaN]")
    with pytest.raises(UnicodeDecodeError):
        check_json_bytes(b'"\xff"')


@pytest.mark.parametrize("opener", ["[", '{"k":'])
def test_a_callers_depth_bound_counts_arrays_and_objects(opener: str):
    """``max_depth`` n vouches for n nested containers, never n + 1; past 512 the scan's own bound holds."""
    closer = "]" if opener == "[" else "}"

    def nested(levels: int) -> bytes:
        return (opener * levels + "1" + closer * levels).encode()

    assert json_syntax.surely_json(nested(200), 200)
    assert not json_syntax.surely_json(nested(201), 200)
    assert json_syntax.surely_json(b"1", 0) and not json_syntax.surely_json(b"[]", 0)
    assert json_syntax.surely_json(nested(512), 10_000) and not json_syntax.surely_json(nested(513), 10_000)


#: What Python's ``json.dumps`` writes for a key that was not a str (``"1"``, ``"1.5"``, ``"true"``, ...).
KEYS_OF_OTHER_TYPES = st.integers() | st.floats() | st.booleans() | st.none()


def _coerced_spelling(key: str) -> bool:
    """A key spelled as ``json.dumps`` spells an int, float, bool or None key."""
    bare = key[1:] if key.startswith("-") else key
    return bare[:1].isdigit() and bare[:1].isascii() or bare in ("Infinity", "NaN", "true", "false", "null")


def _keys_and_ints(value: Any) -> Iterator[tuple[str, object]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield "key", key
            yield from _keys_and_ints(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys_and_ints(item)
    elif type(value) is int:
        yield "int", value


STRICT_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**22), 10**22) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(
            st.text(max_size=4) | KEYS_OF_OTHER_TYPES.map(lambda k: next(iter(json.loads(json.dumps({k: 0}))))),
            kids,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@given(STRICT_JSON, st.sampled_from([(",", ":"), (", ", ": ")]))
@example({"1": 0}, (",", ":"))
@example({"Item": [1234567890123456789]}, (",", ":"))
@example({"-Infinity": 0, "x": 123456789012345678}, (",", ":"))
def test_the_strict_scan_refuses_exactly_coerced_keys_and_long_integers(value: Any, separators: tuple[str, str]):
    """``strict`` vouches for what ``json.dumps`` wrote unless a key is spelled as it spells a key of another
    type, or an integer has 19 digits or more (it may be past 64 bits): the text a Monty child writes of a
    Python cell's value is taken only when the host would write the same (guest_runtime/monty/values.py)."""
    data = json.dumps(value, separators=separators, ensure_ascii=False, allow_nan=True).encode()
    suspect = any(
        _coerced_spelling(item) if kind == "key" else len(str(abs(item))) >= 19  # type: ignore[call-overload]
        for kind, item in _keys_and_ints(value)
    )
    assert json_syntax.surely_json(data, strict=True) is (json_syntax.surely_json(data) and not suspect)


@pytest.mark.parametrize("key", [0, -1, 1.5, -2.5e-7, math.inf, -math.inf, math.nan, True, False, None])
def test_the_strict_scan_refuses_each_key_json_dumps_makes_of_another_type(key: object):
    data = json.dumps({"a": [{key: 0}]}, separators=(",", ":")).encode()
    assert not json_syntax.surely_json(data, strict=True) and json_syntax.surely_json(data)


def test_the_strict_scan_still_vouches_for_floats_and_strings_that_only_look_so():
    text = b'{"a":[1.2345678901234568e+17,0.30000000000000004,-9007199254740993,"123456789012345678901"],"Name":"1"}'
    assert json_syntax.surely_json(text, strict=True)
    assert not json_syntax.surely_json(b'{"a":{"null":1}}', strict=True)
