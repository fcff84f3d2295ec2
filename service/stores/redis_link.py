"""The one place a Redis client of ours is made, and where redis-py's failures become the stores'
exceptions (the only importer of redis): a server named by a URL, or the primary a set of Sentinels
names, and writes acknowledged by replicas when ``redis_wait_replicas`` asks for it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from redis.asyncio.client import Pipeline
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff

from .base import DEFAULT_TIMEOUT_SECONDS
from .errors import StoreConfigError, StoreError, StoreUnavailableError
from .redis_target import RedisTarget

__all__ = ["RedisLink"]

_T = TypeVar("_T")

# A couple of quick reconnect attempts ride over a server restart (within the call's time); longer
# outages surface as StoreUnavailableError instead of stalling the cell that commits.
_RETRIES = 3
#: How long one Sentinel may take to answer (each is asked in turn until one names the primary).
_SENTINEL_TIMEOUT_SECONDS = 0.5
# Failures where the server is down, starting, or refusing writes for now.
_OUTAGES = (
    redis_errors.ConnectionError,
    redis_errors.TimeoutError,
    redis_errors.BusyLoadingError,
    redis_errors.ReadOnlyError,
    redis_errors.OutOfMemoryError,
)
# Refusals redis-py has no class for, of a primary that cannot take writes yet: one just promoted whose
# replicas have not connected (min-replicas-to-write), or a replica cut off from its primary.
_REFUSED_FOR_NOW = re.compile(r"^(NOREPLICAS|MASTERDOWN) ")


class RedisLink:
    """One Redis client of ours (the only place one is made), its failures translated into the stores'
    exceptions.

    ``label`` names the store in messages ("session store", "saved-results store"); ``timeout_seconds``
    bounds each call as a whole (a hung server, e.g. a SIGSTOP or a partition, answers nothing, so
    every socket operation would wait and then be retried), and a couple of quick retries ride
    over a server restart, or a Sentinel failover once it is done, within it.  With Sentinels
    (``target.sentinels``) every new connection goes to the server they name as the primary: a
    connection to a primary that died fails, and one to a primary that was demoted answers
    READONLY, and either reconnects to the new primary on the next try.

    ``acked`` writes: with ``target.wait_replicas`` > 0 the write and a ``WAIT`` go in one pipeline (so
    on one connection, which ``WAIT`` is about), and a write fewer replicas confirmed within half the
    call's time raises StoreUnavailableError: it reached the primary, but a failover now could lose it,
    so it is not reported done.
    """

    def __init__(
        self,
        target: RedisTarget,
        *,
        label: str,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        retries: int = _RETRIES,
    ) -> None:
        self.where = target.where
        self._label = label
        self._timeout = timeout_seconds
        self._wait_replicas = target.wait_replicas
        self._wait_ms = max(1, int(timeout_seconds * 500))
        options: dict[str, Any] = {
            "db": target.db,
            "username": target.username,
            "password": target.password,
            "decode_responses": True,
            "socket_timeout": timeout_seconds,
            "socket_connect_timeout": timeout_seconds,
            "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), retries),
        }
        self._sentinel: Sentinel | None = None
        if target.sentinels:
            # Discovery asks each Sentinel in turn: one that is down must not take the whole call's time.
            asking = min(timeout_seconds, _SENTINEL_TIMEOUT_SECONDS)
            self._sentinel = Sentinel(
                target.sentinels,
                sentinel_kwargs={
                    "socket_timeout": asking,
                    "socket_connect_timeout": asking,
                    "password": target.sentinel_password,
                },
            )
            self.client: aioredis.Redis = self._sentinel.master_for(target.master_name, **options)
        else:
            self.client = aioredis.Redis(host=target.host, port=target.port, **options)
        self._closed = False

    def script(self, lua: str) -> Callable[..., Awaitable[Any]]:
        """A registered Lua script: call it with ``keys=[...], args=[...]`` inside ``call``."""
        return self.client.register_script(lua)

    def pipeline(self) -> Pipeline:
        """A pipeline (no transaction) to queue commands and scripts (``client=pipe``) on, for ``execute``."""
        return self.client.pipeline(transaction=False)

    async def execute(self, pipe: Pipeline, *, acked: bool) -> list[Any]:
        """Send ``pipe`` in one round trip and return its answers; ``acked``: its writes are ones callers are
        told succeeded, so they wait for ``wait_replicas`` replicas (see the class text)."""
        wait = acked and self._wait_replicas > 0
        if wait:
            pipe.wait(self._wait_replicas, self._wait_ms)
        async with pipe:  # gives its connection back on the way out, also when the call's time ran out mid-way
            answers = await self.call(pipe.execute())
        if not wait:
            return answers
        *answers, confirmed = answers
        if int(confirmed) < self._wait_replicas:
            raise StoreUnavailableError(
                f"Redis {self._label} at {self.where}: a write reached the primary but only {confirmed} of "
                f"{self._wait_replicas} replicas confirmed it within {self._wait_ms} ms (redis_wait_replicas); "
                "a failover now could lose it, so it is not reported done; retry"
            )
        return answers

    async def run_script(self, script: Callable[..., Awaitable[Any]], keys: list[str], args: list[Any]) -> Any:
        """Run a script that writes, acknowledged as ``execute(acked=True)`` is (one round trip without WAIT)."""
        if not self._wait_replicas:
            return await self.call(script(keys=keys, args=args))
        pipe = self.pipeline()
        await script(keys=keys, args=args, client=pipe)  # queued: no round trip yet
        [answer] = await self.execute(pipe, acked=True)
        return answer

    async def close(self) -> None:
        """Close the connection pool (and the Sentinels' connections); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        await self.client.aclose()
        if self._sentinel is not None:
            await self._sentinel.aclose()

    async def call(self, pending: Awaitable[_T]) -> _T:
        if self._closed:
            close_pending = getattr(pending, "close", None)
            if close_pending is not None:
                close_pending()  # never awaited: avoid a "coroutine was never awaited" warning
            raise StoreUnavailableError(f"the Redis {self._label} at {self.where} is closed")
        try:
            async with asyncio.timeout(self._timeout):
                return await pending
        except TimeoutError:
            raise StoreUnavailableError(
                f"Redis {self._label} at {self.where} did not answer within {self._timeout:g} s (store_timeout_ms)"
            ) from None
        except StoreError:
            raise
        except redis_errors.AuthenticationError as exc:
            message = f"Redis {self._label} at {self.where} refused the credentials: {exc}"
            raise StoreConfigError(message) from exc
        except _OUTAGES as exc:
            message = f"Redis {self._label} at {self.where} is unavailable: {exc}"
            raise StoreUnavailableError(message) from exc
        except redis_errors.ResponseError as exc:
            if _REFUSED_FOR_NOW.search(str(exc).rpartition("caused error: ")[2]):
                raise StoreUnavailableError(f"Redis {self._label} at {self.where} is unavailable: {exc}") from exc
            raise StoreError(f"Redis {self._label} at {self.where} failed: {exc}") from exc
        except redis_errors.RedisError as exc:
            raise StoreError(f"Redis {self._label} at {self.where} failed: {exc}") from exc
