"""The JSON codec: lone UTF-16 surrogates become U+FFFD wherever guest JSON is decoded or encoded."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge import jsoncodec


def _as_js_would_write(s: str) -> str:
    """JSON text of ``s`` as JSON.stringify writes it: lone surrogates escaped (lower-case hex)."""
    return json.dumps(s, ensure_ascii=True)


def _well_formed(s: str) -> str:
    """What a UTF-16 string should become: pairs joined, every lone surrogate U+FFFD."""
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r'"a\ud800b"', "a\ufffdb"),
        (r'"\udfff"', "\ufffd"),
        (r'"\udc00\ud800"', "\ufffd\ufffd"),  # a low then a high surrogate is two lone ones
        (r'"\ud83d\ude00"', "😀"),  # a pair stays a pair
        (r'"\\ud800"', "\\ud800"),  # an escaped backslash, then plain text
        (r'"\\\ud800"', "\\\ufffd"),  # an escaped backslash, then a lone surrogate escape
        (r'{"\ud800":[1,"\uDC00"]}', {"\ufffd": [1, "\ufffd"]}),
    ],
)
def test_loads_turns_escaped_lone_surrogates_into_replacement_characters(text, expected):
    """Decoding JSON with an escaped lone surrogate yields U+FFFD instead of failing."""
    assert jsoncodec.loads(text) == expected
    assert jsoncodec.loads(text.encode()) == expected


def test_well_formed_keeps_the_length_of_the_text():
    """The repair replaces a 6-character escape with a 6-character escape: byte sizes stay exact."""
    text = r'{"type":"text","text":"a\ud800b\udfff"}'
    repaired = jsoncodec.well_formed(text)
    assert len(repaired) == len(text)
    assert jsoncodec.loads(repaired) == {"type": "text", "text": "a\ufffdb\ufffd"}


def test_well_formed_returns_clean_text_unchanged():
    """Text without a surrogate escape is returned as the same object (the fast path)."""
    text = '{"a":"\\u00e9\\n"}'
    assert jsoncodec.well_formed(text) is text


def test_dumps_replaces_lone_surrogates_in_python_strings():
    """Encoding a value whose strings or keys hold lone surrogates writes U+FFFD instead of raising."""
    out = jsoncodec.dumps({"k\udc00": ["a\ud800", {"x": "\udfff"}]})
    assert jsoncodec.loads(out) == {"k\ufffd": ["a\ufffd", {"x": "\ufffd"}]}


def test_dumps_still_refuses_what_is_not_json():
    """The surrogate repair does not widen what dumps accepts."""
    with pytest.raises(jsoncodec.JSONEncodeError):
        jsoncodec.dumps({1j})
    nested: list = []
    for _ in range(300):
        nested = [nested]
    with pytest.raises(jsoncodec.JSONEncodeError):
        jsoncodec.dumps(nested)


def test_loads_still_refuses_text_that_is_not_json():
    """A broken document is a JSONDecodeError, surrogates or not."""
    for text in ['{"a": "\\ud800"', "[1,]", '"\\ud80"']:
        with pytest.raises(jsoncodec.JSONDecodeError):
            jsoncodec.loads(text)


@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=40))
def test_any_js_string_decodes_well_formed(s):
    """For every UTF-16 string, decoding what JSON.stringify writes gives its well-formed form."""
    text = _as_js_would_write(s)
    assert jsoncodec.loads(text) == _well_formed(s)
    assert jsoncodec.loads(jsoncodec.well_formed(text)) == _well_formed(s)
    # Nested one level, as output entries travel inside the worker's snapshot text.
    entry = jsoncodec.well_formed(jsoncodec.loads(_as_js_would_write(text)))
    assert jsoncodec.loads(entry) == _well_formed(s)


def test_sorted_dumps_gives_equal_bytes_for_equal_objects():
    a = {"b": [1, {"y": 2, "x": 1}], "a": "\u00e9"}
    b = {"a": "\u00e9", "b": [1, {"x": 1, "y": 2}]}
    assert (
        jsoncodec.dumps(a, sort_keys=True)
        == jsoncodec.dumps(b, sort_keys=True)
        == '{"a":"\u00e9","b":[1,{"x":1,"y":2}]}'.encode()
    )
    assert jsoncodec.dumps(a) != jsoncodec.dumps(b)  # without sorting, insertion order shows


def test_copied_is_an_equal_value_that_shares_nothing():
    value = {"a": [1, 2.5, -0.0, None, True, {"deep": ["x"]}], "big": 2**64 + 1, "s": "\ud800 lone"}
    copy = jsoncodec.copied(value)
    assert copy == value and copy["s"] == "\ud800 lone"  # nothing repaired, nothing rounded
    copy["a"][5]["deep"].append("y")
    assert value["a"][5]["deep"] == ["x"]
    plain = {"k": [{"n": 1}]}
    copy = jsoncodec.copied(plain)  # the codec round trip (no fallback needed)
    assert copy == plain and copy["k"][0] is not plain["k"][0]


@pytest.mark.parametrize("where", [0, 1, jsoncodec._SCAN_CHARS - 10, jsoncodec._SCAN_CHARS - 1, jsoncodec._SCAN_CHARS])
def test_a_run_of_19_digits_is_found_wherever_it_is(where: int):
    """The digit-run scan looks at the text in overlapping pieces: a run across a piece's end is found, and
    18 digits, or 19 split by any other character (a non-ASCII one included), are not a run."""
    pad = "é" * where
    assert jsoncodec.has_long_digit_run(pad + "1" * 19 + "]")
    assert not jsoncodec.has_long_digit_run(pad + "1" * 18 + "]")
    assert not jsoncodec.has_long_digit_run(pad + "1" * 9 + "é" + "1" * 10)
    assert not jsoncodec.has_long_digit_run(pad + "1" * 9 + "\ud800" + "1" * 10)  # a lone surrogate is no digit


@given(st.text(alphabet="0123456789 ,[]é", max_size=80))
def test_the_digit_run_scan_agrees_with_the_regular_expression(text: str):
    import re

    assert jsoncodec.has_long_digit_run(text) == (re.search("[0-9]{19}", text) is not None)


def test_host_writes_a_long_digit_run_as_a_float():
    """A 21-digit integer JavaScript writes whole is measured as the host will write it (exponent form)."""
    assert jsoncodec.as_host_writes("[174680538877714140000]") == "[1.7468053887771414e+20]"
    assert jsoncodec.as_host_writes('["x", 1234]') == '["x", 1234]'
