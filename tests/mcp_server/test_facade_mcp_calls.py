"""MCP tool calls made by cells that the facade runs are tool calls too: the official SDK client on `/mcp`
of a real `codemode serve`, whose cells call the MCP test server (`docs`)."""

from __future__ import annotations

import pytest

from tests.mcp_server.conftest import ALPHA, http_client

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

THIRTY_TICKS = """
const out = [];
for (let i = 0; i < 30; i++) {
  try { await MCP.docs.echo({text: "tick"}); out.push("ok"); } catch (e) { out.push(e.code); }
}
return out;
"""


async def test_thirty_identical_mcp_calls_through_the_facade_stop_at_the_loop_guard(base_url: str) -> None:
    """exec of a cell making 30 identical `MCP.docs.echo` calls: three run, the rest are refused by the loop guard;
    all 30 spend the cell's call budget, as native calls do."""
    async with http_client(base_url, ALPHA) as client:
        result = await client.call_tool("exec", {"code": THIRTY_TICKS, "timeout_ms": 30000})
    envelope = result.structured_content
    assert envelope is not None and envelope["status"] == "completed", envelope
    assert envelope["value"] == ["ok"] * 3 + ["loop_guard"] * 27
    assert envelope["telemetry"]["call_count"] == 30
