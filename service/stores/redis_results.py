"""Saved results in Redis, so replicas sharing one ``redis://`` store load each other's references.

Each entry is a hash ``entry:<id>`` (value, network mark, scope, expiry) under a Redis TTL; each run
keeps a sorted set of its ids by expiry and a hash of their charges; one counter per tenant and one
for everything hold the charged bytes the caps are checked against, and one sorted set of every
entry by expiry lets any replica sweep.  Every change is a Lua script, so a cap checked in Redis
holds across replicas: two saves racing for the last bytes cannot both succeed.  Expiry times come
from the store's clock (tests move it); every key's Redis TTL covers its newest entry plus a grace,
so nothing outlives its data when no replica is left to sweep.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable

from .errors import ResultUnavailableError
from .redis_link import RedisLink
from .results_backend import ResultsLimits
from .saved_results import (
    ENTRY_OVERHEAD,
    ResultScope,
    allowance_error,
    capacity_error,
    tenant_quota_error,
    total_quota_error,
)

__all__ = ["RedisResultsStore"]

PREFIX = "codemode:results:"
#: Keys outlive an entry's expiry by this much, so a sweep still finds what it must uncharge.
GRACE_SECONDS = 300
#: Expired entries a save or one sweep step forgets (the rest wait for the next).
SWEEP_BATCH = 256
_ID = re.compile(r"result_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ID_LENGTH = len("result_") + 36

# An index member is "<id>:<charge>:<scope>", the scope "<tenant bytes>:<tenant>:<session bytes>:
# <session>:<run>", so forgetting an entry needs nothing but the member (the entry hash may be gone).
_PRELUDE = f"""
local P = '{PREFIX}'
local function uncharge(key, amount)
  if redis.call('DECRBY', key, amount) <= 0 then redis.call('DEL', key) end
end
local function forget(m)
  local id = string.sub(m, 1, {_ID_LENGTH})
  local sep = string.find(m, ':', {_ID_LENGTH + 2}, true)
  local charge = tonumber(string.sub(m, {_ID_LENGTH + 2}, sep - 1))
  local scope = string.sub(m, sep + 1)
  local colon = string.find(scope, ':', 1, true)
  local tenant = string.sub(scope, colon + 1, colon + tonumber(string.sub(scope, 1, colon - 1)))
  redis.call('DEL', P .. 'entry:' .. id)
  redis.call('ZREM', P .. 'run:' .. scope, id)
  redis.call('HDEL', P .. 'charges:' .. scope, id)
  uncharge(P .. 'tenant:' .. tenant, charge)
  uncharge(P .. 'total', charge)
  redis.call('ZREM', P .. 'expiry', m)
end
local function sweep(now, batch)
  local members = redis.call('ZRANGEBYSCORE', P .. 'expiry', '-inf', now, 'LIMIT', 0, batch)
  for _, m in ipairs(members) do forget(m) end
  return #members
end
local function forget_id(id, scope)
  local charge = redis.call('HGET', P .. 'charges:' .. scope, id)
  if charge then forget(id .. ':' .. charge .. ':' .. scope) else redis.call('DEL', P .. 'entry:' .. id) end
end
local function extend(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
"""

# KEYS: entry, run, charges, tenant, total, expiry.  ARGV: now, expires_at, keep_ms, scope, id, size,
# charge, max_entries, allowance, tenant max, total max, network, value, sweep batch.
# A retry of a save the server already applied (its reply was lost) finds the entry and changes nothing.
_SAVE_LUA = (
    _PRELUDE
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end
local now, scope, id = ARGV[1], ARGV[4], ARGV[5]
local size, charge = tonumber(ARGV[6]), tonumber(ARGV[7])
sweep(now, tonumber(ARGV[14]))
for _, old in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do forget_id(old, scope) end
local count = redis.call('ZCARD', KEYS[2])
if count >= tonumber(ARGV[8]) then return {1, count} end
local used = 0
for _, c in ipairs(redis.call('HVALS', KEYS[3])) do used = used + tonumber(c) - (charge - size) end
if used + size > tonumber(ARGV[9]) then return {2, used} end
local tenant_used = tonumber(redis.call('GET', KEYS[4]) or '0')
if ARGV[10] ~= '' and tenant_used + charge > tonumber(ARGV[10]) then return {3, tenant_used} end
local total = tonumber(redis.call('GET', KEYS[5]) or '0')
if ARGV[11] ~= '' and total + charge > tonumber(ARGV[11]) then return {4, total} end
redis.call('HSET', KEYS[1], 'v', ARGV[13], 'n', ARGV[12], 's', scope, 'x', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[2], id)
redis.call('HSET', KEYS[3], id, charge)
redis.call('INCRBY', KEYS[4], charge)
redis.call('INCRBY', KEYS[5], charge)
redis.call('ZADD', KEYS[6], ARGV[2], id .. ':' .. charge .. ':' .. scope)
for i = 1, 6 do extend(KEYS[i], tonumber(ARGV[3])) end
return {0, 0}
"""
)

