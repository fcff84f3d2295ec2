"""A JSON response rendered by the bridge JSON codec (envelopes can be large; this is the hot path)."""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from bridge import jsoncodec


class JSONBytes(Response):
    """``application/json`` body from any JSON-serialisable value."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return jsoncodec.dumps(content)
