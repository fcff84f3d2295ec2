"""``/healthz``, ``/readyz`` and ``/metrics``: what an operator's probes and scrapers read."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import Query
from fastapi.responses import PlainTextResponse

from service.api.schemas import ERROR_RESPONSES, Health, Readiness
from service.drain import Drain
from service.metrics import Metrics
from service.runtime.registry import CellRegistry
from service.runtime.workers.pool import WorkerPool
from service.runtime.workers.sandbox import SandboxStatus
from service.stores import SessionStore
from service.stores.errors import StoreError

from .responses import JSONBytes
from .route_group import RouteGroup, example, route

#: How long /readyz waits for the session store's answer before it reports the store unavailable.
READY_STORE_SECONDS = 0.5

HEALTH_EXAMPLE = {"status": "ok"}
READY_EXAMPLE = {
    "status": "ok",
    "checks": {"workers": "ok", "store": "ok"},
    "sandbox": {
        "mode": "auto",
        "layers": {
            "fds": True,
            "network": True,
            "capabilities": True,
            "uid": True,
            "not_dumpable": True,
            "no_new_privs": True,
            "landlock": True,
            "rlimits": True,
            "seccomp": True,
        },
        "missing": {},
    },
}


class OpsRoutes(RouteGroup):
    """Liveness, readiness (workers, session store, sandbox layers) and the Prometheus text."""

    def __init__(
        self,
        pool: WorkerPool,
        cells: CellRegistry,
        store: SessionStore | None,
        sandbox: SandboxStatus,
        metrics: Metrics,
        drain: Drain | None = None,
    ) -> None:
        self.pool = pool
        self.cells = cells
        self.store = store
        self.sandbox = sandbox
        self.meter = metrics
        self.drain = drain

    @route(
        "GET",
        "/healthz",
        response_model=Health,
        tags=("ops",),
        summary="Liveness",
        responses={200: example(HEALTH_EXAMPLE)},
        operation_id="get_health",
    )
    async def healthz(self) -> dict[str, str]:
        """The process answers."""
        return {"status": "ok"}

    @route(
        "GET",
        "/readyz",
        tags=("ops",),
        summary="Readiness",
        response_model=Readiness,
        # Not ready is the same body with status "unavailable", not an error body.
        responses={200: example(READY_EXAMPLE), 503: {"model": Readiness, "description": "a part is not ready"}},
        operation_id="get_readiness",
    )
    async def readyz(
        self,
        store: Annotated[
            Literal["required", "optional"],
            Query(
                description="optional: the store's state is reported but does not make the answer 503 (for a "
                "Kubernetes Service, which would otherwise drop every replica at once while a shared store is down)"
            ),
        ] = "required",
    ) -> JSONBytes:
        """The worker pool has workers, the session store answers and the service is not shutting down (draining);
        ``sandbox``: the workers' confinement layers."""
        checks = await self.readiness()
        ok = all(v == "ok" for part, v in checks.items() if part != "store" or store == "required")
        return JSONBytes(
            {"status": "ok" if ok else "unavailable", "checks": checks, "sandbox": self.sandbox.as_json()},
            status_code=200 if ok else 503,
        )

    @route(
        "GET",
        "/metrics",
        tags=("ops",),
        summary="Prometheus metrics",
        response_class=PlainTextResponse,
        responses={401: ERROR_RESPONSES[401]},
        operation_id="get_metrics",
    )
    async def metrics(self) -> PlainTextResponse:
        """Prometheus text exposition (with ``metrics_require_key``, only for a valid API key)."""
        body, content_type = self.meter.render(self.cells, self.pool)
        return PlainTextResponse(body, media_type=content_type)

    async def readiness(self) -> dict[str, str]:
        """Each part's state: ``ok`` or why it is not ready (the store's answer is awaited briefly)."""
        checks = {"workers": "ok" if self.pool.ready else "no worker available"}
        if self.drain is not None and self.drain.state != "serving":
            checks["drain"] = f"{self.drain.state}: shutting down, no new cells"  # out of rotation
        if self.store is not None:
            try:
                async with asyncio.timeout(READY_STORE_SECONDS):  # /readyz answers within a second
                    await self.store.ping()
                checks["store"] = "ok"
            except TimeoutError:
                checks["store"] = f"unavailable: no answer within {READY_STORE_SECONDS} s"
            except StoreError as exc:
                checks["store"] = f"unavailable: {exc}"
        return checks
