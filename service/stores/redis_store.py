"""Redis session store: one hash per (tenant, session), commits applied by a Lua script.

Per tenant, a sorted set (session id -> expiry time) and a hash (session id -> bytes) make the
tenant's quotas checkable inside the commit script; one global sorted set of expiry times lets
``expire()`` find expired sessions of every tenant.  Expiry times come from the store's clock (so
tests can move it), and each session hash also gets a Redis TTL so its data goes away even if no
service sweeps.  Keys written before this index existed read as live until their next commit.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from .base import DEFAULT_TIMEOUT_SECONDS, RunFailures, RunIncrement
from .errors import StoreError
from .limits import (
    RUN_COUNTER_OVERHEAD,
    StoreLimits,
    check_pending,
    tenant_bytes_error,
    tenant_sessions_error,
    total_limit_error,
)
from .redis_link import RedisLink
from .redis_target import RedisTarget

__all__ = ["RedisSessionStore"]


_KEY_PREFIX = "codemode:store:"
_TENANT_PREFIX = "codemode:tenant:"
_EXPIRY_KEY = "codemode:expiry"
_RUN_PREFIX = "codemode:run:"
_RUN_EXPIRY_KEY = "codemode:runexpiry"
_REPLICA_PREFIX = "codemode:replica:"
_DRAINED_PREFIX = "codemode:drained:"
_SECRET_PREFIX = "codemode:secret:"
_ONCE_PREFIX = "codemode:once:"
_PARKED_PREFIX = "codemode:parked:"
_ADOPTED_PREFIX = "codemode:adopted:"
_EXPIRE_BATCH = 500
# Scripts run atomically in Redis: the total is measured and the writes applied with no other
# client in between. Every check happens before the first write, so a refusal changes nothing.
# KEYS: session hash, tenant expiry zset, tenant bytes hash, global expiry zset, tenant counter bytes.
# ARGV: max_total, max_tenant_bytes, max_sessions, now, expires_at, ttl_ms, tenant's session-hash
# prefix, tenant's global-member prefix, session id, n_deletes, deleted fields..., field, value, ...
_COMMIT_LUA = """
local max_total = tonumber(ARGV[1])
local now = ARGV[4]
for _, sid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)) do
  redis.call('DEL', ARGV[7] .. sid)
  redis.call('HDEL', KEYS[3], sid)
  redis.call('ZREM', KEYS[4], ARGV[8] .. sid)
  redis.call('ZREM', KEYS[2], sid)
end
local sid = ARGV[9]
local n_del = tonumber(ARGV[10])
local first_del = 11
local first_set = first_del + n_del
local charged = {}
local total = 0
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local size = #field + redis.call('HSTRLEN', KEYS[1], field)
  charged[field] = size
  total = total + size
end
local old_total = total
for i = first_del, first_set - 1 do
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
if total > old_total then
  local tenant_total = tonumber(redis.call('GET', KEYS[5]) or '0')
  for _, size in ipairs(redis.call('HVALS', KEYS[3])) do tenant_total = tenant_total + tonumber(size) end
  local after = tenant_total - tonumber(redis.call('HGET', KEYS[3], sid) or '0') + total
  if after > tonumber(ARGV[2]) then
    return {2, after}
  end
  local sessions = redis.call('ZCARD', KEYS[2])
  if old_total == 0 and sessions + 1 > tonumber(ARGV[3]) then
    return {3, sessions}
  end
end
for i = first_del, first_set - 1 do
  redis.call('HDEL', KEYS[1], ARGV[i])
end
for i = first_set, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[5], sid)
  redis.call('HSET', KEYS[3], sid, total)
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[8] .. sid)
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
else
  redis.call('ZREM', KEYS[2], sid)
  redis.call('HDEL', KEYS[3], sid)
  redis.call('ZREM', KEYS[4], ARGV[8] .. sid)
