"""Session stores: a small durable JSON map per (tenant, session), SQLite or Redis.

Each tenant's stored bytes and number of sessions are bounded, and a session's data is removed
``session_ttl_seconds`` after its last write (reads treat it as gone at once; ``expire()`` frees it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict
from urllib.parse import unquote, urlsplit

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
from .results_backend import LocalResults, ResultsBackend, ResultsLimits

__all__ = [
    "ResultsBackend",
    "ResultsLimits",
    "RunFailures",
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

_ACCEPTED = (
    "accepted forms: sqlite:///relative/path.db (relative to the working directory), "
    "sqlite:////absolute/path.db, or redis://HOST:PORT/DB"
)


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """Return the store URL naming the SQLite file ``path`` (absolute paths give four slashes)."""
    return "sqlite:///" + os.fspath(path)


def open_store(
    url: str,
    limits: StoreLimits,
    clock: Callable[[], float] = time.time,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> SessionStore:
    """Return the store a URL names; connections open lazily, so ``await store.ping()`` at start.

    ``sqlite:///`` is followed by a file path as in SQLAlchemy: ``sqlite:///data/s.db`` is relative
    to the working directory, ``sqlite:////var/lib/codemode/s.db`` is absolute. Parent directories
    are created. ``redis://[[user]:password@]HOST[:PORT][/DB]`` selects Redis (port 6379, db 0).
    ``clock`` (wall-clock seconds) dates session expiry; tests pass their own.  Each call answers
    within ``timeout_seconds`` or raises ``StoreUnavailableError`` (``store_timeout_ms``).
    """
    if url.startswith("sqlite:"):
        return _open_sqlite(url, limits, clock, timeout_seconds)
    if url.startswith("redis:"):
        return _open_redis(url, limits, clock, timeout_seconds)
    raise StoreConfigError(f"unsupported store URL {_redacted(url)!r}; {_ACCEPTED}")


def _open_sqlite(url: str, limits: StoreLimits, clock: Callable[[], float], timeout_seconds: float) -> SessionStore:
    prefix = "sqlite:///"
    raw = url[len(prefix) :] if url.startswith(prefix) else ""
    if not raw or raw == ":memory:" or "?" in raw or "\0" in raw:
        raise StoreConfigError(f"invalid SQLite store URL {url!r}: it must name a file; {_ACCEPTED}")
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


class _RedisParams(TypedDict):
    """Where a ``redis://`` URL points, as RedisLink and RedisSessionStore take it."""

    host: str
    port: int
    db: int
    username: str | None
    password: str | None


def _redis_params(url: str) -> _RedisParams:
    shown = _redacted(url)
    try:
        parts = urlsplit(url)
        port = parts.port or 6379
    except ValueError as exc:
        raise StoreConfigError(f"invalid Redis store URL {shown!r}: {exc}; {_ACCEPTED}") from None
    if parts.scheme != "redis" or not parts.hostname or parts.query or parts.fragment:
        raise StoreConfigError(f"invalid Redis store URL {shown!r}; {_ACCEPTED}")
    db_text = parts.path.strip("/") or "0"
    if not db_text.isdigit():
        raise StoreConfigError(f"invalid Redis database {db_text!r} in store URL {shown!r}; {_ACCEPTED}")
    return {
        "host": parts.hostname,
        "port": port,
        "db": int(db_text),
        "username": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password else None,
    }


def _open_redis(url: str, limits: StoreLimits, clock: Callable[[], float], timeout_seconds: float) -> SessionStore:
    params = _redis_params(url)

    from .redis_store import RedisSessionStore

    return RedisSessionStore(limits=limits, clock=clock, timeout_seconds=timeout_seconds, **params)


def open_results(
    url: str,
    limits: ResultsLimits,
    clock: Callable[[], float] | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
) -> ResultsBackend:
    """Return the saved-results store for the session store ``url``: shared in Redis for ``redis://``
    (replicas load each other's references), else kept in this process.

    ``clock`` dates expiry (default wall-clock time for Redis, shared by replicas; monotonic in memory);
    a Redis call answers within ``timeout_seconds`` or raises ``StoreUnavailableError``.
    """
    if not url.startswith("redis:"):
        return LocalResults(limits, clock or time.monotonic)
    params = _redis_params(url)

    from .redis_results import RedisResultsStore
    from .redis_store import RedisLink

    link = RedisLink(**params, label="saved-results store", timeout_seconds=timeout_seconds, retries=1)
    return RedisResultsStore(link, limits, clock or time.time)


def _redacted(url: str) -> str:
    """Return ``url`` with any credentials replaced, for error messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    return f"{scheme}{sep}{netloc}{slash}{tail}"
