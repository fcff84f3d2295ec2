"""Fixtures for the tool system: tool factories and a call context."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from service.tools.plugin import ToolContext, ToolSpec


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ctx() -> ToolContext:
    return ToolContext(tenant="acme", session_id="s1", run_id="r1", cell_id="cell_1", call_id="call_1")


@pytest.fixture
def make_tool() -> Callable[..., ToolSpec]:
    """Build a ToolSpec whose execute records its calls in `spec.calls` (a list on the function)."""

    def factory(
        name: str,
        *,
        result: Any = None,
        plugin_id: str | None = "demo",
        source: str = "plugin",
        **fields: Any,
    ) -> ToolSpec:
        calls: list[Any] = []

        async def execute(call_id: str, params: dict, ctx: ToolContext) -> Any:
            calls.append(params)
            return result(params) if callable(result) else result

        execute.calls = calls  # type: ignore[attr-defined]
        fields.setdefault("description", f"{name} tool")
        fields.setdefault("input_schema", {"type": "object"})
        return ToolSpec(name=name, execute=execute, plugin_id=plugin_id, source=source, **fields)

    return factory
