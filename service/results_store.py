"""In-memory, run-scoped store behind ``results.save/load/delete`` and automatic references."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "ResultScope",
    "ResultUnavailableError",
    "ResultsAllowanceError",
    "ResultsCapacityError",
    "ResultsError",
    "ResultsStore",
]

_UNAVAILABLE = "saved result is unavailable or expired; fetch fresh data if needed"


class ResultsError(Exception):
    """Base of every results-store failure."""

    code = "results_error"


class ResultsCapacityError(ResultsError):
    """The run already holds the maximum number of saved results."""

    code = "results_capacity"


class ResultsAllowanceError(ResultsError):
    """Saving would exceed the run's byte allowance."""

    code = "results_allowance"


class ResultUnavailableError(ResultsError):
    """The id is unknown, expired, or belongs to another scope (indistinguishably)."""

    code = "result_unavailable"

    def __init__(self, message: str = _UNAVAILABLE) -> None:
        super().__init__(message)


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

    def __init__(self, max_entries: int = 64, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._clock = clock
        self._runs: dict[ResultScope, dict[str, _Entry]] = {}

    def save(self, scope: ResultScope, json_text: str, byte_allowance: int, ttl_seconds: float,
             *, network: bool = False) -> str:
        """Keep ``json_text`` for the run and return its id ``result_<uuid4>``."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        scope = ResultScope(*scope)
        size = len(json_text.encode("utf-8"))
        entries = self._live(scope)
        count = len(entries) if entries else 0
        used = sum(entry.size for entry in entries.values()) if entries else 0
        if count >= self._max_entries:
            raise ResultsCapacityError(
                f"result store is full: at most {self._max_entries} saved results per run; "
                "delete references you no longer need with results.delete(id)"
            )
        if used + size > byte_allowance:
            raise ResultsAllowanceError(
                f"saving {size} bytes would exceed this run's saved-results allowance "
                f"({used} of {byte_allowance} bytes used); save a narrower value or delete references"
            )
        result_id = f"result_{uuid.uuid4()}"
        self._runs.setdefault(scope, {})[result_id] = _Entry(json_text, size, self._clock() + ttl_seconds, network)
        return result_id

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
        if not entries or not isinstance(result_id, str) or entries.pop(result_id, None) is None:
            return False
        if not entries:
            del self._runs[scope]
        return True

    def end_run(self, scope: ResultScope) -> int:
        """Drop every saved result of the run; return how many were still live."""
        scope = ResultScope(*scope)
        entries = self._live(scope)
        self._runs.pop(scope, None)
        return len(entries) if entries else 0

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
            del entries[result_id]
        if not entries:
            del self._runs[scope]
            return None
        return entries
