"""``codemode mcp``: the whole service in this process, serving MCP on stdin/stdout (logs on stderr).

A desktop MCP client launches it as a command.  No HTTP server runs.  The caller is the tenant of the
API key in ``CODEMODE_API_KEY`` (its tool policy applies), or, without one, the local operator: the
``local`` tenant under the base tool policy, as for a server without keys.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable

from service.assembly import build_components
from service.auth import LOCAL_KEY
from service.settings import API_KEY_VARIABLE, ApiKey, Settings

from .facade import McpFacade
from .sdk_server import serve_stdio


async def run_stdio(settings: Settings) -> None:
    """Start the services, serve one MCP client until stdin closes, stop the services.

    Raises ServiceError for a configuration that cannot start (unknown key, store down).
    """
    # stdout carries the protocol: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s: %(name)s: %(message)s")
    logging.getLogger("codemode").setLevel(settings.log_level.upper())
    svc = build_components(settings)
    key = stdio_key(svc.keys.resolve, os.environ.get(API_KEY_VARIABLE))
    # A desktop client waits for ``initialize`` before it shows the server: it is answered at once, while the
    # workers start; a tool call waits for the start (or is answered its failure).
    started = asyncio.ensure_future(svc.start())
    try:
        await serve_stdio(McpFacade(svc, started), key)
    finally:
        await asyncio.wait([started])  # a client that leaves at once still gets a whole start, then a stop
        await svc.close()
    started.result()  # a start that failed is the command's failure too: its message and exit status


def stdio_key(resolve: Callable[[str | None], ApiKey], presented: str | None) -> ApiKey:
    """The key named by ``CODEMODE_API_KEY`` (resolved like a Bearer header), else the local operator."""
    if presented:
        return resolve(f"Bearer {presented}")
    return LOCAL_KEY
