"""UTF-8- and escape-safe prefixes, truncation markers and bounded errors."""

from __future__ import annotations

import re

import orjson
import pytest

from bridge.truncation import (
    ERROR_TRUNCATED_SUFFIX,
    TRUNCATION_GUIDANCE,
    json_size,
    json_text_prefix,
    parse_json,
    truncate_error,
    truncation_marker,
    utf8_prefix,
    utf8_size,
)

# An escape (a surrogate-pair escape counts as one unit) or one character.
_UNIT = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\.|.", re.S)


def _boundaries(json_text: str) -> list[int]:
    """Byte offsets where a safe prefix may end, found by an independent tokenizer."""
    offsets = [0]
    for match in _UNIT.finditer(json_text):
        offsets.append(offsets[-1] + utf8_size(match.group()))
    return offsets


SAMPLES = {
    "ascii": orjson.dumps([{"type": "text", "text": "hello world " * 40}]).decode(),
    "two-byte": orjson.dumps({"t": "é" * 300}).decode(),
    "three-byte": orjson.dumps({"t": "€漢" * 200}).decode(),
    "four-byte": orjson.dumps({"t": "🦞😀" * 150}).decode(),
    "escapes": orjson.dumps({"t": 'a"b\\c\nd\te\x01\x1f' * 60}).decode(),
    "mixed": orjson.dumps([{"k": 'é🦞\n"x\\', "n": i} for i in range(60)]).decode(),
    "pair-escapes": '["' + "\\ud83e\\udd9e\\u00e9x" * 80 + '"]',
    "escaped-backslash-then-u": '["' + "\\\\u0041\\\\" * 80 + '"]',
}


@pytest.mark.parametrize(
    ("text", "max_bytes", "expected"),
    [
        ("abc", 3, "abc"),
        ("abc", 2, "ab"),
        ("é", 1, ""),
        ("aé", 2, "a"),
        ("aé", 3, "aé"),
        ("€", 2, ""),
        ("a€", 3, "a"),
        ("🦞", 3, ""),
        ("🦞", 4, "🦞"),
        ("x🦞y", 5, "x🦞"),
        ("anything", 0, ""),
        ("anything", -5, ""),
    ],
)
def test_utf8_prefix_table(text: str, max_bytes: int, expected: str) -> None:
    """utf8_prefix keeps whole code points and the most bytes that fit."""
    assert utf8_prefix(text, max_bytes) == expected


@pytest.mark.parametrize("name", ["two-byte", "three-byte", "four-byte", "mixed"])
def test_utf8_prefix_never_splits_a_code_point(name: str) -> None:
    """Every cut of multi-byte text is a real prefix, within the limit and maximal."""
    text = SAMPLES[name]
    for max_bytes in range(0, utf8_size(text) + 2):
        prefix = utf8_prefix(text, max_bytes)
        assert text.startswith(prefix)
        assert utf8_size(prefix) <= max_bytes
        if len(prefix) < len(text):
            assert utf8_size(text[: len(prefix) + 1]) > max_bytes


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_json_text_prefix_ends_on_the_last_safe_boundary(name: str) -> None:
    """json_text_prefix never cuts a code point, an escape or an escaped surrogate pair."""
    text = SAMPLES[name]
    boundaries = _boundaries(text)
    for max_bytes in range(0, utf8_size(text) + 2):
        prefix = json_text_prefix(text, max_bytes)
        assert text.startswith(prefix)
        expected = max(b for b in boundaries if b <= max_bytes)
        assert utf8_size(prefix) == expected, (max_bytes, prefix[-14:])


