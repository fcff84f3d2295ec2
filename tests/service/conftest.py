"""Fixtures shared by the service tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.mcp.conftest import HttpServer, free_port


@pytest.fixture(scope="module")
def web_server() -> Iterator[HttpServer]:
    """The MCP test server's Streamable HTTP variant on a free loopback port (tests may stop and restart it)."""
    server = HttpServer(free_port())
    server.start()
    yield server
    server.stop()
