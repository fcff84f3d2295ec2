"""Frames: length prefix, JSON body, hard size cap on both sides."""

from __future__ import annotations

import pytest

from bridge.errors import FrameDecodeError, FrameTooLarge
from bridge.framing import HEADER_SIZE, decode_body, encode_frame, encode_raw, frame_length


def test_round_trip_keeps_unicode_and_proto_keys():
    """A message survives encode -> header -> body decode, including non-ASCII and "__proto__" keys."""
    message = {"t": "settle", "replies": [{"id": 1, "ok": True}], "text": "héllo 😀", "__proto__": 1}
    frame = encode_frame(message)
    size = frame_length(frame[:HEADER_SIZE])
    assert size == len(frame) - HEADER_SIZE
    assert decode_body(frame[HEADER_SIZE:]) == message


def test_encode_refuses_frames_over_the_cap():
    """Encoding a message larger than the cap raises FrameTooLarge naming both sizes."""
    with pytest.raises(FrameTooLarge) as info:
        encode_frame({"data": "x" * 100}, cap=64)
    assert info.value.cap == 64 and info.value.size > 64
    assert info.value.code == "frame_too_large"
    assert "64-byte frame cap" in str(info.value)


def test_receiver_refuses_an_announced_length_over_the_cap():
    """A header announcing more than the cap is refused before any body is read."""
    header = encode_frame({"data": "x" * 100})[:HEADER_SIZE]
    with pytest.raises(FrameTooLarge):
        frame_length(header, cap=10)


def test_truncated_header_and_bad_body_are_decode_errors():
    """A short header or a non-JSON body raise FrameDecodeError (stable code)."""
    with pytest.raises(FrameDecodeError):
        frame_length(b"\x00\x00")
    with pytest.raises(FrameDecodeError) as info:
        decode_body(b"{not json")
    assert info.value.code == "frame_decode"


def test_non_json_values_are_refused_on_encode():
    """Values orjson cannot encode (a set) are a FrameDecodeError, not a crash."""
    with pytest.raises(FrameDecodeError):
        encode_frame({"bad": {1, 2}})


def test_raw_frames_carry_bytes_unchanged_and_obey_the_cap():
    """encode_raw frames payload bytes as they are and refuses payloads over the cap."""
    payload = b'{"a":"\\u00e9"}'
    frame = encode_raw(payload)
    assert frame_length(frame[:HEADER_SIZE]) == len(payload)
    assert frame[HEADER_SIZE:] == payload
    with pytest.raises(FrameTooLarge):
        encode_raw(b"x" * 11, cap=10)
