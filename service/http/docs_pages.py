"""``/docs`` (Swagger UI) served from the files of an installed package, so it works offline.

FastAPI's own page loads Swagger UI from a CDN, which leaves ``/docs`` blank on a machine without
internet.  ``fastapi-offline`` ships the Swagger UI files in its wheel and serves them from
``DOCS_STATIC_URL``.  ReDoc is not offered: its standalone bundle still fetches its logo from a CDN.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI
from fastapi.telemetry import TelemetryConfig
from fastapi_offline import FastAPIOffline

DOCS_STATIC_URL = "/docs/static"
#: FastAPI's own OpenTelemetry support, off: codemode's spans are its own (docs/guide/traces.md), and
#: left on it would ask the global providers on every request whether anyone configured them.
NO_FRAMEWORK_TELEMETRY: TelemetryConfig = {"tracing": False, "metrics": False, "logs": False, "auto_configure": False}


def app_with_offline_docs(
    *,
    title: str,
    version: str,
    description: str,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]],
) -> FastAPI:
    """A ``FastAPI`` app whose ``/docs`` page loads its scripts and styles from this server only."""
    return FastAPIOffline(
        static_url=DOCS_STATIC_URL,
        redoc_url=None,
        title=title,
        version=version,
        description=description,
        lifespan=lifespan,
        telemetry=NO_FRAMEWORK_TELEMETRY,
    )