# KEYS: entry.  ARGV: scope, now.  Another scope's entry reads as missing.
_LOAD_LUA = """
local f = redis.call('HMGET', KEYS[1], 's', 'x', 'n', 'v')
if not f[1] or f[1] ~= ARGV[1] or tonumber(f[2]) <= tonumber(ARGV[2]) or not f[4] then return false end
return {f[3], f[4]}
"""

# KEYS: entry.  ARGV: scope, now, id.  Returns 1 when a live entry of the scope was deleted.
_DELETE_LUA = (
    _PRELUDE
    + """
local f = redis.call('HMGET', KEYS[1], 's', 'x')
if not f[1] or f[1] ~= ARGV[1] then return 0 end
forget_id(ARGV[3], ARGV[1])
if tonumber(f[2]) <= tonumber(ARGV[2]) then return 0 end
return 1
"""
)

# KEYS: run, charges.  ARGV: scope, now.  Returns how many live entries the run had.
_END_RUN_LUA = (
    _PRELUDE
    + """
local live = 0
local flat = redis.call('HGETALL', KEYS[2])
for i = 1, #flat, 2 do
  local score = redis.call('ZSCORE', KEYS[1], flat[i])
  if score and tonumber(score) > tonumber(ARGV[2]) then live = live + 1 end
  forget(flat[i] .. ':' .. flat[i + 1] .. ':' .. ARGV[1])
end
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do redis.call('DEL', P .. 'entry:' .. id) end
redis.call('DEL', KEYS[1], KEYS[2])
return live
"""
)

# KEYS: run, charges.  ARGV: now, overhead.
_USAGE_LUA = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')
local bytes = 0
for _, id in ipairs(ids) do
  bytes = bytes + tonumber(redis.call('HGET', KEYS[2], id) or ARGV[2]) - tonumber(ARGV[2])
