"""Where the Redis stores connect, and what acknowledges a write: read from the ``redis://`` store URL
and the Sentinel settings, checked once at start (no Redis import here; ``redis_store.RedisLink`` makes
the client from it).

Without Sentinels the URL's host and port are the server.  With ``redis_sentinels`` the replicas ask
those Sentinels which server is the primary of ``redis_master_name`` (again after every failover); the
URL then gives only the credentials and the database number.  ``wait_replicas`` > 0 makes every write
that callers are told succeeded wait until that many replicas confirmed it (Redis ``WAIT``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from .errors import StoreConfigError

__all__ = ["ACCEPTED_URLS", "SINGLE_SERVER", "RedisHA", "RedisTarget", "redacted", "redis_target"]

ACCEPTED_URLS = (
    "accepted forms: sqlite:///relative/path.db (relative to the working directory), "
    "sqlite:////absolute/path.db, or redis://HOST:PORT/DB"
)
SENTINEL_PORT = 26379
#: More would only make every write wait on more machines; a Redis deployment has a handful of replicas.
MAX_WAIT_REPLICAS = 16


@dataclass(frozen=True)
class RedisHA:
    """The settings for a highly available Redis (``redis_sentinels``, ``redis_master_name``,
    ``redis_sentinel_password``, ``redis_wait_replicas``); the defaults are a single server."""

    sentinels: tuple[str, ...] = ()  # "host:port" (port 26379 when left out), as configured
    master_name: str = "mymaster"
    sentinel_password: str = ""
    wait_replicas: int = 0


#: One Redis server, a write done once the server answered.
SINGLE_SERVER = RedisHA()


@dataclass(frozen=True)
class RedisTarget:
    """Everything one Redis client of ours is made from."""

    host: str
    port: int
    db: int
    username: str | None = None
    password: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    master_name: str = "mymaster"
    sentinel_password: str | None = None
    wait_replicas: int = 0

    @property
    def where(self) -> str:
        """The server or the Sentinel-managed primary, for messages (never the credentials)."""
        if not self.sentinels:
            return f"redis://{self.host}:{self.port}/{self.db}"
        listed = ",".join(_address(host, port) for host, port in self.sentinels)
        return f"the primary of {self.master_name!r} (Sentinels {listed}) db {self.db}"


def redis_target(url: str, ha: RedisHA = SINGLE_SERVER) -> RedisTarget:
    """The target a ``redis://`` URL and the HA settings name; StoreConfigError naming what is wrong."""
    shown = redacted(url)
    try:
        parts = urlsplit(url)
        port = parts.port or 6379
    except ValueError as exc:
        raise StoreConfigError(f"invalid Redis store URL {shown!r}: {exc}; {ACCEPTED_URLS}") from None
    if parts.scheme != "redis" or not parts.hostname or parts.query or parts.fragment:
        raise StoreConfigError(f"invalid Redis store URL {shown!r}; {ACCEPTED_URLS}")
    db_text = parts.path.strip("/") or "0"
    if not db_text.isdigit():
        raise StoreConfigError(f"invalid Redis database {db_text!r} in store URL {shown!r}; {ACCEPTED_URLS}")
    if not 0 <= ha.wait_replicas <= MAX_WAIT_REPLICAS:
        raise StoreConfigError(f"redis_wait_replicas must be 0..{MAX_WAIT_REPLICAS}, not {ha.wait_replicas}")
    if ha.sentinels and not ha.master_name:
        raise StoreConfigError("redis_sentinels needs redis_master_name: the name the Sentinels monitor")
    return RedisTarget(
        host=parts.hostname,
        port=port,
        db=int(db_text),
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        sentinels=tuple(_sentinel(entry) for entry in ha.sentinels),
        master_name=ha.master_name,
        sentinel_password=ha.sentinel_password or None,
        wait_replicas=ha.wait_replicas,
    )


def _sentinel(entry: str) -> tuple[str, int]:
    """``host:port``, ``host`` (port 26379) or ``[v6]:port`` as (host, port)."""
    try:
        parts = urlsplit("//" + entry.strip())
        port = parts.port or SENTINEL_PORT
    except ValueError as exc:
        raise StoreConfigError(f"invalid Sentinel address {entry!r} in redis_sentinels: {exc}") from None
    if not parts.hostname or parts.path or parts.username or parts.password or parts.query or parts.fragment:
        raise StoreConfigError(f"invalid Sentinel address {entry!r} in redis_sentinels; write HOST:PORT")
    return parts.hostname, port


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def redacted(url: str) -> str:
    """Return ``url`` with any credentials replaced, for error messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    return f"{scheme}{sep}{netloc}{slash}{tail}"
