"""Every exception of the bridge package; each class has a stable snake_case ``code``.

None of these codes reaches an API caller or guest code: the service turns them into its own
failures (``runtime_unavailable``, ``internal_error``, an HTTP 500).  ``JSONEncodeError``,
``JSONDecodeError`` and ``DescriptorError`` also derive from the built-in ``TypeError`` /
``ValueError`` they have always been, so callers catching those keep working.

BridgeError                      bridge_error: base
 ├── FrameTooLarge               frame_too_large: a frame is over the negotiated size cap
 ├── FrameDecodeError            frame_decode: bytes on the pipe are not one JSON frame
 ├── ProtocolError               protocol_error: a well-formed frame breaks the protocol
 ├── JSONEncodeError             json_encode: a value is not JSON (also a TypeError)
 ├── JSONDecodeError             json_decode: text is not JSON (also a ValueError)
 ├── DescriptorError             refs_invalid_json: a saved result to describe is not JSON (also a ValueError)
 └── OutputError                 output_error: output accounting
      ├── OutputLimitExceeded    output_limit_exceeded: not even a bounded projection of the result fits
      ├── InvalidSource          output_invalid_source: a worker's output or value source is malformed
      └── OutputStateClosed      output_closed: output added or projected after the final projection
"""

from __future__ import annotations


class BridgeError(Exception):
    """Raised for any failure of the bridge layer (wire contract, JSON, output accounting)."""

    code = "bridge_error"


class FrameTooLarge(BridgeError):
    """Raised when a frame to send or receive is over the size cap."""

    code = "frame_too_large"

    def __init__(self, size: int, cap: int) -> None:
        super().__init__(f"frame of {size} bytes is over the {cap}-byte frame cap")
        self.size = size
        self.cap = cap


class FrameDecodeError(BridgeError):
    """Raised when frame bytes are not valid JSON or the stream ends mid-frame."""

    code = "frame_decode"


class ProtocolError(BridgeError):
    """Raised when a decoded frame is not a message the protocol knows."""

    code = "protocol_error"


class JSONEncodeError(BridgeError, TypeError):
    """Raised when a value is not JSON (a set, a non-string key, an unknown object)."""

    code = "json_encode"


class JSONDecodeError(BridgeError, ValueError):
    """Raised when text is not JSON."""

    code = "json_decode"


class DescriptorError(BridgeError, ValueError):
    """Raised when the data to describe is not JSON text."""

    code = "refs_invalid_json"


class OutputError(BridgeError):
    """Base of output accounting failures."""

    code = "output_error"


class OutputLimitExceeded(OutputError):
    """Raised when not even a bounded projection of the cell's result fits the budget."""

    code = "output_limit_exceeded"

    def __init__(self, message: str, release_reference_id: str | None = None) -> None:
        super().__init__(message)
        self.release_reference_id = release_reference_id


class InvalidSource(OutputError):
    """Raised when a worker's output or value source is malformed."""

    code = "output_invalid_source"


class OutputStateClosed(OutputError):
    """Raised when output is added or projected after the final projection."""

    code = "output_closed"
