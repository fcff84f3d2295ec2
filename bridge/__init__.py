"""Pure wire contract between the service and its guest workers: frames, messages, budgets."""

from .errors import BridgeError, FrameDecodeError, FrameTooLarge, ProtocolError
from .framing import DEFAULT_FRAME_CAP, HEADER_SIZE, decode_body, encode_frame, frame_length

__all__ = [
    "DEFAULT_FRAME_CAP",
    "HEADER_SIZE",
    "BridgeError",
    "FrameDecodeError",
    "FrameTooLarge",
    "ProtocolError",
    "decode_body",
    "encode_frame",
    "frame_length",
]
