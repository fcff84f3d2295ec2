"""Every exception of the stores package (session stores, the per-cell write buffer, saved results).

Each class has a stable snake_case ``code``.  The codes marked "guest" reach guest code as
``err.code`` of a rejected Error; the others are turned into a message or a 503 first.

StorageError                     storage_error: base of the package
 ├── StoreError                  store_error: a session-store failure
 │    ├── StoreUnavailableError  store_unavailable: backend unreachable (guest code is set by the handler)
 │    ├── StoreConfigError       store_config: store URL, files or credentials unusable (start-up)
 │    ├── StoreLimitError        store_range (guest, RangeError): a write over a size limit
 │    │    └── StoreQuotaError   store_quota (guest, RangeError): over the tenant's bytes or sessions
 │    └── StoreTypeError         store_type (guest, TypeError): a key or value of the wrong type or shape
 │         └── StoreKeyError     store_type (shared with its parent): a bad key
 └── ResultsError                results_error: a saved-results failure
      ├── ResultsCapacityError   results_capacity (guest, RangeError)
      ├── ResultsAllowanceError  results_allowance (guest, RangeError)
      ├── ResultsQuotaError      results_quota (guest, RangeError)
      └── ResultUnavailableError result_unavailable (guest): unknown, expired or another scope's id
"""

from __future__ import annotations

__all__ = [
    "ResultUnavailableError",
    "ResultsAllowanceError",
    "ResultsCapacityError",
    "ResultsError",
    "ResultsQuotaError",
    "StorageError",
    "StoreConfigError",
    "StoreError",
    "StoreKeyError",
    "StoreLimitError",
    "StoreQuotaError",
    "StoreTypeError",
    "StoreUnavailableError",
]


class StorageError(Exception):
    """Base of every exception of the stores package."""

    code = "storage_error"


class StoreError(StorageError):
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


_UNAVAILABLE = "saved result is unavailable or expired; fetch fresh data if needed"


class ResultsError(StorageError):
    """Base of every results-store failure."""

    code = "results_error"


class ResultsCapacityError(ResultsError):
    """The run already holds the maximum number of saved results."""

    code = "results_capacity"


class ResultsAllowanceError(ResultsError):
    """Saving would exceed the run's byte allowance."""

    code = "results_allowance"


class ResultsQuotaError(ResultsError):
    """Saving would exceed the tenant's or the service's saved-result bytes."""

    code = "results_quota"


class ResultUnavailableError(ResultsError):
    """The id is unknown, expired, or belongs to another scope (indistinguishably)."""

    code = "result_unavailable"

    def __init__(self, message: str = _UNAVAILABLE) -> None:
        super().__init__(message)
