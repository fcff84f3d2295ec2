"""A JSON response rendered with orjson (envelopes can be large; this is the hot path)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class JSONBytes(Response):
    """``application/json`` body from any orjson-serialisable value."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