end
return {#ids, bytes}
"""

# ARGV: now, batch.
_EXPIRE_LUA = _PRELUDE + "return sweep(ARGV[1], tonumber(ARGV[2]))\n"


def _scope_text(scope: ResultScope) -> str:
    """The scope as one string; byte-length prefixes keep the parts apart for the scripts' parser."""
    tenant, session_id, run_id = scope
    return f"{len(tenant.encode())}:{tenant}:{len(session_id.encode())}:{session_id}:{run_id}"


def _score(t: float) -> str:
    return f"{t:.6f}"


def _number(limit: int | None) -> str:
    return "" if limit is None else str(limit)


class RedisResultsStore:
    """``ResultsBackend`` in Redis; safe to share between replicas (see the module docstring)."""

    def __init__(self, link: RedisLink, limits: ResultsLimits, clock: Callable[[], float] = time.time) -> None:
        self._link = link
        self._limits = limits
        self._clock = clock
        self._save = link.script(_SAVE_LUA)
        self._load = link.script(_LOAD_LUA)
        self._delete = link.script(_DELETE_LUA)
        self._end_run = link.script(_END_RUN_LUA)
        self._usage = link.script(_USAGE_LUA)
        self._expire = link.script(_EXPIRE_LUA)

    async def save(
        self, scope: ResultScope, json_text: str, byte_allowance: int, ttl_seconds: float, *, network: bool = False
    ) -> str:
        """Keep ``json_text`` for the run and return its id ``result_<uuid4>``; caps are checked in Redis."""
        if ttl_seconds <= 0:
            raise ValueError("ttl_seconds must be positive")
        scope = ResultScope(*scope)
        text = _scope_text(scope)
        size = len(json_text.encode("utf-8"))
        result_id = f"result_{uuid.uuid4()}"
        now = self._clock()
        limits = self._limits
        outcome, amount = await self._link.run_script(
            self._save,
            [
                self._entry(result_id),
                PREFIX + "run:" + text,
                PREFIX + "charges:" + text,
                PREFIX + "tenant:" + scope.tenant,
                PREFIX + "total",
                PREFIX + "expiry",
            ],
            [
                _score(now),
                _score(now + ttl_seconds),
                int((ttl_seconds + GRACE_SECONDS) * 1000),
                text,
                result_id,
                size,
                size + ENTRY_OVERHEAD,
                limits.max_entries,
                byte_allowance,
                _number(limits.tenant_max_bytes),
                _number(limits.max_bytes),
                int(network),
                json_text,
                SWEEP_BATCH,
            ],
        )
        if outcome == 1:
            raise capacity_error(limits.max_entries)
        if outcome == 2:
            raise allowance_error(size, int(amount), byte_allowance)
        if outcome == 3:
            raise tenant_quota_error(int(amount), limits.tenant_max_bytes or 0)
        if outcome == 4:
            raise total_quota_error(int(amount), limits.max_bytes or 0)
        return result_id

    async def load_entry(self, scope: ResultScope, result_id: object) -> tuple[str, bool]:
        """Return ``(json_text, network)``, or raise ResultUnavailableError (also for another scope's id)."""
        if not isinstance(result_id, str) or not _ID.fullmatch(result_id):
            raise ResultUnavailableError()
        found = await self._link.call(
            self._load(keys=[self._entry(result_id)], args=[_scope_text(ResultScope(*scope)), _score(self._clock())])
        )
        if not found:
            raise ResultUnavailableError()
        network, text = found
        return text, network == "1"

    async def delete(self, scope: ResultScope, result_id: object) -> bool:
        """Forget one saved result; return whether this scope had it live."""
        if not isinstance(result_id, str) or not _ID.fullmatch(result_id):
            return False
        removed = await self._link.run_script(
            self._delete, [self._entry(result_id)], [_scope_text(ResultScope(*scope)), _score(self._clock()), result_id]
        )
        return int(removed) == 1

    async def end_run(self, scope: ResultScope) -> int:
        """Drop every saved result of the run; return how many were still live."""
        text = _scope_text(ResultScope(*scope))
        live = await self._link.run_script(
            self._end_run, [PREFIX + "run:" + text, PREFIX + "charges:" + text], [text, _score(self._clock())]
        )
        return int(live)

    async def usage(self, scope: ResultScope) -> tuple[int, int]:
        """Return ``(count, bytes)`` of the run's live saved results."""
        text = _scope_text(ResultScope(*scope))
        count, size = await self._link.call(
            self._usage(
                keys=[PREFIX + "run:" + text, PREFIX + "charges:" + text], args=[_score(self._clock()), ENTRY_OVERHEAD]
            )
        )
        return int(count), int(size)

    async def expire(self) -> int:
        """Forget every entry past its expiry, a batch per script; return how many."""
        dropped = 0
        while True:
            batch = int(await self._link.call(self._expire(keys=[], args=[_score(self._clock()), SWEEP_BATCH])))
            dropped += batch
            if batch < SWEEP_BATCH:
                return dropped

    async def tenant_bytes(self, tenant: str) -> int:
        """Charged bytes the tenant's saved results hold across replicas (until swept)."""
        return int(await self._link.call(self._link.client.get(PREFIX + "tenant:" + tenant)) or 0)

    async def total_bytes(self) -> int:
        return int(await self._link.call(self._link.client.get(PREFIX + "total")) or 0)

    async def ping(self) -> None:
        await self._link.call(self._link.client.ping())

    async def close(self) -> None:
        await self._link.close()

    @staticmethod
    def _entry(result_id: str) -> str:
        return PREFIX + "entry:" + result_id
