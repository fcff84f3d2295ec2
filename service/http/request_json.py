"""Request bodies as JSON: decoded once, by the fast codec, with a nesting cap, off the loop when large.

The nesting cap keeps every value a caller sends encodable on its way on (guest frames,
envelopes, the store): the codec refuses anything nested deeper than ``jsoncodec.ENCODER_DEPTH``.

Building Python objects for a large body takes the GIL for its whole length (an 11 MiB body of
small objects: ~0.3 s), so a thread would not free the event loop.  Large bodies are decoded in
a helper process instead.  Client tool result values (``tool_results[].value`` of a wait body)
are never turned into Python objects at all: they travel on as compact JSON (``RawJson``), which
is all the guest needs.
"""

from __future__ import annotations

from bridge import jsoncodec
from bridge.json_values import count_values, nested_deeper_than, over_cap_message
from bridge.messages import SandboxOptions
from service.cells.dispatch import RawJson
from service.errors import BodyTooLarge, InvalidRequest
from service.helper_process import ConfinedHelper

MiB = 1024 * 1024
MAX_BODY_DEPTH = 128
# Bodies up to this size decode on the loop in a few milliseconds; larger ones go to the helper.
INLINE_BYTES = 256 * 1024
# What a wait body may hold besides its tool result values (ids, flags, error messages).
WAIT_REST_BYTES = MiB

TOO_DEEP = (
    f"request body is nested more than {MAX_BODY_DEPTH} levels deep; send flatter data "
    "(for example, pass deep structures as a JSON string or save them with results.save)"
)
# An MCP body is parsed again by the SDK, on the event loop: past ``INLINE_BYTES`` it may hold this many values.
MCP_MAX_VALUES = 10_000
MCP_TOO_MANY_VALUES = (
    f"an MCP request over {INLINE_BYTES} bytes may hold at most {MCP_MAX_VALUES} JSON values; "
    "send large data as one string (code) or let a tool fetch it"
)
WAIT_REST_TOO_LARGE = (
    f"a wait body may hold at most {WAIT_REST_BYTES} bytes besides tool_results[].value "
    "(ids, ok flags, error messages); put data in value and keep errors short"
)


def decode_body(body: bytes, *, tool_values_raw: bool = False, max_values: int | None = None) -> object:
    """The body's JSON value; ``InvalidRequest`` (422, ``need_param`` body) if it is not JSON or too deep.

    With ``tool_values_raw`` (wait bodies), each ``tool_results[i].value`` is its compact JSON (``RawJson``).
    With ``max_values``, a body holding more JSON values is ``BodyTooLarge`` (413) before it is parsed.
    """
    outcome = _decode(body, tool_values_raw, max_values)
    return _finish(outcome)


class BodyDecoder:
    """Decodes bodies: small ones inline, large ones in one confined helper process (started on first use)."""

    def __init__(self, sandbox: SandboxOptions) -> None:
        self.helper = ConfinedHelper("body decoder", sandbox, [__name__])

    async def decode(self, body: bytes, *, tool_values_raw: bool = False, max_values: int | None = None) -> object:
        if len(body) <= INLINE_BYTES:
            return decode_body(body, tool_values_raw=tool_values_raw, max_values=max_values)
        return _finish(await self.helper.run(_decode, body, tool_values_raw, max_values))

    async def check_mcp_body(self, body: bytes) -> None:
        """Refuse (413) a large MCP body of many small values before the SDK parses it on the loop.

        The count runs in the helper process; a body that is not JSON passes, for the SDK to refuse.
        """
        if len(body) <= INLINE_BYTES:
            return
        count = await self.helper.run(count_values, body, MCP_MAX_VALUES)
        if count > MCP_MAX_VALUES:
            raise BodyTooLarge(MCP_TOO_MANY_VALUES)

    def close(self) -> None:
        self.helper.close()


def _decode(body: bytes, tool_values_raw: bool, max_values: int | None = None) -> tuple[str, object]:
    """``("ok", value)``, ``("error", message)`` or ``("too_many", message)``; plain data, so it crosses a
    process boundary."""
    if max_values is not None and count_values(body, max_values) > max_values:
        return "too_many", over_cap_message(max_values)
    try:
        value = jsoncodec.loads(body)
    except jsoncodec.JSONDecodeError as exc:
        if "depth" in str(exc):
            return "error", TOO_DEEP
        return "error", f"request body is not valid JSON ({exc}); send one UTF-8 JSON object as documented at /docs"
    if nested_deeper_than(value, MAX_BODY_DEPTH, body):
        return "error", TOO_DEEP
    if tool_values_raw and _detach_tool_values(value) > WAIT_REST_BYTES:
        return "error", WAIT_REST_TOO_LARGE
    return "ok", value


def _finish(outcome: tuple[str, object]) -> object:
    kind, value = outcome
    if kind == "error":
        raise InvalidRequest(str(value), need_param="body")
    if kind == "too_many":
        raise BodyTooLarge(str(value))
    results = value.get("tool_results") if isinstance(value, dict) else None
    if isinstance(results, list):
        for entry in results:
            if isinstance(entry, dict) and isinstance(entry.get("value"), bytes):
                entry["value"] = RawJson(entry["value"])
    return value


def _detach_tool_values(body: object) -> int:
    """Replace each ``tool_results[i].value`` by its compact JSON bytes; return the size of the rest."""
    results = body.get("tool_results") if isinstance(body, dict) else None
    if isinstance(results, list):
        for entry in results:
            if isinstance(entry, dict) and "value" in entry:
                entry["value"] = jsoncodec.dumps(entry["value"])
    return len(jsoncodec.dumps(body, default=lambda _: None))
