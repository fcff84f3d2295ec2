"""Real MCP servers for the hub tests: the SDK-built test server over stdio and Streamable HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from service.mcp.hub import McpHub
from service.settings_mcp import McpServerConfig
from tests.support.live_server import listening, spawn
from tests.support.ports import free_port

SERVER_SCRIPT = str(Path(__file__).parent / "servers" / "test_server.py")
HTTP_TOKEN = "test-token-not-a-secret"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


EVERYTHING = Path(__file__).resolve().parents[1] / "node" / "node_modules" / ".bin" / "mcp-server-everything"


class HttpServer:
    """An MCP server over Streamable HTTP as a child process on a loopback port (by default the test
    server's HTTP variant); ``restart`` kills it and starts it again on the same port."""

    def __init__(self, port: int, argv: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.argv = argv or [sys.executable, SERVER_SCRIPT, "http", str(port), HTTP_TOKEN]
        self.env = None if env is None else {**os.environ, **env}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = spawn(self.argv, listening(self.port), "test MCP HTTP server", env=self.env)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServer]:
    server = HttpServer(free_port())
    server.start()
    yield server
    server.stop()


def everything_http(port: int) -> HttpServer:
    """`@modelcontextprotocol/server-everything` over Streamable HTTP on ``port``; a missing binary fails."""
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing; run `npm ci --prefix tests/node`")
    return HttpServer(port, [str(EVERYTHING), "streamableHttp"], {"PORT": str(port)})


def stdio_children() -> list[int]:
    """Pids of this process's children running the test server over stdio."""
    pids: list[int] = []
    for children in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        for pid in children.read_text().split():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"stdio" in cmdline and any(part.endswith(b"test_server.py") for part in cmdline):
                pids.append(int(pid))
    return pids


def stdio_config(name: str = "tests", **overrides: object) -> McpServerConfig:
    """A stdio config that runs the test server with this interpreter."""
    fields: dict[str, object] = {
        "command": sys.executable,
        "args": (SERVER_SCRIPT, "stdio"),
        "env": {"CODEMODE_TEST_SECRET": "from-env"},
    }
    fields.update(overrides)
    return McpServerConfig(name=name, **fields)  # type: ignore[arg-type]


def http_config(server: HttpServer, name: str = "tests", **overrides: object) -> McpServerConfig:
    """An HTTP config for ``server`` carrying the header the server requires."""
    fields: dict[str, object] = {"url": server.url, "headers": {"X-Test-Token": HTTP_TOKEN}}
    fields.update(overrides)
    return McpServerConfig(name=name, **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=["stdio", "http"])
async def hub(request: pytest.FixtureRequest, anyio_backend: str) -> AsyncIterator[McpHub]:
    """One hub per transport per module, connected to a single server named ``tests``."""
    if request.param == "stdio":
        config = stdio_config()
    else:
        config = http_config(request.getfixturevalue("http_server"))
    hub = McpHub([config])
    await hub.start()
    yield hub
    await hub.close()
