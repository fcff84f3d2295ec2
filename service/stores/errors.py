"""Exceptions raised by session stores and the per-cell write buffer."""

from __future__ import annotations

__all__ = [
    "StoreConfigError",
    "StoreError",
    "StoreKeyError",
    "StoreLimitError",
    "StoreQuotaError",
    "StoreTypeError",
    "StoreUnavailableError",
]


class StoreError(Exception):
    """Base of every session-store failure."""

    code = "store_error"


class StoreUnavailableError(StoreError):
    """The backend cannot be reached or refused the operation; retrying later may work."""

    code = "store_unavailable"


class StoreConfigError(StoreError):
    """The store URL or the backend's files or credentials are unusable."""

    code = "store_config"


class StoreLimitError(StoreError):
    """A write would exceed a size limit; nothing was changed (guest RangeError)."""

    code = "store_range"


class StoreQuotaError(StoreLimitError):
    """A write would exceed the tenant's session-store bytes or number of sessions (guest RangeError)."""

    code = "store_quota"


class StoreTypeError(StoreError):
    """A key or value has the wrong type or shape (guest TypeError)."""

    code = "store_type"


class StoreKeyError(StoreTypeError):
    """A key is not a string of 1-256 UTF-16 code units."""
