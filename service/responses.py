"""A JSON response rendered by the bridge JSON codec (envelopes can be large; this is the hot path).

Every answer is valid UTF-8 JSON: a lone UTF-16 surrogate anywhere (values, keys, messages)
becomes U+FFFD.  The repair runs only when the fast encoder refuses, so normal answers pay nothing.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from bridge import jsoncodec

# Deeper than the encoder goes anyway; bounds the repair walk.
REPAIR_DEPTH = 256

NOT_ENCODABLE = (
    "the answer could not be written as JSON ({reason}); asking again returns the same answer: "
    "return or store values nested less deeply (at most 254 levels)"
)


class JSONBytes(Response):
    """``application/json`` body from any JSON-serialisable value."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        try:
            return jsoncodec.dumps(content)
        except jsoncodec.JSONEncodeError as exc:
            return _render_repaired(content, exc)


def _render_repaired(content: Any, first: Exception) -> bytes:
    from .errors import ResponseNotEncodable

    try:
        return jsoncodec.dumps(without_lone_surrogates(content))
    except (jsoncodec.JSONEncodeError, RecursionError) as exc:
        raise ResponseNotEncodable(NOT_ENCODABLE.format(reason=exc or first)) from None


def without_lone_surrogates(value: Any, depth: int = 0) -> Any:
    """``value`` with every lone surrogate in strings and keys replaced by U+FFFD (pairs are joined)."""
    if depth > REPAIR_DEPTH:
        raise RecursionError("nested too deep")
    if isinstance(value, str):
        return _repair_text(value)
    if isinstance(value, dict):
        return {_repair_text(k) if isinstance(k, str) else k: without_lone_surrogates(v, depth + 1)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_lone_surrogates(v, depth + 1) for v in value]
    return value


def _repair_text(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        # Through UTF-16, a high+low pair becomes its character and a lone half becomes U+FFFD.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
