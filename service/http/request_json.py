"""Request bodies as JSON: decoded once, by the fast codec, with a nesting cap, off the loop when large.

Building Python objects for a large body takes the GIL for its whole length (an 11 MiB body of
small objects: ~0.3 s), so a thread would not free the event loop.  Large bodies are decoded in
a helper process of the caller's principal instead (``service.helpers``; the rules are the same,
``service.helpers.bodies``).  Client tool result values (``tool_results[].value`` of a wait body) are
never turned into Python objects in the service: they travel on as compact JSON (``RawJson``), which is
all the guest needs; the rest of the body (its ids, flags and errors: at most ``WAIT_REST_BYTES``) comes
back from the helper as compact JSON that the service counts, decodes and checks again (``DecodeJob``):
what an owned helper writes is data, never code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from service.errors import BodyTooLarge
from service.helpers.bodies import (
    MAX_BODY_DEPTH,
    WAIT_REST_BYTES,
    CountJob,
    DecodeJob,
    decode_outcome,
    refusal,
    tool_value_slots,
)
from service.runtime.dispatch import RawJson

__all__ = ["INLINE_BYTES", "MAX_BODY_DEPTH", "MCP_MAX_VALUES", "WAIT_REST_BYTES", "BodyDecoder", "decode_body"]

if TYPE_CHECKING:
    from service.helpers.pool import HelperPool
    from service.settings import ApiKey

# Bodies up to this size decode on the loop in a few milliseconds; larger ones go to the helper.
INLINE_BYTES = 256 * 1024
# An MCP body is parsed again by the SDK, on the event loop: past ``INLINE_BYTES`` it may hold this many values.
MCP_MAX_VALUES = 10_000
MCP_TOO_MANY_VALUES = (
    f"an MCP request over {INLINE_BYTES} bytes may hold at most {MCP_MAX_VALUES} JSON values; "
    "send large data as one string (code) or let a tool fetch it"
)


def decode_body(body: bytes, *, tool_values_raw: bool = False, max_values: int | None = None) -> object:
    """The body's JSON value; ``InvalidRequest`` (422, ``need_param`` body) if it is not JSON or too deep.

    With ``tool_values_raw`` (wait bodies), each ``tool_results[i].value`` is its compact JSON (``RawJson``).
    With ``max_values``, a body holding more JSON values is ``BodyTooLarge`` (413) before it is parsed.
    """
    outcome, value = decode_outcome(body, tool_values_raw, max_values)
    if outcome != "ok":
        raise refusal(outcome, value, max_values)
    if tool_values_raw:
        for entry in tool_value_slots(value):
            entry["value"] = RawJson(cast("bytes", entry["value"]))  # detached: its compact JSON
    return value


class BodyDecoder:
    """Decodes bodies: small ones inline, large ones in a helper process of the caller's principal."""

    def __init__(self, helpers: HelperPool) -> None:
        self.helpers = helpers

    async def decode(
        self, body: bytes, key: ApiKey | None, *, tool_values_raw: bool = False, max_values: int | None = None
    ) -> object:
        """The body's JSON value, decoded as ``decode_body`` does; a large one by a helper of ``key``'s
        principal (``HelperFailed``, a 503, if that helper answered out of shape). Without a key, only a
        small body is decoded: a large one is ``BodyTooLarge``."""
        if len(body) <= INLINE_BYTES:
            return decode_body(body, tool_values_raw=tool_values_raw, max_values=max_values)
        if key is None:
            raise BodyTooLarge(f"a request without an API key may send a JSON body of at most {INLINE_BYTES} bytes")
        return await self.helpers.run(DecodeJob(body, tool_values_raw, max_values), key)

    async def check_mcp_body(self, body: bytes, key: ApiKey) -> None:
        """Refuse (413) a large MCP body of many small values before the SDK parses it on the loop.

        The count runs in the helper process; a body that is not JSON passes, for the SDK to refuse.
        """
        if len(body) <= INLINE_BYTES:
            return
        count = await self.helpers.run(CountJob(body, MCP_MAX_VALUES), key)
        if count > MCP_MAX_VALUES:
            raise BodyTooLarge(MCP_TOO_MANY_VALUES)
