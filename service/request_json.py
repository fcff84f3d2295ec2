"""Request bodies as JSON: decoded once, by the fast codec, with a nesting cap.

The cap keeps every value a caller sends encodable on its way on (guest frames, envelopes, the
store): the codec refuses anything nested deeper than ``ENCODER_DEPTH``.
"""

from __future__ import annotations

from typing import Any

from bridge import jsoncodec

from .errors import InvalidRequest

MAX_BODY_DEPTH = 128
ENCODER_DEPTH = 254  # the deepest nesting bridge.jsoncodec can encode

TOO_DEEP = (f"request body is nested more than {MAX_BODY_DEPTH} levels deep; send flatter data "
            "(for example, pass deep structures as a JSON string or save them with results.save)")


def decode_body(body: bytes) -> Any:
    """The body's JSON value; ``InvalidRequest`` (422, ``need_param`` body) if it is not JSON or too deep."""
    try:
        value = jsoncodec.loads(body)
    except jsoncodec.JSONDecodeError as exc:
        if "depth" in str(exc):
            raise InvalidRequest(TOO_DEEP, need_param="body") from None
        raise InvalidRequest(f"request body is not valid JSON ({exc}); send one UTF-8 JSON object "
                            "as documented at /docs", need_param="body") from None
    if nested_deeper_than(value, MAX_BODY_DEPTH):
        raise InvalidRequest(TOO_DEEP, need_param="body")
    return value


def nested_deeper_than(value: Any, limit: int) -> bool:
    """True when ``value`` nests containers more than ``limit`` deep.

    Wrapping the value in ``ENCODER_DEPTH - limit`` lists and encoding it lets the codec do the
    walk at native speed: it fails exactly when the original is deeper than ``limit``.
    """
    if not isinstance(value, (dict, list)):
        return False
    wrapped: Any = value
    for _ in range(ENCODER_DEPTH - limit):
        wrapped = [wrapped]
    try:
        jsoncodec.dumps(wrapped)
    except jsoncodec.JSONEncodeError:
        return True
    return False
