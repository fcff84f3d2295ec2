"""The plugin ``python -m bench peers`` serves codemode with: ``nop``, an async no-op tool answering 1,
the host function every peer's guest calls too (``bench/peer_workloads.py``)."""

from __future__ import annotations

from typing import Any

from service.tools import ToolRegistry, ToolSpec


async def _nop(call_id: str, params: dict[str, Any], ctx: Any) -> int:
    return 1


def register(registry: ToolRegistry) -> None:
    schema = {"type": "object", "properties": {"i": {"type": "integer"}}, "additionalProperties": True}
    registry.add_tool(ToolSpec(name="nop", description="Answers 1.", execute=_nop, input_schema=schema))