@pytest.mark.parametrize(
    ("text", "max_bytes", "expected"),
    [
        ('"a\\n"', 3, '"a'),
        ('"a\\u00e9"', 6, '"a'),
        ('"a\\u00e9"', 8, '"a\\u00e9'),
        ('"\\\\u0041"', 4, '"\\\\u'),
        ('"\\ud83d\\ude00"', 7, '"'),
        ('"\\ud83d\\ude00"', 12, '"'),
        ('"\\ud83d\\ude00"', 13, '"\\ud83d\\ude00'),
        ('"\\ud800x"', 7, '"'),
        ('"\\\\"', 2, '"'),
        ('"\\\\"', 3, '"\\\\'),
    ],
)
def test_json_text_prefix_table(text: str, max_bytes: int, expected: str) -> None:
    """Known escape cuts fall back to the escape's start (a trailing high surrogate is dropped)."""
    assert json_text_prefix(text, max_bytes) == expected


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_marker_fits_every_budget_exactly(name: str) -> None:
    """Markers fit each budget from 1024 to 5000, are tight, and count omitted bytes exactly."""
    text = SAMPLES[name] * 4
    original = utf8_size(text)
    for budget in range(1024, 5001, 97):
        marker = truncation_marker(text, original, budget)
        assert marker is not None
        size = json_size(marker)
        assert size <= budget
        prefix_bytes = utf8_size(marker["prefix"])
        assert text.startswith(marker["prefix"])
        assert marker["omittedBytes"] == original - prefix_bytes
        assert list(marker) == ["truncated", "prefix", "omittedBytes", "guidance"]
        assert marker["truncated"] is True and marker["guidance"] == TRUNCATION_GUIDANCE
        if prefix_bytes < original:
            # The next safe unit is at most a 12-byte pair escape, 13 bytes once re-escaped.
            assert budget - size < 16, (budget, size)


def test_marker_prefix_is_whole_when_the_data_fits() -> None:
    """A marker over small data carries all of it and omits nothing."""
    text = '["short"]'
    marker = truncation_marker(text, 9, 1024)
    assert marker is not None
    assert marker["prefix"] == text and marker["omittedBytes"] == 0


def test_marker_from_a_partial_source_counts_the_true_size() -> None:
    """When only a prefix of the data is known, omittedBytes still uses the true size."""
    known = '[{"type":"text","text":"' + "x" * 3000
    marker = truncation_marker(known, 50_000_000, 2048)
    assert marker is not None
    assert marker["omittedBytes"] == 50_000_000 - utf8_size(marker["prefix"])
    assert json_size(marker) <= 2048


@pytest.mark.parametrize("budget", [0, 10, 60, 95])
def test_marker_returns_none_when_even_empty_does_not_fit(budget: int) -> None:
    """A budget below the empty-prefix marker yields None."""
    assert truncation_marker("x" * 5000, 5000, budget) is None


def test_marker_with_custom_guidance_fits() -> None:
    """A longer guidance text is accounted for in the marker size."""
    guidance = "Not retained: result-store capacity reached. " + TRUNCATION_GUIDANCE
    marker = truncation_marker("[" + "1," * 4000 + "1]", 8003, 1500, guidance)
    assert marker is not None and marker["guidance"] == guidance
    assert json_size(marker) <= 1500


@pytest.mark.parametrize(
    ("message", "max_bytes"),
    [
        ("ReferenceError: missingFn is not defined\n    at cell.js:3:1\n" * 50, 200),
        ("Error: é🦞 boom " * 100, 64),
        ("TypeError: " + "x" * 10_000, 1024),
        ("Error: " + "漢" * 999, 101),
    ],
)
def test_truncate_error_keeps_the_cause_and_fits(message: str, max_bytes: int) -> None:
    """A long error keeps its leading cause, ends with the suffix and fits the limit."""
    out = truncate_error(message, max_bytes)
    assert utf8_size(out) <= max_bytes
    assert out.endswith(ERROR_TRUNCATED_SUFFIX)
    head = out[: -len(ERROR_TRUNCATED_SUFFIX)]
    assert message.startswith(head) and head.split(":")[0] == message.split(":")[0]


def test_truncate_error_leaves_short_errors_alone() -> None:
    """An error within the limit is returned unchanged."""
    assert truncate_error("Error: boom", 11) == "Error: boom"


def test_truncate_error_below_the_suffix_size_keeps_the_cause() -> None:
    """With less room than the suffix, the message's first bytes are kept."""
    assert truncate_error("ReferenceError: x", 9) == "Reference"


def test_parse_json_turns_huge_integers_into_numbers() -> None:
    """Integers beyond 64 bits parse as floats, as JavaScript numbers would."""
    assert parse_json("[100000000000000000000, 5]") == [1e20, 5]
