"""The service tests' tools (tests/support/tools.py) as a plugin, for a real `codemode serve`."""

from __future__ import annotations

from service.tools import ToolRegistry
from tests.support.tools import TEST_TOOLS


def register(registry: ToolRegistry) -> None:
    for spec in TEST_TOOLS:
        registry.add_tool(spec)
