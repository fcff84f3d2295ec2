"""``create_app(settings)``: the FastAPI application with its lifespan and error handlers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from service import __version__
from service.assembly import Components, build_components
from service.metrics import LoopLagMonitor
from service.playground.route import playground_router
from service.settings import Settings, load_settings

from .body_limits import BodyCaps
from .docs_pages import app_with_offline_docs
from .error_responses import install_error_handlers
from .events_route import events_router
from .replica_routing import ReplicaRouting
from .request_gate import MCP_PATH, RequestGate, api_key_of
from .request_json import BodyDecoder
from .routes import router
from .tool_description_route import tool_description_router

DESCRIPTION = """Runs agent-written JavaScript **cells** in fresh QuickJS guests inside supervised worker
processes. `POST /v1/exec` starts a cell; a cell that is still blocked on host work when its
`timeout_ms` runs out answers `waiting`, and `POST /v1/cells/{id}/wait` resumes it.  Every cell
outcome is HTTP 200 with one envelope; service errors share one error body."""


def create_app(settings: Settings | None = None, services: Components | None = None) -> FastAPI:
    """Build the app; the lifespan starts and stops the worker pool and the stores."""
    settings = settings or load_settings()
    svc = services or build_components(settings)

    lag = LoopLagMonitor(svc.metrics)
    decoder = BodyDecoder(svc.sandbox.options)
    caps = BodyCaps(settings)
    mcp = mcp_endpoint(svc, caps.cap_for(MCP_PATH))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        lag.start()
        try:
            await svc.start()
            try:
                # The MCP sessions' task group lives inside the service's lifetime.
                async with mcp.run():
                    yield
            finally:
                await svc.close()
        finally:
            decoder.close()
            await lag.stop()

    app = app_with_offline_docs(title="codemode", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    app.state.services = svc
    routes = [*router.routes, *events_router.routes, *tool_description_router.routes, *playground_router.routes]
    install_error_handlers(app, routes)
    app.include_router(router)
    app.include_router(events_router)
    app.include_router(tool_description_router)
    app.include_router(playground_router)
    app.add_route(MCP_PATH, mcp, include_in_schema=False)
    if svc.replica is not None:
        # Added first, so it runs inside the gate: only authenticated requests with capped bodies are relayed.
        app.add_middleware(ReplicaRouting, replica=svc.replica)
    app.add_middleware(
        RequestGate, keys=svc.keys, caps=caps, decoder=decoder, metrics_require_key=settings.metrics_require_key
    )
    return app


def mcp_endpoint(svc: Components, max_body_bytes: int) -> Any:
    """The MCP facade at ``/mcp``: the SDK's Streamable HTTP transport over the same services and keys."""
    from service.mcp_server.facade import McpFacade
    from service.mcp_server.sdk_server import HttpEndpoint

    # The request gate resolved the caller's key before the SDK reads the request.
    return HttpEndpoint(
        McpFacade(svc),
        lambda request: api_key_of(request),
        max_body_bytes=max_body_bytes,
    )


def app_factory() -> Any:
    """Entry for ``uvicorn --factory service.http.app:app_factory``."""
    return create_app()
