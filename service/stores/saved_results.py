"""In-memory, run-scoped store behind ``results.save/load/delete`` and automatic references.

Besides the per-run limits (entries, byte allowance), every tenant has a byte quota and all
tenants together a global one, so fresh ``run_id``s cannot grow the service's memory without
bound.  Quotas charge each entry its UTF-8 size plus ``ENTRY_OVERHEAD`` (the bookkeeping a tiny
entry still costs), and count entries until the periodic ``expire()`` drops them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from .errors import ResultsAllowanceError, ResultsCapacityError, ResultsQuotaError, ResultUnavailableError

__all__ = [
    "ENTRY_OVERHEAD",
    "ResultScope",
    "ResultsStore",
    "allowance_error",
    "capacity_error",
    "tenant_quota_error",
    "total_quota_error",
]

#: Bytes each saved entry is charged on top of its JSON text (id, scope, dict slots).
ENTRY_OVERHEAD = 256


def capacity_error(max_entries: int) -> ResultsCapacityError:
    return ResultsCapacityError(
        f"result store is full: at most {max_entries} saved results per run; "
        "delete references you no longer need with results.delete(id)"
    )


def allowance_error(size: int, used: int, allowance: int) -> ResultsAllowanceError:
    return ResultsAllowanceError(
        f"saving {size} bytes would exceed this run's saved-results allowance "
        f"({used} of {allowance} bytes used); save a narrower value or delete references"
    )


def tenant_quota_error(used: int, limit: int) -> ResultsQuotaError:
    return ResultsQuotaError(
        f"saved-results quota reached: this tenant's saved results hold {used} of {limit} bytes "
        "(tenant_results_bytes); end finished runs (DELETE /v1/sessions/{session_id}/runs/{run_id}) "
        "or delete references to make room"
    )


def total_quota_error(used: int, limit: int) -> ResultsQuotaError:
    return ResultsQuotaError(
        f"saved-results capacity of this service reached ({used} of {limit} bytes, results_max_bytes); "
        "save a narrower value or retry after older results expire"
    )


class ResultScope(NamedTuple):
    """Who may see a saved result: one run of one session of one tenant."""

    tenant: str
    session_id: str  # "" when the cell has no session
    run_id: str


@dataclass(frozen=True, slots=True)
class _Entry:
    json_text: str
    size: int
    expires_at: float
    network: bool = False  # saved from network-derived data: loading it taints the loading cell


class ResultsStore:
    """Saved results grouped by scope; old entries are never evicted to make room.

    Not thread-safe: use it from the event loop only. Call ``expire()`` periodically so
    abandoned runs do not hold memory until they are ended.
    """

    def __init__(
        self,
        max_entries: int = 64,
        clock: Callable[[], float] = time.monotonic,
        *,
        tenant_max_bytes: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._clock = clock
        self._tenant_max_bytes = tenant_max_bytes
        self._max_bytes = max_bytes
        self._runs: dict[ResultScope, dict[str, _Entry]] = {}
        self._tenant_bytes: dict[str, int] = {}  # charged bytes (size + overhead) per tenant
        self._total_bytes = 0

    def save(
        self, scope: ResultScope, json_text: str, byte_allowance: int, ttl_seconds: float, *, network: bool = False
    ) -> str:
        """Keep ``json_text`` for the run and return its id ``result_<uuid4>``."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        scope = ResultScope(*scope)
        size = len(json_text.encode("utf-8"))
        entries = self._live(scope)
        count = len(entries) if entries else 0
        used = sum(entry.size for entry in entries.values()) if entries else 0
        if count >= self._max_entries:
            raise capacity_error(self._max_entries)
        if used + size > byte_allowance:
            raise allowance_error(size, used, byte_allowance)
        self._check_quotas(scope.tenant, size + ENTRY_OVERHEAD)
        result_id = f"result_{uuid.uuid4()}"
        self._runs.setdefault(scope, {})[result_id] = _Entry(json_text, size, self._clock() + ttl_seconds, network)
        self._charge(scope.tenant, size + ENTRY_OVERHEAD)
        return result_id

    def tenant_bytes(self, tenant: str) -> int:
        """Charged bytes the tenant's saved results hold (until the next ``expire()``)."""
        return self._tenant_bytes.get(tenant, 0)

    @property
    def total_bytes(self) -> int:
        return self._total_bytes

    def _check_quotas(self, tenant: str, charge: int) -> None:
        used = self._tenant_bytes.get(tenant, 0)
        if self._tenant_max_bytes is not None and used + charge > self._tenant_max_bytes:
            raise tenant_quota_error(used, self._tenant_max_bytes)
        if self._max_bytes is not None and self._total_bytes + charge > self._max_bytes:
            raise total_quota_error(self._total_bytes, self._max_bytes)

    def _charge(self, tenant: str, delta: int) -> None:
        held = self._tenant_bytes.get(tenant, 0) + delta
        if held > 0:
            self._tenant_bytes[tenant] = held
        else:
            self._tenant_bytes.pop(tenant, None)
        self._total_bytes += delta

    def _drop(self, scope: ResultScope, entries: dict[str, _Entry], result_id: str) -> _Entry:
        entry = entries.pop(result_id)
        self._charge(scope.tenant, -(entry.size + ENTRY_OVERHEAD))
        return entry

    def load(self, scope: ResultScope, result_id: object) -> str:
        """Return the saved JSON text, or raise ResultUnavailableError."""
        return self.load_entry(scope, result_id)[0]

    def load_entry(self, scope: ResultScope, result_id: object) -> tuple[str, bool]:
        """Return ``(json_text, network)``: the saved text and whether it came from network data."""
        entries = self._live(ResultScope(*scope))
        entry = entries.get(result_id) if entries and isinstance(result_id, str) else None
        if entry is None:
            raise ResultUnavailableError()
        return entry.json_text, entry.network

    def delete(self, scope: ResultScope, result_id: object) -> bool:
        """Forget one saved result; return whether this scope had it."""
        scope = ResultScope(*scope)
        entries = self._live(scope)
        if not entries or not isinstance(result_id, str) or result_id not in entries:
            return False
        self._drop(scope, entries, result_id)
        if not entries:
            del self._runs[scope]
        return True

    def end_run(self, scope: ResultScope) -> int:
        """Drop every saved result of the run; return how many were still live."""
        scope = ResultScope(*scope)
        entries = self._live(scope) or {}
        self._runs.pop(scope, None)
        live = len(entries)
        for result_id in list(entries):
            self._drop(scope, entries, result_id)
        return live

    def expire(self) -> int:
        """Drop every entry past its TTL; return how many were dropped."""
        dropped = 0
        for scope in list(self._runs):
            before = len(self._runs[scope])
            remaining = self._live(scope)
            dropped += before - (len(remaining) if remaining else 0)
        return dropped

    def usage(self, scope: ResultScope) -> tuple[int, int]:
        """Return ``(count, bytes)`` of the run's live saved results."""
        entries = self._live(ResultScope(*scope))
        if not entries:
            return 0, 0
        return len(entries), sum(entry.size for entry in entries.values())

    def _live(self, scope: ResultScope) -> dict[str, _Entry] | None:
        """Return the scope's entries after dropping expired ones (None if it has none)."""
        entries = self._runs.get(scope)
        if entries is None:
            return None
        now = self._clock()
        for result_id in [rid for rid, entry in entries.items() if entry.expires_at <= now]:
            self._drop(scope, entries, result_id)
        if not entries:
            del self._runs[scope]
            return None
        return entries
