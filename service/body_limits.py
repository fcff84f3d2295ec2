"""ASGI middleware that refuses request bodies over their cap with 413, before parsing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import BodyTooLarge, error_response

Scope = dict[str, Any]


class BodyLimitMiddleware:
    """Caps bodies by path: ``cap_for(path)`` gives the byte limit (None: no limit)."""

    def __init__(self, app: Any, cap_for: Callable[[str], int | None]) -> None:
        self.app = app
        self.cap_for = cap_for

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        cap = self.cap_for(scope["path"])
        if cap is None:
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > cap:
                await self._refuse(scope, receive, send, cap)
                return
        seen = 0
        too_large = False

        async def limited_receive() -> dict[str, Any]:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    too_large = True
                    raise BodyTooLarge(_message(cap))
            return message

        await self.app(scope, limited_receive, send)

    async def _refuse(self, scope: Scope, receive: Any, send: Any, cap: int) -> None:
        response = error_response(BodyTooLarge(_message(cap)))
        await response(scope, receive, send)


def _message(cap: int) -> str:
    return (f"request body is over the {cap}-byte cap for this endpoint; send less code or smaller "
            "tool results (large data belongs in tools or results.save, not in the request)")
