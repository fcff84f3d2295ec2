"""The event loop the in-process figures run on: the one the service serves on.

``python -m service.cli serve`` runs under uvicorn, which picks uvloop when it is installed (it is a
dependency on every platform but Windows).  The in-process figures and the pipe floor measured beside
them therefore run on uvloop too, so a figure and its floor come from the loop production uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: what ``run`` uses here."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)`` on the service's event loop."""
    if loop_name() == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)
