"""A JSON response rendered by the bridge JSON codec (envelopes can be large; this is the hot path).

Every answer is valid UTF-8 JSON: the codec turns a lone UTF-16 surrogate anywhere (values, keys,
messages) into U+FFFD, and only when its fast path refuses, so normal answers pay nothing.
"""

from __future__ import annotations

from starlette.responses import Response

from bridge import jsoncodec
from service.errors import ResponseNotEncodable
from service.runtime.envelopes import SealedEnvelope

NOT_ENCODABLE = (
    "the answer could not be written as JSON ({reason}); asking again returns the same answer: "
    "return or store values nested less deeply (at most 254 levels)"
)


class JSONBytes(Response):
    """``application/json`` body from any JSON-serialisable value."""

    media_type = "application/json"

    def render(self, content: object) -> bytes:
        if isinstance(content, SealedEnvelope):
            return content.encoded  # encoded once, before the cell's side effects committed
        try:
            return jsoncodec.dumps(content)
        except jsoncodec.JSONEncodeError as exc:
            raise ResponseNotEncodable(NOT_ENCODABLE.format(reason=exc)) from None
