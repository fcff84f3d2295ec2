"""The composition root of the served application: the HTTP API with the MCP facade at ``/mcp``.

``create_app(settings)`` builds the services once, the facade over them, and the HTTP app that
mounts it; neither face imports the other.  ``uvicorn --factory service.app:app_factory`` serves it.
"""

from __future__ import annotations

from fastapi import FastAPI

from service.assembly import Components, build_components
from service.http.app import http_app, mcp_body_cap
from service.http.request_gate import api_key_of
from service.mcp_server.facade import McpFacade
from service.mcp_server.sdk_server import HttpEndpoint
from service.settings import Settings
from service.settings_load import load_settings


def create_app(settings: Settings | None = None, services: Components | None = None) -> FastAPI:
    """The served app for ``settings`` (read from the environment and config file when not given)."""
    settings = settings or load_settings()
    svc = services or build_components(settings)
    # The request gate resolved the caller's key before the SDK reads the request.
    mcp = HttpEndpoint(
        McpFacade(svc),
        api_key_of,
        max_body_bytes=mcp_body_cap(settings),
        sessions_per_tenant=settings.mcp_sessions_per_tenant,
        session_idle_seconds=settings.mcp_session_idle_seconds,
    )
    return http_app(settings, svc, mcp)


def app_factory() -> FastAPI:
    """Entry for ``uvicorn --factory service.app:app_factory``."""
    return create_app()
