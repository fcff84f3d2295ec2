"""The session-store contract every backend implements."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = ["DEFAULT_TIMEOUT_SECONDS", "RunFailures", "RunIncrement", "SessionStore"]

#: How long one store call may take by default, retries included (the service passes ``store_timeout_ms``).
DEFAULT_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class RunFailures:
    """The failure counters of one run: failures per tool and the tools blocked outright (with why)."""

    failures: dict[str, int] = field(default_factory=dict)
    blocked: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.failures.values())


@dataclass(frozen=True)
class RunIncrement:
    """Failures one process counted in a run since it last wrote them: per tool, and the tools they
    block outright (with why; a tool is blocked only together with a failure of it)."""

    tenant: str
    session_id: str
    run_id: str
    failures: Mapping[str, int]
    blocked: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class SessionStore(Protocol):
    """Durable per-(tenant, session) map of key -> compact JSON text.

    A session past its TTL reads as empty everywhere, whether or not ``expire()`` removed it yet.

    Sizes follow ``StoreLimits`` (see ``service.stores.limits``). Every method raises only
    ``StoreError`` subclasses; ``StoreUnavailableError`` means the backend could not be reached.
    """

    async def get_all(self, tenant: str, session_id: str) -> dict[str, str]:
        """Return the committed entries of one session (empty if it has none)."""
        ...

    async def commit(self, tenant: str, session_id: str, sets: Mapping[str, str], deletes: Collection[str]) -> None:
        """Apply ``deletes`` then ``sets`` atomically, re-checking limits against the current state.

        Raises ``StoreKeyError``/``StoreTypeError`` for a bad key or value, ``StoreLimitError``
        when a value or the resulting session total is too large and ``StoreQuotaError`` when the
        tenant's bytes or sessions would exceed its quota; in every failure nothing changes.
        A commit restarts the session's TTL; an expired session is empty before the commit applies.
        """
        ...

    async def sizes(self, tenant: str, session_id: str) -> dict[str, int]:
        """Return key -> UTF-8 bytes of its JSON value for one session."""
        ...

    async def delete_session(self, tenant: str, session_id: str) -> bool:
        """Drop every entry of one session; return whether it had any."""
        ...

    async def usage(self, tenant: str) -> tuple[int, int]:
        """Return ``(bytes, sessions)`` the tenant's live (unexpired) sessions hold; the bytes include
        its run failure counters (which are not sessions)."""
        ...

    async def expire(self) -> int:
        """Remove the data of sessions past their TTL; return how many sessions were removed."""
        ...

    async def add_run_failures(self, increments: Sequence[RunIncrement]) -> list[RunFailures | None]:
        """Add each increment to its run's counters (a block reason sticks: the first one wins), all in
        one write; return each run's counters after it, or None where the tenant's store quota
        refused the increment (then nothing of it was written).

        Counters are charged to the tenant's ``max_tenant_bytes`` (``run_counter_bytes`` per tool of a
        run) and live ``session_ttl_seconds`` after the run's last failure, like session data.
        """
        ...

    async def run_failures(self, tenant: str, session_id: str, run_id: str) -> RunFailures:
        """Return the run's live failure counters (empty for an unknown or expired run)."""
        ...

    async def delete_run_failures(self, tenant: str, session_id: str, run_id: str) -> None:
        """Forget the run's failure counters (the run was ended)."""
        ...

    async def ping(self) -> None:
        """Raise a ``StoreError`` unless the backend answers (opens it on first use)."""
        ...

    async def close(self) -> None:
        """Release connections and threads; the object is unusable afterwards."""
        ...