end
return {1, total}
"""

# KEYS: session hash, tenant expiry zset. ARGV: session id, now.
_READ_LUA = """
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  return {}
end
return redis.call('HGETALL', KEYS[1])
"""

# KEYS: as for commit. ARGV: session id, now, global member.
_DELETE_LUA = """
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
local live = (not score) or tonumber(score) > tonumber(ARGV[2])
local removed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[3])
if live and removed > 0 then
  return 1
end
return 0
"""

# KEYS: tenant expiry zset, tenant bytes hash, tenant counter bytes. ARGV: now.
_USAGE_LUA = """
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')
local total = tonumber(redis.call('GET', KEYS[3]) or '0')
for _, sid in ipairs(live) do
  total = total + tonumber(redis.call('HGET', KEYS[2], sid) or '0')
end
return {total, #live}
"""

# One hash per run: "n:<tool>" counts failures, "b:<tool>" holds the block reason; the hash's
# Redis TTL restarts at every failure, so a finished run's counters go away on their own.  What a
# run's counters are charged lives beside them, per tenant: a hash (run member -> bytes) and their
# sum (a string), which the commit and usage scripts add to the tenant's session bytes.  A global
# sorted set (run member -> expiry) lets ``expire()`` release the charge of runs past their TTL.
# A run member is "<UTF-8 bytes of the tenant base>:<tenant base><run hash name>".
# KEYS: run hash, tenant run charges, tenant counter bytes, tenant session bytes, global run expiry.
# ARGV: ttl_ms, now, expires_at, max_tenant_bytes, run member, charge base (overhead + session and
# run id bytes), then tool, count, block reason ("" for none) for each tool.
_RUN_FAILURE_LUA = """
local score = redis.call('ZSCORE', KEYS[5], ARGV[5])
if score and tonumber(score) <= tonumber(ARGV[2]) then redis.call('DEL', KEYS[1]) end
local tools, reasons = {}, {}
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local kind, tool = string.sub(fields[i], 1, 2), string.sub(fields[i], 3)
  if kind == 'n:' then tools[tool] = true elseif kind == 'b:' then reasons[tool] = fields[i + 1] end
end
for i = 7, #ARGV, 3 do
  tools[ARGV[i]] = true
  if ARGV[i + 2] ~= '' and not reasons[ARGV[i]] then reasons[ARGV[i]] = ARGV[i + 2] end
end
local charge = 0
for tool in pairs(tools) do charge = charge + tonumber(ARGV[6]) + #tool + #(reasons[tool] or '') end
local held = tonumber(redis.call('HGET', KEYS[2], ARGV[5]) or '0')
local counters = tonumber(redis.call('GET', KEYS[3]) or '0')
if charge > held then
  local data = 0
  for _, size in ipairs(redis.call('HVALS', KEYS[4])) do data = data + tonumber(size) end
  if data + counters - held + charge > tonumber(ARGV[4]) then return false end
end
for i = 7, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[1], 'n:' .. ARGV[i], tonumber(ARGV[i + 1]))
  if ARGV[i + 2] ~= '' then redis.call('HSETNX', KEYS[1], 'b:' .. ARGV[i], ARGV[i + 2]) end
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]))
redis.call('HSET', KEYS[2], ARGV[5], charge)
redis.call('SET', KEYS[3], counters - held + charge)
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[5])
return redis.call('HGETALL', KEYS[1])
"""

# Forget runs' counters and release their charge: the run member ARGV[3], or ("" there) the runs
# past their TTL, up to a batch. KEYS: global run expiry. ARGV: now, batch size, run member or "".
_DROP_RUNS_LUA = """
local members = {ARGV[3]}
if ARGV[3] == '' then
  members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
end
for _, m in ipairs(members) do
  local colon = string.find(m, ':', 1, true)
  local n = tonumber(string.sub(m, 1, colon - 1))
  local base = string.sub(m, colon + 1, colon + n)
  local held = tonumber(redis.call('HGET', base .. ':runcharges', m) or '0')
  local left = tonumber(redis.call('GET', base .. ':runbytes') or '0') - held
  if left > 0 then redis.call('SET', base .. ':runbytes', left) else redis.call('DEL', base .. ':runbytes') end
  redis.call('HDEL', base .. ':runcharges', m)
  redis.call('DEL', string.sub(m, colon + n + 1))
  redis.call('ZREM', KEYS[1], m)
