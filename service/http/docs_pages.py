"""``/docs`` (Swagger UI) served from the files of an installed package, so it works offline.

FastAPI's own page loads Swagger UI from a CDN, which leaves ``/docs`` blank on a machine without
internet.  ``fastapi-offline`` ships the Swagger UI files in its wheel and serves them from
``DOCS_STATIC_URL``.  ReDoc is not offered: its standalone bundle still fetches its logo from a CDN.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

DOCS_STATIC_URL = "/docs/static"


def app_with_offline_docs(**kwargs: Any) -> FastAPI:
    """``FastAPI(**kwargs)`` whose ``/docs`` page loads its scripts and styles from this server only."""
    return FastAPIOffline(static_url=DOCS_STATIC_URL, redoc_url=None, **kwargs)
