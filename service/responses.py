"""A JSON response rendered by the bridge JSON codec (envelopes can be large; this is the hot path)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from bridge import jsoncodec

from .envelopes import SealedEnvelope


class JSONBytes(Response):
    """``application/json`` body from any JSON-serialisable value."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        if isinstance(content, SealedEnvelope):
            return content.encoded  # encoded once, before the cell's side effects committed
        return jsoncodec.dumps(content)