end
return #members
"""

# KEYS: global expiry zset. ARGV: now, batch size, session-hash prefix, tenant-key prefix.
# A member is "<UTF-8 bytes of tenant>:<tenant>:<session id>"; key names count the tenant's
# characters (as Python's len does), so count the bytes that start a UTF-8 character.
_EXPIRE_LUA = """
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, m in ipairs(members) do
  local colon = string.find(m, ':', 1, true)
  local n = tonumber(string.sub(m, 1, colon - 1))
  local tenant = string.sub(m, colon + 1, colon + n)
  local sid = string.sub(m, colon + n + 2)
  local chars = 0
  for i = 1, n do
    local b = string.byte(tenant, i)
    if b < 128 or b >= 192 then chars = chars + 1 end
  end
  local base = chars .. ':' .. tenant
  redis.call('DEL', ARGV[3] .. base .. ':' .. sid)
  redis.call('ZREM', ARGV[4] .. base .. ':expiry', sid)
  redis.call('HDEL', ARGV[4] .. base .. ':bytes', sid)
  redis.call('ZREM', KEYS[1], m)
end
return #members
"""


# Take a parked cell's record if it is still the version read (its tag), and say who took it.
# KEYS: the record's hash, the adopter key. ARGV: tag, claimant, ttl_ms.
_CLAIM_PARKED_LUA = """
if redis.call('HGET', KEYS[1], 'tag') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', tonumber(ARGV[3]))
return 1
"""


def session_key(tenant: str, session_id: str) -> str:
    """Return the hash name of one session; the length prefix keeps tenants containing ':' apart."""
    return f"{_KEY_PREFIX}{len(tenant)}:{tenant}:{session_id}"


def run_key(tenant: str, session_id: str, run_id: str) -> str:
    """Return the hash name of one run's failure counters (length prefixes keep the parts apart)."""
    return f"{_RUN_PREFIX}{len(tenant)}:{tenant}:{len(session_id)}:{session_id}:{run_id}"


def _run_failures(fields: dict[str, str]) -> RunFailures:
    return RunFailures(
        failures={k[2:]: int(v) for k, v in fields.items() if k.startswith("n:")},
        blocked={k[2:]: v for k, v in fields.items() if k.startswith("b:")},
    )


def _session_keys(tenant: str, session_id: str) -> list[str]:
    """The keys the commit and delete scripts take (see ``_COMMIT_LUA``)."""
    return [session_key(tenant, session_id), *_tenant_keys(tenant), _EXPIRY_KEY, _counter_keys(tenant)[1]]


def _tenant_base(tenant: str) -> str:
    return f"{_TENANT_PREFIX}{len(tenant)}:{tenant}"


def _tenant_keys(tenant: str) -> tuple[str, str]:
    """The tenant's expiry sorted set and bytes hash."""
    base = _tenant_base(tenant)
    return base + ":expiry", base + ":bytes"


def _counter_keys(tenant: str) -> tuple[str, str]:
    """The tenant's run charges hash and the sum of its charges (see ``_RUN_FAILURE_LUA``)."""
    base = _tenant_base(tenant)
    return base + ":runcharges", base + ":runbytes"


def _run_member(tenant: str, session_id: str, run_id: str) -> str:
    base = _tenant_base(tenant)
    return f"{len(base.encode('utf-8'))}:{base}{run_key(tenant, session_id, run_id)}"


def _member_prefix(tenant: str) -> str:
    """Start of the tenant's members in the global expiry set (byte length, for the Lua parser)."""
    return f"{len(tenant.encode('utf-8'))}:{tenant}:"


def _score(t: float) -> str:
    return f"{t:.6f}"


