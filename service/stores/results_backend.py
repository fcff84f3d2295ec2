"""The saved-results contract the service calls, and the in-process store behind it.

One process keeps saved results in memory (``ResultsStore``); replicas sharing a ``redis://``
store keep them in Redis (``service.stores.redis_results``) so a cell on any replica loads what a
cell on another saved.  Both answer through ``ResultsBackend``: asynchronous, because Redis is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .saved_results import ResultScope, ResultsStore

__all__ = ["LocalResults", "ResultsBackend", "ResultsLimits"]


@dataclass(frozen=True)
class ResultsLimits:
    """Caps every saved-results store enforces (entries per run; bytes per tenant and in all)."""

    max_entries: int = 64
    tenant_max_bytes: int | None = None
    max_bytes: int | None = None


class ResultsBackend(Protocol):
    """Run-scoped saved results (see ``ResultsStore`` for the rules both backends keep).

    Raises ``ResultsError`` subclasses for the guest's mistakes and limits, and
    ``StoreUnavailableError`` when a shared backend cannot be reached.
    """

    async def save(
        self, scope: ResultScope, json_text: str, byte_allowance: int, ttl_seconds: float, *, network: bool = False
    ) -> str: ...

    async def load_entry(self, scope: ResultScope, result_id: object) -> tuple[str, bool]: ...

    async def delete(self, scope: ResultScope, result_id: object) -> bool: ...

    async def end_run(self, scope: ResultScope) -> int: ...

    async def usage(self, scope: ResultScope) -> tuple[int, int]: ...

    async def expire(self) -> int: ...

    async def close(self) -> None: ...


class LocalResults:
    """``ResultsBackend`` over the in-memory store of this process (nothing in it awaits)."""

    def __init__(self, limits: ResultsLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = ResultsStore(
            limits.max_entries, clock, tenant_max_bytes=limits.tenant_max_bytes, max_bytes=limits.max_bytes
        )

    async def save(
        self, scope: ResultScope, json_text: str, byte_allowance: int, ttl_seconds: float, *, network: bool = False
    ) -> str:
        return self.store.save(scope, json_text, byte_allowance, ttl_seconds, network=network)

    async def load_entry(self, scope: ResultScope, result_id: object) -> tuple[str, bool]:
        return self.store.load_entry(scope, result_id)

    async def delete(self, scope: ResultScope, result_id: object) -> bool:
        return self.store.delete(scope, result_id)

    async def end_run(self, scope: ResultScope) -> int:
        return self.store.end_run(scope)

    async def usage(self, scope: ResultScope) -> tuple[int, int]:
        return self.store.usage(scope)

    async def expire(self) -> int:
        return self.store.expire()

    async def close(self) -> None:
        return None
