"""Session-store size limits and the one definition of what a write costs."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from .errors import StoreKeyError, StoreLimitError, StoreQuotaError, StoreTypeError

__all__ = [
    "StoreLimits",
    "charged_total",
    "check_key",
    "check_pending",
    "check_tenant",
    "tenant_bytes_error",
    "tenant_sessions_error",
    "check_total",
    "check_value_size",
    "entry_bytes",
    "total_limit_error",
    "run_counter_bytes",
    "value_bytes",
]

#: What one tool's failure counter in one run costs beside its text (the row or hash fields that hold it).
RUN_COUNTER_OVERHEAD = 64


@dataclass(frozen=True, slots=True)
class StoreLimits:
    """Size limits of one session's store.

    Accounting (the same in every backend and in the per-cell buffer):
    - a key's length is counted in UTF-16 code units, as JavaScript's ``key.length`` does;
    - a value costs the UTF-8 bytes of its compact JSON text;
    - a session's total is the sum over its entries of UTF-8 key bytes plus value bytes;
    - a tenant's total is the sum of its live sessions' totals, and a session counts towards
      ``max_tenant_sessions`` while it holds any entry;
    - a session expires ``session_ttl_seconds`` after its last commit;
    - a run's failure counters are charged to the tenant's bytes too (``run_counter_bytes``), without
      counting as a session, and expire ``session_ttl_seconds`` after the run's last failure.
    """

    max_key_chars: int = 256
    max_value_bytes: int = 256 * 1024
    max_total_bytes: int = 1024 * 1024
    max_tenant_bytes: int = 32 * 1024 * 1024
    max_tenant_sessions: int = 1000
    session_ttl_seconds: float = 7 * 86400

    def __post_init__(self) -> None:
        for name in (
            "max_key_chars",
            "max_value_bytes",
            "max_total_bytes",
            "max_tenant_bytes",
            "max_tenant_sessions",
            "session_ttl_seconds",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"StoreLimits.{name} must be at least 1")


def check_key(key: object, limits: StoreLimits) -> bytes:
    """Return the key's UTF-8 bytes, or raise StoreKeyError if it is not a valid key."""
    if not isinstance(key, str):
        raise StoreKeyError(
            f"store key must be a string of 1-{limits.max_key_chars} characters, got {type(key).__name__}"
        )
    try:
        encoded = key.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates are legal in JS strings but cannot be stored as text.
        raise StoreKeyError("store key must be well-formed Unicode (no lone surrogates)") from None
    units = len(key) + sum(1 for ch in key if ord(ch) > 0xFFFF)
    if not 1 <= units <= limits.max_key_chars:
        raise StoreKeyError(f"store key must be a string of 1-{limits.max_key_chars} characters, got {units}")
    return encoded


def value_bytes(json_text: object) -> int:
    """Return the UTF-8 size of a value's JSON text, or raise StoreTypeError."""
    if not isinstance(json_text, str):
        raise StoreTypeError(f"store value must be JSON text, got {type(json_text).__name__}")
    try:
        return len(json_text.encode("utf-8"))
    except UnicodeEncodeError:
        raise StoreTypeError("store value must be well-formed Unicode JSON text") from None


def entry_bytes(key: str, json_text: str) -> int:
    """Return what one entry is charged against the session total."""
    return len(key.encode("utf-8")) + value_bytes(json_text)


def charged_total(sizes: Mapping[str, int]) -> int:
    """Return the session total from a ``sizes()`` answer (key -> value bytes)."""
    return sum(len(key.encode("utf-8")) + size for key, size in sizes.items())


def run_counter_bytes(session_id: str, run_id: str, tool: str, block_reason: str | None = None) -> int:
    """What one tool's failure counter in a run is charged against the tenant's bytes (UTF-8 text plus overhead)."""
    text = session_id + run_id + tool + (block_reason or "")
    return RUN_COUNTER_OVERHEAD + len(text.encode("utf-8", "surrogatepass"))


def check_value_size(size: int, limits: StoreLimits) -> None:
    """Raise StoreLimitError if a value of ``size`` bytes is too large."""
    if size > limits.max_value_bytes:
        raise StoreLimitError(f"store value is {size} bytes; the limit is {limits.max_value_bytes} bytes of JSON")


def total_limit_error(total: int, limits: StoreLimits) -> StoreLimitError:
    """Return the error for a session total of ``total`` bytes over the limit."""
    return StoreLimitError(
        f"session store would hold {total} bytes; the limit is {limits.max_total_bytes} bytes "
        "(keys plus JSON values); delete keys with store(key, undefined) to make room"
    )


def check_total(total: int, limits: StoreLimits) -> None:
    """Raise StoreLimitError if a session total of ``total`` bytes is too large."""
    if total > limits.max_total_bytes:
        raise total_limit_error(total, limits)


def check_pending(sets: Mapping[str, str], deletes: Collection[str], limits: StoreLimits) -> dict[str, tuple[int, int]]:
    """Validate a commit's keys and values; return key -> (value bytes, charged bytes) for the sets."""
    for key in deletes:
        check_key(key, limits)
    costs: dict[str, tuple[int, int]] = {}
    for key, text in sets.items():
        key_size = len(check_key(key, limits))
        size = value_bytes(text)
        check_value_size(size, limits)
        costs[key] = (size, key_size + size)
    return costs


def check_tenant(
    old_session: int, new_session: int, tenant_bytes: int, tenant_sessions: int, limits: StoreLimits
) -> None:
    """Raise StoreQuotaError if replacing a session total of ``old_session`` bytes by ``new_session``
    would take the tenant over its quotas (``tenant_bytes``/``tenant_sessions`` include the old state).

    Shrinking is always allowed, even for a tenant already over a quota.
    """
    if new_session <= old_session:
        return
    after = tenant_bytes - old_session + new_session
    if after > limits.max_tenant_bytes:
        raise tenant_bytes_error(after, limits)
    if old_session == 0 and tenant_sessions + 1 > limits.max_tenant_sessions:
        raise tenant_sessions_error(tenant_sessions, limits)


def tenant_bytes_error(after: int, limits: StoreLimits) -> StoreQuotaError:
    """Return the error for a tenant whose sessions would hold ``after`` bytes."""
    return StoreQuotaError(
        f"session-store quota reached: this tenant's sessions (with their runs' tool-failure counters) would "
        f"hold {after} bytes; the quota is {limits.max_tenant_bytes} bytes (tenant_store_bytes); delete keys, "
        "sessions or ended runs to make room"
    )


def tenant_sessions_error(sessions: int, limits: StoreLimits) -> StoreQuotaError:
    """Return the error for a tenant that already has ``sessions`` sessions with data."""
    return StoreQuotaError(
        f"session-store quota reached: this tenant already has {sessions} sessions with stored "
        f"data (tenant_max_sessions={limits.max_tenant_sessions}); delete sessions "
        "(DELETE /v1/sessions/{session_id}) or reuse one"
    )