class RedisSessionStore:
    """Session store in Redis; safe to share between service processes."""

    def __init__(
        self,
        target: RedisTarget,
        limits: StoreLimits,
        *,
        clock: Callable[[], float] = time.time,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self._clock = clock
        self._limits = limits
        self._link = RedisLink(target, label="session store", timeout_seconds=timeout_seconds)
        self._client = self._link.client
        self._commit_script = self._client.register_script(_COMMIT_LUA)
        self._read_script = self._client.register_script(_READ_LUA)
        self._delete_script = self._client.register_script(_DELETE_LUA)
        self._usage_script = self._client.register_script(_USAGE_LUA)
        self._expire_script = self._client.register_script(_EXPIRE_LUA)
        self._run_failure_script = self._client.register_script(_RUN_FAILURE_LUA)
        self._drop_runs_script = self._client.register_script(_DROP_RUNS_LUA)
        self._claim_parked_script = self._client.register_script(_CLAIM_PARKED_LUA)

    async def get_all(self, tenant: str, session_id: str) -> dict[str, str]:
        """Return the committed entries of one session (none once it expired)."""
        flat = await self._link.call(
            self._read_script(
                keys=[session_key(tenant, session_id), _tenant_keys(tenant)[0]],
                args=[session_id, _score(self._clock())],
            )
        )
        return dict(zip(flat[::2], flat[1::2]))

    async def commit(self, tenant: str, session_id: str, sets: Mapping[str, str], deletes: Collection[str]) -> None:
        """Apply deletes then sets atomically, or nothing if a limit is exceeded."""
        if not sets and not deletes:
            return
        sets = dict(sets)
        deletes = tuple(deletes)
        check_pending(sets, deletes, self._limits)
        limits = self._limits
        now = self._clock()
        args: list[int | float | str] = [
            limits.max_total_bytes,
            limits.max_tenant_bytes,
            limits.max_tenant_sessions,
            _score(now),
            _score(now + limits.session_ttl_seconds),
            max(1, int(limits.session_ttl_seconds * 1000)),
            session_key(tenant, ""),
            _member_prefix(tenant),
            session_id,
            len(deletes),
            *deletes,
        ]
        for key, text in sets.items():
            args += (key, text)
        outcome, amount = await self._link.run_script(self._commit_script, _session_keys(tenant, session_id), args)
        if int(outcome) == 0:
            raise total_limit_error(int(amount), limits)
        if int(outcome) == 2:
            raise tenant_bytes_error(int(amount), limits)
        if int(outcome) == 3:
            raise tenant_sessions_error(int(amount), limits)

    async def sizes(self, tenant: str, session_id: str) -> dict[str, int]:
        """Return key -> UTF-8 bytes of its JSON value."""
        entries = await self.get_all(tenant, session_id)
        return {key: len(text.encode("utf-8")) for key, text in entries.items()}

    async def delete_session(self, tenant: str, session_id: str) -> bool:
        """Drop every entry of one session; return whether it had any."""
        removed = await self._link.run_script(
            self._delete_script,
            _session_keys(tenant, session_id),
            [session_id, _score(self._clock()), _member_prefix(tenant) + session_id],
        )
        return int(removed) > 0

    async def usage(self, tenant: str) -> tuple[int, int]:
        """Return ``(bytes, sessions)`` of the tenant's live sessions."""
        total, count = await self._link.call(
            self._usage_script(keys=[*_tenant_keys(tenant), _counter_keys(tenant)[1]], args=[_score(self._clock())])
        )
        return int(total), int(count)

    async def expire(self) -> int:
        """Remove every session past its TTL, in batches (each batch is one atomic script), and release
        the charge of every run whose counters are past theirs."""
        removed = 0
        while True:
            batch = int(
                await self._link.call(
                    self._expire_script(
                        keys=[_EXPIRY_KEY], args=[_score(self._clock()), _EXPIRE_BATCH, _KEY_PREFIX, _TENANT_PREFIX]
                    )
                )
            )
            removed += batch
            if batch < _EXPIRE_BATCH:
                break
        while await self._drop_runs(_score(self._clock()), "", acked=False) >= _EXPIRE_BATCH:
            pass
        return removed

    async def add_run_failures(self, increments: Sequence[RunIncrement]) -> list[RunFailures | None]:
        """Add every increment (one script each, atomically) in one round trip."""
        if not increments:
            return []
        limits = self._limits
        now = self._clock()
        ttl_ms = max(1, int(limits.session_ttl_seconds * 1000))
        pipe = self._link.pipeline()
        for inc in increments:
            base = RUN_COUNTER_OVERHEAD + len((inc.session_id + inc.run_id).encode("utf-8"))
            args: list[int | float | str] = [
                ttl_ms,
                _score(now),
                _score(now + limits.session_ttl_seconds),
                limits.max_tenant_bytes,
                _run_member(inc.tenant, inc.session_id, inc.run_id),
                base,
            ]
            for tool, count in inc.failures.items():
                args += (tool, count, inc.blocked.get(tool, ""))
            keys = [
                run_key(inc.tenant, inc.session_id, inc.run_id),
                *_counter_keys(inc.tenant),
                _tenant_keys(inc.tenant)[1],
                _RUN_EXPIRY_KEY,
            ]
            await self._run_failure_script(keys=keys, args=args, client=pipe)  # queued: no round trip yet
        answers = await self._link.execute(pipe, acked=True)
        return [None if flat is None else _run_failures(dict(zip(flat[::2], flat[1::2]))) for flat in answers]

    async def run_failures(self, tenant: str, session_id: str, run_id: str) -> RunFailures:
        """Return the run's live failure counters."""
        fields = await self._link.call(self._client.hgetall(run_key(tenant, session_id, run_id)))
        return _run_failures({str(k): str(v) for k, v in fields.items()})  # decode_responses: already str

    async def delete_run_failures(self, tenant: str, session_id: str, run_id: str) -> None:
        """Forget the run's failure counters (and release their charge)."""
        await self._drop_runs("0", _run_member(tenant, session_id, run_id), acked=True)

    async def _drop_runs(self, now: str, member: str, *, acked: bool) -> int:
        keys, args = [_RUN_EXPIRY_KEY], [now, str(_EXPIRE_BATCH), member]
        if acked:
            return int(await self._link.run_script(self._drop_runs_script, keys, args))
        return int(await self._link.call(self._drop_runs_script(keys=keys, args=args)))

    # Replicas sharing this store find each other here (service/cluster/membership.py): each one's
    # key holds the URL where peers reach it and lives only as long as its heartbeats renew it.

    async def beat(self, replica_id: str, url: str, ttl_ms: int) -> None:
        """Say that ``replica_id`` is alive at ``url`` for the next ``ttl_ms``."""
        await self._link.call(self._client.set(_REPLICA_PREFIX + replica_id, url, px=ttl_ms))

    async def replica_url(self, replica_id: str) -> str | None:
        """Where a live replica is reached; None once its heartbeats stopped."""
        url = await self._link.call(self._client.get(_REPLICA_PREFIX + replica_id))
        return None if url is None else str(url)

    async def forget_replica(self, replica_id: str) -> None:
        """Drop a stopping replica's key at once, rather than when its heartbeat expires."""
        await self._link.call(self._client.delete(_REPLICA_PREFIX + replica_id))

    async def record_drained(self, replica_id: str, fates: Mapping[str, str], ttl_ms: int) -> None:
        """Say what became of each cell a drained replica still held (cell id -> fate), for ``ttl_ms``."""
        if not fates:
            return
        key = _DRAINED_PREFIX + replica_id
        pipe = self._link.pipeline()
        pipe.hset(key, items=[part for pair in fates.items() for part in pair])
        pipe.pexpire(key, ttl_ms)
        await self._link.execute(pipe, acked=True)

    async def drained_cell(self, replica_id: str, cell_id: str) -> str | None:
        """The fate a drained replica recorded for one of its cells; None if it recorded none."""
        fate = await self._link.call(self._client.hget(_DRAINED_PREFIX + replica_id, cell_id))
        return None if fate is None else str(fate)

    # What replicas share besides cells' routing (service/mcp_server/request_state.py): a secret every
    # replica reads alike, and claims that succeed once.  Both are acknowledged writes (redis_wait_replicas):
    # after a failover every replica still reads the same secret, and a used claim stays used.

    async def shared_secret(self, name: str) -> bytes:
        """The secret ``name``: 32 random bytes made by the first replica that asks, kept until deleted."""
        key = _SECRET_PREFIX + name
        pipe = self._link.pipeline()
        pipe.set(key, secrets.token_hex(32), nx=True)
        pipe.get(key)
        _, value = await self._link.execute(pipe, acked=True)
        try:
            secret = bytes.fromhex(str(value))
        except ValueError:
            secret = b""
        if len(secret) < 32:
            raise StoreError(f"the shared secret {key} in the store is not 64 hex digits; delete it to make a new one")
        return secret

    async def first_use(self, name: str, expires_at_ms: int) -> bool:
        """True for the first claim of ``name``, False for every later one until ``expires_at_ms`` (wall clock)."""
        pipe = self._link.pipeline()
        pipe.set(_ONCE_PREFIX + name, "1", nx=True, pxat=expires_at_ms)
        [done] = await self._link.execute(pipe, acked=True)
        return bool(done)

    # Parked Python cells (service/runtime/parked_cells.py): a record per cell (base64: the client decodes
    # answers as text), taken once by the replica that adopts the cell, which then names itself under the
    # cell's id so peers relay to it.  Acknowledged writes, like the secret's: a failover loses none.

    async def keep_parked(self, cell_id: str, record: bytes, tag: str, expires_at: float) -> None:
        """Keep (or replace) the record of a parked cell until ``expires_at`` (the store's clock)."""
        key = _PARKED_PREFIX + cell_id
        pipe = self._link.pipeline()
        pipe.hset(key, mapping={"record": base64.b64encode(record).decode("ascii"), "tag": tag})
        pipe.pexpire(key, max(1, int((expires_at - self._clock()) * 1000)))
        await self._link.execute(pipe, acked=True)

    async def parked_record(self, cell_id: str) -> bytes | None:
        """The live record of a parked cell, or None."""
        text = await self._link.call(self._client.hget(_PARKED_PREFIX + cell_id, "record"))
        if text is None:
            return None
        try:
            return base64.b64decode(str(text), validate=True)
        except binascii.Error:
            raise StoreError(f"the parked cell record {_PARKED_PREFIX + cell_id} is not base64") from None

    async def claim_parked(self, cell_id: str, tag: str, claimant: str, ttl_seconds: float) -> bool:
        """Take the record with this ``tag`` away and name ``claimant`` its adopter for ``ttl_seconds`` (True),
        once: a second claim, or one of another version of the record, finds nothing (False)."""
        keys = [_PARKED_PREFIX + cell_id, _ADOPTED_PREFIX + cell_id]
        done = await self._link.run_script(
            self._claim_parked_script, keys, [tag, claimant, max(1, int(ttl_seconds * 1000))]
        )
        return int(done) == 1

    async def drop_parked(self, cell_id: str) -> None:
        """Forget a parked cell's record (it resumed or ended where it is)."""
        pipe = self._link.pipeline()
        pipe.delete(_PARKED_PREFIX + cell_id)
        await self._link.execute(pipe, acked=True)

    async def has_parked(self, cell_id: str) -> bool:
        """Whether a record of the parked cell is kept (a peer then takes it up instead of answering 404)."""
        return bool(await self._link.call(self._client.exists(_PARKED_PREFIX + cell_id)))

    async def adopter_of(self, cell_id: str) -> str | None:
        """The replica that took up ``cell_id`` after its own replica stopped, if one did."""
        replica = await self._link.call(self._client.get(_ADOPTED_PREFIX + cell_id))
        return None if replica is None else str(replica)

    async def ping(self) -> None:
        """Raise StoreUnavailableError unless the server answers PING."""
        await self._link.call(self._client.ping())

    async def close(self) -> None:
        """Close the connection pool; safe to call twice."""
        await self._link.close()
