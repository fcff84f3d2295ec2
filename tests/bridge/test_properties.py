"""Property tests of the bridge: truncation, markers, output projection, references and frames.

Strategies include lone UTF-16 surrogates (as ``JSON.stringify`` writes them: ``\\udXXX``
escapes) and deep nesting wherever a function takes JSON text; functions that take Python
values get well-formed strings, since the codec is where lone surrogates are dealt with.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge import jsoncodec
from bridge.errors import FrameDecodeError, FrameTooLarge
from bridge.framing import HEADER_SIZE, decode_body, encode_frame, frame_length
from bridge.output import (
    FinalError,
    FinalValue,
    OutputCapture,
    OutputState,
    capture_value,
    received_output,
    received_value,
    shipment_of,
    shipped_value,
)
from bridge.refs import DESCRIPTOR_MAX_BYTES, PREVIEW_FULL_MAX_BYTES, describe_reference, shrink_descriptor
from bridge.truncation import (
    ERROR_TRUNCATED_SUFFIX,
    json_size,
    json_text_prefix,
    parse_json,
    truncate_error,
    truncation_marker,
    utf8_size,
)
from tests.bridge.test_output import project

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---- strategies ------------------------------------------------------------------------------

_any_chars = st.characters(codec=None, exclude_categories=())  # lone surrogates included
_tricky_chars = st.sampled_from(['"', "\\", "\n", "\x00", "\x1f", "é", "€", "🦞", "\ud800", "\udfff", "u", "d"])
any_strings = st.text(st.one_of(_any_chars, _tricky_chars), max_size=40)
_well_formed_chars = st.one_of(
    st.characters(exclude_categories=("Cs",)), _tricky_chars.filter(lambda c: not _is_surrogate(c))
)
well_formed_strings = st.text(_well_formed_chars, max_size=40)


def _is_surrogate(c: str) -> bool:
    return "\ud800" <= c <= "\udfff"


def _json_values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        strings,
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(strings, inner, max_size=4)),
        max_leaves=20,
    )


def _nest(value: Any, depth: int) -> Any:
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def js_number(x: float) -> str:
    """A float as JavaScript's Number::toString writes it (ECMA-262): 0.00006103515625, 1e+21."""
    if x == 0:
        return "0"
    sign, digit_tuple, exponent = Decimal(repr(x)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    k, n = len(digits), int(exponent) + len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = f"e{'+' if n > 0 else '-'}{abs(n - 1)}"
        text = digits + e if k == 1 else digits[0] + "." + digits[1:] + e
    return "-" + text if sign else text


def _js_stringify(value: Any) -> str:
    if isinstance(value, float):
        return js_number(value)
    if isinstance(value, list):
        return "[" + ",".join(_js_stringify(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_js_stringify(k) + ":" + _js_stringify(v) for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def js_json(value: Any) -> str:
    """Compact JSON as the guest's JSON.stringify writes it: JS number format, lone surrogates escaped."""
    text = _js_stringify(value)
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)


def _deep_text(depth: int) -> str:
    return "[" * depth + '"\\ud800"' + "]" * depth


# JSON texts: values with lone surrogates, values nested 0..200 deep, and texts nested to 10,000.
json_texts = st.one_of(
    _json_values(any_strings).map(js_json),
    st.tuples(_json_values(well_formed_strings), st.integers(0, 200)).map(lambda vd: js_json(_nest(*vd))),
    st.integers(1, 10_000).map(_deep_text),
)


def _is_safe_prefix(prefix: str) -> bool:
    """No cut escape: no odd trailing backslash run, no unfinished \\uXXXX, no trailing high surrogate."""
    raw = prefix.encode("utf-8")
    if (len(raw) - len(raw.rstrip(b"\\"))) % 2:
        return False
    unfinished = re.search(rb"(\\+)u[0-9a-fA-F]{0,3}$", raw)
    if unfinished and len(unfinished.group(1)) % 2:
        return False
    high = re.search(rb"(\\+)u[dD][89abAB][0-9a-fA-F]{2}$", raw)
    return not (high and len(high.group(1)) % 2)


# ---- truncation ------------------------------------------------------------------------------


@PROPERTY
@given(json_texts, st.integers(-5, 2000))
def test_json_text_prefix_is_a_safe_prefix_within_the_limit(text: str, limit: int) -> None:
    """The prefix fits, starts the text, never cuts an escape or a code point, and is whole when it fits."""
    prefix = json_text_prefix(text, limit)
    assert text.startswith(prefix)
    assert utf8_size(prefix) <= max(limit, 0)
    assert _is_safe_prefix(prefix)
    if utf8_size(text) <= limit:
        assert prefix == text
    elif "\\ud" not in text and "\\uD" not in text:
        assert utf8_size(prefix) >= limit - 12  # only a cut code point or escape is given back


@PROPERTY
@given(json_texts, st.integers(0, 5000), st.integers(0, 3000))
def test_truncation_marker_is_valid_json_within_the_budget(text: str, hidden: int, budget: int) -> None:
    """A marker is None only when the empty one does not fit; else it is JSON within the budget."""
    size = utf8_size(text) + hidden  # the text may be only the known prefix of larger data
    marker = truncation_marker(text, size, budget)
    empty = {
        "truncated": True,
        "prefix": "",
        "omittedBytes": size,
        "guidance": "Output truncated; rerun with narrower args.",
    }
    if marker is None:
        assert json_size(empty) > budget
        return
    encoded = jsoncodec.dumps(marker)
    assert len(encoded) <= budget
    assert jsoncodec.loads(encoded) == marker
    assert text.startswith(marker["prefix"]) and _is_safe_prefix(marker["prefix"])
    assert marker["omittedBytes"] == size - utf8_size(marker["prefix"])


@PROPERTY
@given(well_formed_strings.map(lambda s: s * 20), st.integers(0, 600))
def test_truncate_error_fits_and_keeps_the_leading_cause(message: str, limit: int) -> None:
    """A shortened error fits and starts with the message; a short one is left alone."""
    shown = truncate_error(message, limit)
    assert utf8_size(shown) <= limit
    if utf8_size(message) <= limit:
        assert shown == message
    else:
        cause = shown[: -len(ERROR_TRUNCATED_SUFFIX)] if shown.endswith(ERROR_TRUNCATED_SUFFIX) else shown
        assert message.startswith(cause)


@PROPERTY
@given(st.one_of(json_texts, st.text(max_size=40), st.integers(1, 50_000).map(lambda d: '{"a":' * d)))
def test_parse_json_returns_a_value_or_raises_value_error(text: str) -> None:
    """Any text parses or raises ValueError, however deep (no RecursionError escapes)."""
    try:
        parse_json(text)
    except ValueError:
        pass


# ---- output projection -----------------------------------------------------------------------

_entries = st.one_of(
    st.text(_well_formed_chars, max_size=400).map(lambda s: orjson.dumps({"type": "text", "text": s}).decode()),
    st.tuples(_json_values(well_formed_strings), st.integers(0, 60)).map(
        lambda vd: orjson.dumps({"type": "json", "value": _nest(*vd)}).decode()
    ),
)
_finals = st.one_of(
    st.tuples(_json_values(well_formed_strings), st.integers(0, 3000))
    .map(lambda vp: {"v": vp[0], "pad": "x" * vp[1]})
    .map(lambda v: FinalValue(capture_value(js_json(v), 1 << 20))),
    st.integers(0, 4000).map(lambda n: FinalError("Error: " + "e" * n)),
)


@pytest.mark.slow
@PROPERTY
@given(st.integers(1024, 6000), st.lists(st.lists(_entries, max_size=8), min_size=1, max_size=5), _finals)
def test_every_leg_is_valid_json_within_the_budget(max_bytes: int, legs: list[list[str]], final: Any) -> None:
    """Per leg: committed + marker + value/error <= budget; markers are JSON; entries arrive once, in order."""
    capture, state = OutputCapture(max_bytes), OutputState(max_bytes)
    whole: list[str] = []
    for index, leg in enumerate(legs):
        for entry in leg:
            capture.add(entry)
        state.extend(capture.drain())
        last = index == len(legs) - 1
        projection = project(state, final if last else None)
        assert jsoncodec.loads(jsoncodec.dumps(projection.output)) == projection.output
        marker_cost = json_size(projection.output) if projection.output_truncated and projection.output else 0
        final_cost = 0
        if projection.error is not None:
            final_cost = utf8_size(projection.error)
        elif last:
            final_cost = json_size(projection.value)
        assert state.committed_bytes + marker_cost + final_cost <= max_bytes
        if projection.output_truncated:  # one marker, or none when the same marker was already sent
            assert [set(m) for m in projection.output] in ([], [{"truncated", "prefix", "omittedBytes", "guidance"}])
        else:
            whole.extend(orjson.dumps(e).decode() for e in projection.output)
    all_entries = [e for leg in legs for e in leg]
    assert whole == all_entries[: len(whole)]
    if isinstance(final, FinalValue) and not projection.value_truncated:
        assert projection.value == parse_json(final.source["json"])


# ---- references ------------------------------------------------------------------------------

_ref_ids = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=48)


@PROPERTY
@given(
    _ref_ids,
    st.one_of(
        _json_values(well_formed_strings),
        st.tuples(_json_values(well_formed_strings), st.integers(0, 120)).map(lambda vd: _nest(*vd)),
    ),
)
def test_reference_descriptor_round_trips(ref_id: str, value: Any) -> None:
    """A descriptor keeps the id and true size, is JSON within its cap, and shows small values whole."""
    text = js_json(value)
    desc = describe_reference(ref_id, text)
    encoded = jsoncodec.dumps(desc)
    assert len(encoded) <= DESCRIPTOR_MAX_BYTES
    assert jsoncodec.loads(encoded) == desc
    assert desc["id"] == ref_id and desc["bytes"] == utf8_size(text)
    if utf8_size(text) <= PREVIEW_FULL_MAX_BYTES:
        assert desc["preview"] == parse_json(text) and desc["previewTruncated"] is False


@PROPERTY
@given(_ref_ids, st.integers(1, 5000))
def test_reference_descriptor_of_deep_text_is_bounded(ref_id: str, depth: int) -> None:
    """Text nested up to 5,000 levels is described within the cap or refused as not JSON."""
    text = "[" * depth + "]" * depth
    try:
        desc = describe_reference(ref_id, text)
    except ValueError:
        return
    assert len(jsoncodec.dumps(desc)) <= DESCRIPTOR_MAX_BYTES and desc["id"] == ref_id


@PROPERTY
@given(_ref_ids, _json_values(well_formed_strings), st.integers(0, 900))
def test_shrunk_descriptor_fits_or_is_the_bare_id(ref_id: str, value: Any, limit: int) -> None:
    """Shrinking keeps the id and fits the limit unless only the id is left."""
    shrunk = shrink_descriptor(describe_reference(ref_id, js_json(value)), limit)
    assert shrunk["id"] == ref_id
    assert json_size(shrunk) <= limit or shrunk == {"id": ref_id}


# ---- frames ----------------------------------------------------------------------------------


@PROPERTY
@given(st.tuples(_json_values(well_formed_strings), st.integers(0, 200)).map(lambda vd: _nest(*vd)))
def test_frames_round_trip(message: Any) -> None:
    """Well-formed messages nested up to 200 levels survive encode -> header -> decode."""
    frame = encode_frame(message)
    assert frame_length(frame[:HEADER_SIZE]) == len(frame) - HEADER_SIZE
    assert decode_body(frame[HEADER_SIZE:]) == message


@PROPERTY
@given(
    st.one_of(
        _json_values(any_strings),
        st.tuples(_json_values(well_formed_strings), st.integers(200, 400)).map(lambda vd: _nest(*vd)),
    )
)
def test_frames_of_lone_surrogates_or_deep_values_round_trip_or_are_refused(message: Any) -> None:
    """A message the codec cannot write is a FrameDecodeError; anything encoded decodes to JSON."""
    try:
        frame = encode_frame(message)
    except FrameDecodeError:
        return
    decoded = decode_body(frame[HEADER_SIZE:])
    assert jsoncodec.dumps(decoded) == frame[HEADER_SIZE:]


@PROPERTY
@given(st.one_of(st.binary(max_size=64), st.integers(1, 20_000).map(lambda d: b"[" * d + b"]" * d)))
def test_any_body_decodes_or_raises_frame_decode_error(body: bytes) -> None:
    """Arbitrary or deeply nested bodies never raise anything but FrameDecodeError."""
    try:
        decode_body(body)
    except FrameDecodeError:
        pass


@PROPERTY
@given(st.binary(min_size=4, max_size=4), st.integers(0, 2**32))
def test_frame_length_is_within_the_cap_or_refused(header: bytes, cap: int) -> None:
    """An announced length is returned only when it is within the cap."""
    try:
        size = frame_length(header, cap)
    except FrameTooLarge as exc:
        assert exc.size > cap
        return
    assert size <= cap and size == int.from_bytes(header, "big")


@PROPERTY
@given(st.integers(1024, 6000), st.lists(st.lists(_entries, max_size=8), min_size=1, max_size=5))
def test_output_crosses_as_raw_frames_unchanged(max_bytes: int, legs: list[list[str]]) -> None:
    """What the worker captures, shipped as a frame's shipment and raw frames of text, is what the host
    reads back: the same source items, whole entries, a cut one and a count alike."""
    capture = OutputCapture(max_bytes)
    for leg in legs:
        for entry in leg:
            capture.add(entry)
        items = capture.drain()
        shipment, raws = shipment_of(items)
        assert received_output(shipment, [raw.decode("utf-8") for raw in raws]) == items
        assert len(raws) == shipment["entries"] + ("cut" in shipment)


@PROPERTY
@given(_finals.filter(lambda f: isinstance(f, FinalValue)), st.integers(0, 4000))
def test_a_value_crosses_as_its_size_and_a_raw_frame_unchanged(final: Any, limit: int) -> None:
    """A whole value and a cut one (its prefix and true size) read back as the worker captured them."""
    source = capture_value(final.source["json"], limit)
    size, raw = shipped_value(source)
    assert received_value(size, raw.decode("utf-8")) == source
