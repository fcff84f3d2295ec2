"""Redis session store: one hash per (tenant, session), commits applied by a Lua script."""

from __future__ import annotations

from collections.abc import Awaitable, Collection, Mapping
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from .errors import StoreConfigError, StoreError, StoreUnavailableError
from .limits import StoreLimits, check_pending, total_limit_error

__all__ = ["RedisSessionStore"]

_T = TypeVar("_T")

_KEY_PREFIX = "codemode:store:"
_TIMEOUT_SECONDS = 5.0
# A couple of quick reconnect attempts ride over a server restart; longer outages surface
# as StoreUnavailableError instead of stalling the cell that commits.
_RETRIES = 3
# Failures where the server is down, starting, or refusing writes for now.
_OUTAGES = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.BusyLoadingError,
    redis_errors.ReadOnlyError,
    redis_errors.OutOfMemoryError,
)

# Scripts run atomically in Redis: the total is measured and the writes applied with no other
# client in between. Every check happens before the first write, so a refusal changes nothing.
# KEYS[1] = session hash; ARGV = max_total, n_deletes, deleted fields..., field, value, ...
_COMMIT_LUA = """
local max_total = tonumber(ARGV[1])
local n_del = tonumber(ARGV[2])
local first_set = 3 + n_del
local charged = {}
local total = 0
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local size = #field + redis.call('HSTRLEN', KEYS[1], field)
  charged[field] = size
  total = total + size
end
for i = 3, first_set - 1 do
  local field = ARGV[i]
  if charged[field] then
    total = total - charged[field]
    charged[field] = nil
  end
end
for i = first_set, #ARGV, 2 do
  local field = ARGV[i]
  if charged[field] then total = total - charged[field] end
  charged[field] = #field + #ARGV[i + 1]
  total = total + charged[field]
end
if total > max_total then
  return {0, total}
end
for i = 3, first_set - 1 do
  redis.call('HDEL', KEYS[1], ARGV[i])
end
for i = first_set, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
return {1, total}
"""


def session_key(tenant: str, session_id: str) -> str:
    """Return the hash name of one session; the length prefix keeps tenants containing ':' apart."""
    return f"{_KEY_PREFIX}{len(tenant)}:{tenant}:{session_id}"


class RedisSessionStore:
    """Session store in Redis; safe to share between service processes."""

    def __init__(
        self,
        host: str,
        port: int,
        db: int,
        limits: StoreLimits,
        *,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self._where = f"redis://{host}:{port}/{db}"
        self._limits = limits
        self._client = aioredis.Redis(
            host=host,
            port=port,
            db=db,
            username=username,
            password=password,
            decode_responses=True,
            socket_timeout=_TIMEOUT_SECONDS,
            socket_connect_timeout=_TIMEOUT_SECONDS,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), _RETRIES),
        )
        self._commit_script = self._client.register_script(_COMMIT_LUA)
        self._closed = False

    async def get_all(self, tenant: str, session_id: str) -> dict[str, str]:
        """Return the committed entries of one session."""
        return await self._call(self._client.hgetall(session_key(tenant, session_id)))

    async def commit(
        self, tenant: str, session_id: str, sets: Mapping[str, str], deletes: Collection[str]
    ) -> None:
        """Apply deletes then sets atomically, or nothing if a limit is exceeded."""
        if not sets and not deletes:
            return
        sets = dict(sets)
        deletes = tuple(deletes)
        check_pending(sets, deletes, self._limits)
        args: list[Any] = [self._limits.max_total_bytes, len(deletes), *deletes]
        for key, text in sets.items():
            args += (key, text)
        applied, total = await self._call(
            self._commit_script(keys=[session_key(tenant, session_id)], args=args)
        )
        if not int(applied):
            raise total_limit_error(int(total), self._limits)

    async def sizes(self, tenant: str, session_id: str) -> dict[str, int]:
        """Return key -> UTF-8 bytes of its JSON value."""
        entries = await self.get_all(tenant, session_id)
        return {key: len(text.encode("utf-8")) for key, text in entries.items()}

    async def delete_session(self, tenant: str, session_id: str) -> bool:
        """Drop every entry of one session; return whether it had any."""
        removed = await self._call(self._client.delete(session_key(tenant, session_id)))
        return int(removed) > 0

    async def ping(self) -> None:
        """Raise StoreUnavailableError unless the server answers PING."""
        await self._call(self._client.ping())

    async def close(self) -> None:
        """Close the connection pool; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await self._client.aclose()

    async def _call(self, pending: Awaitable[_T]) -> _T:
        if self._closed:
            close_pending = getattr(pending, "close", None)
            if close_pending is not None:
                close_pending()  # never awaited: avoid a "coroutine was never awaited" warning
            raise StoreUnavailableError(f"the Redis session store at {self._where} is closed")
        try:
            return await pending
        except StoreError:
            raise
        except redis_errors.AuthenticationError as exc:
            message = f"Redis session store at {self._where} refused the credentials: {exc}"
            raise StoreConfigError(message) from exc
        except _OUTAGES as exc:
            message = f"Redis session store at {self._where} is unavailable: {exc}"
            raise StoreUnavailableError(message) from exc
        except redis_errors.RedisError as exc:
            raise StoreError(f"Redis session store at {self._where} failed: {exc}") from exc
