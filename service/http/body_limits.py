"""Request body caps by path, and reading a body without ever holding more than its cap."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import Message, Receive

from service.errors import BodyTooLarge
from service.settings import Settings

MiB = 1024 * 1024
# Endpoints without a documented body (cancel, deletes) still get a small allowance.
OTHER_BODY_CAP = MiB
#: Values an exec body may hold: its client-tool schemas' cap allows at most 65,536, plus room for the rest.
EXEC_BODY_VALUES = 100_000


class BodyCaps:
    """``cap_for(path)``: exec and MCP bodies ``max_exec_body_bytes``; wait bodies the inbox allowance + 1 MiB."""

    def __init__(self, settings: Settings) -> None:
        self.exec_cap = settings.max_exec_body_bytes
        # Client tool results can be as large as the cell's inbox.
        self.wait_cap = settings.max_snapshot_bytes + MiB
        self.max_values = settings.max_request_values

    def values_cap_for(self, path: str) -> int:
        """JSON values a body may hold, counted before it is parsed (413 over it).

        An exec body's data is its client-tool schemas (at most 128 KiB of compact JSON in all, so
        at most 65,536 values) beside a few scalars and lists: more is refused before any parse.
        """
        if path == "/v1/exec":
            return min(self.max_values, EXEC_BODY_VALUES)
        return self.max_values

    def cap_for(self, path: str) -> int:
        # An MCP request carries at most an exec's code (the facade's wait takes no large client tool results).
        if path in ("/v1/exec", "/mcp"):
            return self.exec_cap
        if path.endswith("/wait"):
            return self.wait_cap
        return OTHER_BODY_CAP


def declared_length(headers: Iterable[tuple[bytes, bytes]]) -> int | None:
    """The Content-Length header as an int, or None when absent or not a plain number."""
    for name, value in headers:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def read_body(receive: Receive, cap: int) -> tuple[bytes, Message | None]:
    """The whole body, refused with ``BodyTooLarge`` as soon as it passes ``cap`` (chunked too).

    Returns the body and the disconnect message if the peer went away instead of finishing.
    """
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > cap:
            raise BodyTooLarge(too_large_message(cap))
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None


def too_large_message(cap: int) -> str:
    return (
        f"request body is over the {cap}-byte cap for this endpoint; send less code or smaller "
        "tool results (large data belongs in tools or results.save, not in the request)"
    )
