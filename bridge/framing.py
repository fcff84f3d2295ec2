"""Length-prefixed JSON frames with a hard size cap.

A frame is a 4-byte big-endian length followed by that many bytes of compact JSON (UTF-8).
The cap is checked before encoding finishes and before a receiver allocates the body, so a
hostile or broken peer can never make the other side buffer more than the cap.
"""

from __future__ import annotations

import struct
from typing import Any

from . import jsoncodec
from .errors import FrameDecodeError, FrameTooLarge

HEADER = struct.Struct(">I")
HEADER_SIZE = HEADER.size
#: Default cap: large enough for the biggest inbox allowance (256 MiB) plus envelope overhead.
DEFAULT_FRAME_CAP = 264 * 1024 * 1024


def encode_frame(message: Any, cap: int = DEFAULT_FRAME_CAP) -> bytes:
    """Encode one message as a frame; raise FrameTooLarge over ``cap``."""
    try:
        body = jsoncodec.dumps(message)
    except jsoncodec.JSONEncodeError as exc:  # a non-JSON message is a bug on our side
        raise FrameDecodeError(f"message is not JSON-serialisable: {exc}") from exc
    if len(body) > cap:
        raise FrameTooLarge(len(body), cap)
    return HEADER.pack(len(body)) + body


def encode_raw(data: bytes, cap: int = DEFAULT_FRAME_CAP) -> bytes:
    """Frame raw bytes (a reply payload that is already JSON text) without re-encoding them."""
    if len(data) > cap:
        raise FrameTooLarge(len(data), cap)
    return HEADER.pack(len(data)) + data


def frame_length(header: bytes, cap: int = DEFAULT_FRAME_CAP) -> int:
    """Return the body length announced by a 4-byte header, refusing lengths over ``cap``."""
    if len(header) != HEADER_SIZE:
        raise FrameDecodeError("stream ended inside a frame header")
    size: int = HEADER.unpack(header)[0]
    if size > cap:
        raise FrameTooLarge(size, cap)
    return size


def decode_body(body: bytes) -> Any:
    """Decode a frame body."""
    try:
        return jsoncodec.loads(body)
    except jsoncodec.JSONDecodeError as exc:
        raise FrameDecodeError(f"frame body is not JSON: {exc}") from exc
