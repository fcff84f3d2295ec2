"""Waiting for a condition with a deadline: tests synchronise on state they can observe, never on a guessed sleep."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast

import anyio

T = TypeVar("T")

#: Long enough for a loaded machine; a condition that holds returns as soon as it is seen.
DEFAULT_TIMEOUT_S = 15.0
_INTERVAL_S = 0.01


def poll_until(probe: Callable[[], T], what: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> T:
    """Call ``probe`` until it returns something truthy and return that; fail naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout_s} s (last probe: {value!r})")
        time.sleep(_INTERVAL_S)


async def apoll_until(
    probe: Callable[[], T] | Callable[[], Awaitable[T]], what: str, timeout_s: float = DEFAULT_TIMEOUT_S
) -> T:
    """``poll_until`` for async tests: the event loop keeps running between probes, and a probe may be
    a coroutine function (one that asks a server, say)."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = probe()
        if inspect.isawaitable(result):
            result = await result
        value = cast(T, result)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout_s} s (last probe: {value!r})")
        await anyio.sleep(_INTERVAL_S)
