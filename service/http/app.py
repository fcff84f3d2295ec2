"""``http_app(settings, svc)``: the FastAPI application with its lifespan and error handlers.

Endpoints of other faces (the MCP facade at ``/mcp``) are handed in by the composition root
(``service.app``), so this package knows nothing of them beyond the ``Mounted`` shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from service import __version__
from service.assembly import Components
from service.metrics import LoopLagMonitor
from service.playground.route import playground_router
from service.settings import Settings

from .body_limits import BodyCaps
from .cell_app import CellApp
from .cell_routes import CellRoutes
from .docs_pages import app_with_offline_docs
from .error_responses import install_error_handlers
from .events_route import EventRoutes
from .monty_route import MontyRoute
from .ops_routes import OpsRoutes
from .replica_routing import ReplicaRouting
from .request_gate import MCP_PATH, RequestGate
from .request_json import BodyDecoder
from .route_group import RouteGroup
from .session_routes import SessionRoutes
from .tool_description_route import ToolDescriptionRoutes
from .tool_routes import ToolRoutes

DESCRIPTION = """Runs agent-written **cells** — JavaScript (TypeScript accepted, its types stripped) in fresh
QuickJS guests, or Python on Monty (`"language": "python"`) — inside supervised worker processes. `POST /v1/exec` starts a cell; a cell that is still blocked on host work when its
`timeout_ms` runs out answers `waiting`, and `POST /v1/cells/{id}/wait` resumes it.  Every cell
outcome is HTTP 200 with one envelope; service errors share one error body."""


class Mounted(Protocol):
    """An ASGI endpoint served beside the API routes, whose ``run()`` is open while the service runs."""

    def run(self) -> AbstractAsyncContextManager[None]: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


def mcp_body_cap(settings: Settings) -> int:
    """The body cap of ``/mcp`` requests (the request gate enforces it; the endpoint is told it too)."""
    return BodyCaps(settings).cap_for(MCP_PATH)


def route_groups(settings: Settings, svc: Components, cells: CellRoutes) -> list[RouteGroup]:
    """The API's route groups, each built with the parts it uses (in the order they match)."""
    access = svc.access
    return [
        cells,
        ToolRoutes(svc.tools),
        SessionRoutes(svc.results, access.run_counters, access.failure_limits, svc.store),
        OpsRoutes(svc.pool, svc.cells, svc.store, svc.sandbox, svc.metrics, svc.drain),
        EventRoutes(svc.cells, settings.events_heartbeat_seconds),
        ToolDescriptionRoutes(settings, svc.tools),
    ]


def http_app(settings: Settings, svc: Components, mcp: Mounted | None = None) -> FastAPI:
    """The app over ``svc``; the lifespan starts and stops the services (and ``mcp``, at ``/mcp``)."""
    lag = LoopLagMonitor(svc.metrics)
    decoder = BodyDecoder(svc.helpers)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        lag.start()
        try:
            await svc.start()
            try:
                if mcp is None:
                    yield
                else:
                    # The MCP sessions' task group lives inside the service's lifetime.
                    async with mcp.run():
                        yield
            finally:
                await svc.close()
        finally:
            await lag.stop()

    app = app_with_offline_docs(title="codemode", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    app.state.services = svc  # for embedders and tests; no route reads it
    cells = CellRoutes(svc.cells, svc.tools, svc.tracing)
    routes = [route for group in route_groups(settings, svc, cells) for route in group.add_routes(app.router)]
    # Requests are matched against the routes in order: the API's first, then the framework's docs pages
    # (no path in common, so no answer changes; a hot request is not matched against four pages first).
    ours = {id(route) for route in routes}
    app.router.routes[:] = [*routes, *(route for route in app.router.routes if id(route) not in ours)]
    app.include_router(playground_router)
    app.router.routes.append(MontyRoute(settings, svc.keys, svc.tools, svc.cells).route())
    install_error_handlers(app, [*routes, *playground_router.routes])
    if mcp is not None:
        # Starlette serves an object that is not a function as a raw ASGI app; its annotation names only
        # request handlers.
        app.add_route(MCP_PATH, mcp, include_in_schema=False)  # type: ignore[arg-type]
    # Middleware added first runs innermost. The cell routes' own ASGI app answers their requests inside the
    # gate (and inside replica routing: a cell held elsewhere is relayed first); the rest reach FastAPI.
    app.add_middleware(CellApp, routes=cells)
    if svc.replica is not None:
        # Inside the gate: only authenticated requests with capped bodies are relayed.
        app.add_middleware(ReplicaRouting, replica=svc.replica, drain=svc.drain)
    app.add_middleware(
        RequestGate,
        keys=svc.keys,
        caps=BodyCaps(settings),
        decoder=decoder,
        metrics_require_key=settings.metrics_require_key,
    )
    return app
