"""Session stores: a small durable JSON map per (tenant, session), SQLite or Redis.

Each tenant's stored bytes and number of sessions are bounded, and a session's data is removed
``session_ttl_seconds`` after its last write (reads treat it as gone at once; ``expire()`` frees it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from .base import DEFAULT_TIMEOUT_SECONDS, RunFailures, RunIncrement, SessionStore
from .errors import (
    StoreConfigError,
    StoreError,
    StoreKeyError,
    StoreLimitError,
    StoreQuotaError,
    StoreTypeError,
    StoreUnavailableError,
)
from .limits import StoreLimits, charged_total
from .redis_target import ACCEPTED_URLS, SINGLE_SERVER, RedisHA, redacted, redis_target
from .results_backend import LocalResults, ResultsBackend, ResultsLimits

__all__ = [
    "ResultsBackend",
    "ResultsLimits",
    "RunFailures",
    "RedisHA",
    "RunIncrement",
    "SessionStore",
    "StoreConfigError",
    "StoreError",
    "StoreKeyError",
    "StoreLimitError",
    "StoreLimits",
    "StoreQuotaError",
    "StoreTypeError",
    "StoreUnavailableError",
    "charged_total",
    "open_results",
    "open_store",
    "sqlite_url",
]


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """Return the store URL naming the SQLite file ``path`` (absolute paths give four slashes)."""
    return "sqlite:///" + os.fspath(path)


def open_store(
    url: str,
    limits: StoreLimits,
    clock: Callable[[], float] = time.time,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ha: RedisHA = SINGLE_SERVER,
) -> SessionStore:
    """Return the store a URL names; connections open lazily, so ``await store.ping()`` at start.

    ``sqlite:///`` is followed by a file path as in SQLAlchemy: ``sqlite:///data/s.db`` is relative
    to the working directory, ``sqlite:////var/lib/codemode/s.db`` is absolute. Parent directories
    are created. ``redis://[[user]:password@]HOST[:PORT][/DB]`` selects Redis (port 6379, db 0).
    ``clock`` (wall-clock seconds) dates session expiry; tests pass their own.  Each call answers
    within ``timeout_seconds`` or raises ``StoreUnavailableError`` (``store_timeout_ms``).  ``ha``: for
    ``redis://``, the Sentinels that name the primary and the replicas a write waits for (``RedisHA``).
    """
    if url.startswith("sqlite:"):
        return _open_sqlite(url, limits, clock, timeout_seconds)
    if url.startswith("redis:"):
        return _open_redis(url, limits, clock, timeout_seconds, ha)
    raise StoreConfigError(f"unsupported store URL {redacted(url)!r}; {ACCEPTED_URLS}")


def _open_sqlite(url: str, limits: StoreLimits, clock: Callable[[], float], timeout_seconds: float) -> SessionStore:
    prefix = "sqlite:///"
    raw = url[len(prefix) :] if url.startswith(prefix) else ""
    if not raw or raw == ":memory:" or "?" in raw or "\0" in raw:
        raise StoreConfigError(f"invalid SQLite store URL {url!r}: it must name a file; {ACCEPTED_URLS}")
    path = Path(raw)
    if not path.is_absolute():
        path = Path.cwd() / path
    if path.exists() and path.is_dir():
        raise StoreConfigError(f"SQLite store path {path} is a directory; name a file inside it")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreConfigError(f"cannot create the directory for the SQLite store {path}: {exc}") from exc

    from .sqlite import SqliteSessionStore

    return SqliteSessionStore(path, limits, clock, timeout_seconds)


def _open_redis(
    url: str, limits: StoreLimits, clock: Callable[[], float], timeout_seconds: float, ha: RedisHA
) -> SessionStore:
    target = redis_target(url, ha)

    from .redis_store import RedisSessionStore

    return RedisSessionStore(target, limits, clock=clock, timeout_seconds=timeout_seconds)


def open_results(
    url: str,
    limits: ResultsLimits,
    clock: Callable[[], float] | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ha: RedisHA = SINGLE_SERVER,
) -> ResultsBackend:
    """Return the saved-results store for the session store ``url``: shared in Redis for ``redis://``
    (replicas load each other's references), else kept in this process.

    ``clock`` dates expiry (default wall-clock time for Redis, shared by replicas; monotonic in memory);
    a Redis call answers within ``timeout_seconds`` or raises ``StoreUnavailableError``.
    """
    if not url.startswith("redis:"):
        return LocalResults(limits, clock or time.monotonic)
    target = redis_target(url, ha)

    from .redis_link import RedisLink
    from .redis_results import RedisResultsStore

    link = RedisLink(target, label="saved-results store", timeout_seconds=timeout_seconds, retries=1)
    return RedisResultsStore(link, limits, clock or time.time)
