"""Errors of the bridge layer: framing and the host <-> worker protocol.

BridgeError                      base; every subclass has a stable ``code``
 ├── FrameTooLarge               a frame is over the negotiated size cap
 ├── FrameDecodeError            bytes on the pipe are not one JSON frame
 └── ProtocolError               a well-formed frame breaks the protocol (unknown type, missing field)
"""

from __future__ import annotations


class BridgeError(Exception):
    """Raised for any failure of the host <-> worker wire contract."""

    code = "bridge.error"


class FrameTooLarge(BridgeError):
    """Raised when a frame to send or receive is over the size cap."""

    code = "bridge.frame_too_large"

    def __init__(self, size: int, cap: int) -> None:
        super().__init__(f"frame of {size} bytes is over the {cap}-byte frame cap")
        self.size = size
        self.cap = cap


class FrameDecodeError(BridgeError):
    """Raised when frame bytes are not valid JSON or the stream ends mid-frame."""

    code = "bridge.frame_decode"


class ProtocolError(BridgeError):
    """Raised when a decoded frame is not a message the protocol knows."""

    code = "bridge.protocol"
