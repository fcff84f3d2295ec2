"""This replica's heartbeat in the shared store, and where the other live replicas are.

Each replica renews ``codemode:replica:<id> = <advertise_url>`` with a TTL of
``replica_ttl_seconds`` a few times per TTL.  When a replica dies its key expires, and a request
for one of its cells answers "stopped" instead of waiting on an address nobody serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from service.stores.errors import StoreError

from .drained import Fate

log = logging.getLogger("codemode")

# Renewals per TTL: two can be lost (a slow store, a busy loop) before peers see this replica as gone.
BEATS_PER_TTL = 3
# How soon a failed heartbeat is tried again.
_RETRY_SECONDS = 0.25
# Replica ids come from cell ids callers send: however many they make up, the cache stays small
# (an id no replica registered is never cached).
_MAX_KNOWN = 1024


@runtime_checkable
class ReplicaDirectory(Protocol):
    """The part of the Redis store that records live replicas (service/stores/redis_store.py)."""

    async def beat(self, replica_id: str, url: str, ttl_ms: int) -> None: ...

    async def replica_url(self, replica_id: str) -> str | None: ...

    async def forget_replica(self, replica_id: str) -> None: ...

    async def record_drained(self, replica_id: str, fates: Mapping[str, str], ttl_ms: int) -> None: ...

    async def drained_cell(self, replica_id: str, cell_id: str) -> str | None: ...

    async def adopter_of(self, cell_id: str) -> str | None: ...

    async def has_parked(self, cell_id: str) -> bool: ...


class Membership:
    """Keeps this replica listed while it runs; answers where a peer is (None: it stopped)."""

    def __init__(self, directory: ReplicaDirectory, replica_id: str, url: str, ttl_seconds: float) -> None:
        self.directory = directory
        self.replica_id = replica_id
        self.url = url
        self.ttl_seconds = ttl_seconds
        self._beating: asyncio.Task[None] | None = None
        # Peers' addresses, reused for one heartbeat period: a relay then needs no store round trip,
        # and a dead peer is noticed at most one period later (so within 4/3 of the TTL).
        self._known: dict[str, tuple[str, float]] = {}
        # Until then (monotonic), a missing heartbeat may only mean the store was down (or failed over)
        # for longer than the TTL, so that no replica could renew its key: not proof that a peer stopped.
        self._unsure_until = 0.0

    async def start(self) -> None:
        """List this replica before it takes requests (a failure stops the start: the store is down)."""
        await self._beat()
        self._beating = asyncio.ensure_future(self._keep_beating())
        log.info("replica %s joined the cluster; peers reach it at %s", self.replica_id, self.url)

    async def close(self) -> None:
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beating
            self._beating = None
        # Its cells are closed with it: peers may say so now rather than after the TTL.
        with contextlib.suppress(StoreError):
            await self.directory.forget_replica(self.replica_id)

    async def peer_url(self, replica_id: str) -> str | None:
        """Where a live replica is reached; None if its heartbeat is gone (it stopped, unless ``unsure()``).
        Raises StoreError while the store is down."""
        now = time.monotonic()
        known = self._known.get(replica_id)
        if known is not None and known[1] > now:
            return known[0]
        try:
            url = await self.directory.replica_url(replica_id)
        except StoreError:
            self._store_trouble()
            raise
        if url is None:
            self._known.pop(replica_id, None)
        else:
            if len(self._known) >= _MAX_KNOWN:
                self._known = {k: v for k, v in self._known.items() if v[1] > now}
            self._known[replica_id] = (url, now + self.ttl_seconds / BEATS_PER_TTL)
        return url

    async def drained_fate(self, replica_id: str, cell_id: str) -> Fate | None:
        """What a stopped replica's drain recorded for ``cell_id``; None if it recorded nothing (it died, or the
        cell had ended).  Raises StoreError while the store is down."""
        text = await self.directory.drained_cell(replica_id, cell_id)
        return None if text is None else Fate.parse(text)

    async def leave(self, fates: Mapping[str, Fate], keep_seconds: float) -> None:
        """Stop as a drained replica: record each held cell's fate (for ``keep_seconds``), then leave.  Peers
        then answer for those cells from the record; if the store is down, they will say "stopped"."""
        try:
            await self.directory.record_drained(
                self.replica_id, {cell: fate.text() for cell, fate in fates.items()}, int(keep_seconds * 1000)
            )
        except StoreError as exc:
            log.warning(
                "replica %s could not record the %d cells its drain dropped (peers will answer that it stopped): %s",
                self.replica_id,
                len(fates),
                exc,
            )
        await self.close()

    def unsure(self) -> bool:
        """Whether the store failed this replica recently enough that a peer's missing heartbeat may only
        have lapsed during the outage (every replica renews it within one period once the store is back)."""
        return time.monotonic() < self._unsure_until

    def _store_trouble(self) -> None:
        self._unsure_until = time.monotonic() + self.ttl_seconds * (1 + 1 / BEATS_PER_TTL)

    def forget_peer(self, replica_id: str) -> None:
        """Look the peer up again next time (it did not answer at the address we had)."""
        self._known.pop(replica_id, None)

    async def _beat(self) -> None:
        await self.directory.beat(self.replica_id, self.url, int(self.ttl_seconds * 1000))

    async def _keep_beating(self) -> None:
        failing = False
        while True:
            # While failing, try again sooner: once the store is back (a failover done), peers see this
            # replica again within a fraction of a second.
            await asyncio.sleep(
                min(self.ttl_seconds / BEATS_PER_TTL, _RETRY_SECONDS) if failing else self.ttl_seconds / BEATS_PER_TTL
            )
            try:
                await self._beat()
            except StoreError as exc:
                self._store_trouble()
                if not failing:
                    log.warning(
                        "replica %s could not renew its heartbeat (its cells are unreachable from "
                        "other replicas until it can): %s",
                        self.replica_id,
                        exc,
                    )
                failing = True
                continue
            if failing:
                log.info("replica %s renews its heartbeat again", self.replica_id)
            failing = False
