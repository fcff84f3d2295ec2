"""A real `codemode serve` and real `codemode mcp` processes, reached with the official SDK's MCP client.

The service hosts the shipping example plugin and the MCP test server (stdio, as `docs`).  Four keys:
`alpha` sees everything; `beta`'s policy denies `quote_shipping` and every `docs` tool; `gamma` sees
everything but `quote_shipping` and `MCP.docs.add` wait for a person's approval; `delta` is `gamma` whose
model may answer approvals through `wait` (``mcp_model_approvals``).  A tenant may keep 4 MCP sessions
(2025-11-25 clients) open at once.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.mcp.conftest import SERVER_SCRIPT
from tests.support.live_server import ROOT, codemode_serve

ALPHA = "ck_mcp_alpha_0123456789"
BETA = "ck_mcp_beta_0123456789"
GAMMA = "ck_mcp_gamma_0123456789"
DELTA = "ck_mcp_delta_0123456789"

CONFIG = f"""
[tools]
plugins = ["service.demo.shipping"]

[tenants]
mcp_sessions_per_tenant = 4

[mcp.servers.docs]
command = {sys.executable!r}
args = [{SERVER_SCRIPT!r}, "stdio"]

[[api_keys]]
key = "{ALPHA}"
tenant = "alpha"

[[api_keys]]
key = "{BETA}"
tenant = "beta"
tools = {{ deny = ["quote_shipping", "mcp:docs"] }}

[[api_keys]]
key = "{GAMMA}"
tenant = "gamma"
tools = {{ approve = ["quote_shipping", "mcp:docs/add", "mcp:docs/echo"] }}

[[api_keys]]
key = "{DELTA}"
tenant = "delta"
tools = {{ approve = ["quote_shipping", "mcp:docs/add", "mcp:docs/echo"] }}
mcp_model_approvals = true
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcpcfg") / "codemode.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`codemode serve` with the config above on a loopback port."""
    with codemode_serve(tmp_path_factory.mktemp("mcpserve"), config=CONFIG) as base:
        yield base


@asynccontextmanager
async def http_client(base_url: str, key: str | None, **options: Any) -> AsyncIterator[Client]:
    """The SDK's client on `/mcp`, sending `key` as a Bearer token (none when None); ``options`` are the
    Client's own (``elicitation_callback``, ``mode``)."""
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(base_url + "/mcp", http_client=http), **options) as client:
            yield client


def stdio_parameters(config_file: Path, data_dir: Path, key: str | None) -> StdioServerParameters:
    """`codemode mcp --config FILE` as a desktop client would launch it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    env.update({"PYTHONPATH": str(ROOT), "CODEMODE_DATA_DIR": str(data_dir), "CODEMODE_WORKERS": "1"})
    if key is not None:
        env["CODEMODE_API_KEY"] = key
    return StdioServerParameters(
        command=sys.executable, args=["-m", "service.cli", "mcp", "--config", str(config_file)], env=env, cwd=str(ROOT)
    )


@asynccontextmanager
async def stdio_session(config_file: Path, data_dir: Path, key: str | None, **options: Any) -> AsyncIterator[Client]:
    async with Client(stdio_client(stdio_parameters(config_file, data_dir, key)), **options) as client:
        yield client


@asynccontextmanager
async def connected(
    request: pytest.FixtureRequest,
    config_file: Path,
    tmp_path_factory: pytest.TempPathFactory,
    key: str,
    **options: Any,
) -> AsyncIterator[Client]:
    """A client of ``key`` on the transport a fixture's parameter names: ``http`` (the module's `codemode
    serve`) or ``stdio`` (a `codemode mcp` of its own); a ``-legacy`` suffix asks for the 2025-11-25 handshake.
    ``options`` are the Client's own."""
    transport, _, era = str(request.param).partition("-")
    if era == "legacy":
        options["mode"] = "legacy"
    if transport == "http":
        async with http_client(request.getfixturevalue("base_url"), key, **options) as client:
            yield client
    else:
        async with stdio_session(config_file, tmp_path_factory.mktemp("stdio"), key, **options) as client:
            yield client
