"""Simple Python tools the service tests register through the dispatch seam (real tools, not mocks)."""

from __future__ import annotations

import asyncio
from typing import Any

from service.tools import ToolResult, ToolSpec

CALLS: dict[str, int] = {}


async def _echo(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    CALLS["echo"] = CALLS.get("echo", 0) + 1
    await asyncio.sleep(float(params.get("delay", 0)))
    return {"echo": params.get("x"), "session": ctx.session_id}


async def _fail(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    raise ValueError(params.get("message", "tool failed on purpose"))


async def _blob(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    """A reply of ``size`` bytes of text (for inbox tests)."""
    await asyncio.sleep(float(params.get("delay", 0)))
    return {"page": params.get("page", 0), "data": "x" * int(params["size"])}


async def _news(call_id: str, params: dict[str, Any], ctx: Any) -> Any:
    return ToolResult(details={"headline": "remote says hi"}, text="remote says hi")


TEST_TOOLS = [
    ToolSpec(name="echo", description="Echo x back after an optional delay in seconds.", execute=_echo,
             input_schema={"type": "object", "properties": {"x": {}, "delay": {"type": "number"}},
                           "additionalProperties": False}),
    ToolSpec(name="fail", description="Always fails with the given message.", execute=_fail,
             input_schema={"type": "object", "properties": {"message": {"type": "string"}}}),
    ToolSpec(name="blob", description="Returns a page of size bytes of data.", execute=_blob,
             input_schema={"type": "object", "required": ["size"],
                           "properties": {"size": {"type": "integer"}, "page": {"type": "integer"},
                                          "delay": {"type": "number"}}}),
    ToolSpec(name="news", description="Network-derived headline.", execute=_news, network=True,
             output_schema={"type": "object", "properties": {"headline": {"type": "string"}},
                            "required": ["headline"], "additionalProperties": False}),
]
