"""``create_app(settings)``: the FastAPI application with its lifespan and error handlers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from . import __version__
from .api import router
from .body_limits import BodyLimitMiddleware
from .errors import install_error_handlers
from .host import Services, build_services
from .settings import Settings, load_settings

DESCRIPTION = """Runs agent-written JavaScript **cells** in fresh QuickJS guests inside supervised worker
processes. `POST /v1/exec` starts a cell; a cell that is still blocked on host work when its
`timeout_ms` runs out answers `waiting`, and `POST /v1/cells/{id}/wait` resumes it.  Every cell
outcome is HTTP 200 with one envelope; service errors share one error body."""


def create_app(settings: Settings | None = None, services: Services | None = None) -> FastAPI:
    """Build the app; the lifespan starts and stops the worker pool and the stores."""
    settings = settings or load_settings()
    svc = services or build_services(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await svc.start()
        try:
            yield
        finally:
            await svc.close()

    app = FastAPI(title="codemode", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    app.state.services = svc
    install_error_handlers(app)
    app.include_router(router)

    wait_cap = settings.max_snapshot_bytes + 1024 * 1024

    def cap_for(path: str) -> int | None:
        if path == "/v1/exec":
            return settings.max_exec_body_bytes
        if path.endswith("/wait"):
            return wait_cap
        return 1024 * 1024

    app.add_middleware(BodyLimitMiddleware, cap_for=cap_for)
    return app


def app_factory() -> Any:
    """Entry for ``uvicorn --factory service.app:app_factory``."""
    return create_app()
