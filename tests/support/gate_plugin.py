"""A plugin for tests that drive a real `codemode serve` process: ``hold`` keeps its cell's leg running
until the test opens a gate (creates a file), so a test knows a leg is running, and ends it, by events.

``hold({gate})`` creates ``<gate>.started`` when called, then waits (polling, 20 ms) until ``<gate>``
exists, and returns ``{"opened": true}``.  The gate's directory is the test's own temporary one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from service.tools import ToolContext, ToolRegistry

#: Longer than any test waits: only the gate (or the cell's end) ends a call.
HOLD_TIMEOUT_S = 120


def started(gate: Path) -> Path:
    return gate.with_name(gate.name + ".started")


async def _hold(call_id: str, params: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    gate = Path(params["gate"])
    started(gate).touch()
    while not gate.exists():
        await asyncio.sleep(0.02)
    return {"opened": True}


def register(registry: ToolRegistry) -> None:
    registry.add_tool(
        name="hold",
        description="Wait until the file `gate` exists (a test opens it).",
        execute=_hold,
        input_schema={"type": "object", "required": ["gate"], "properties": {"gate": {"type": "string"}}},
        timeout_s=HOLD_TIMEOUT_S,
    )
