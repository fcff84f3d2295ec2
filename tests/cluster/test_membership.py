"""A replica's heartbeat and its address book of peers, against an in-memory directory."""

from __future__ import annotations

import pytest

from service.cluster.membership import Membership
from service.stores.errors import StoreUnavailableError
from tests.support.polling import apoll_until

pytestmark = pytest.mark.anyio


class Directory:
    def __init__(self) -> None:
        self.urls: dict[str, str] = {}
        self.beats = 0
        self.lookups = 0
        self.down = False
        self.refused = 0

    async def beat(self, replica_id: str, url: str, ttl_ms: int) -> None:
        if self.down:
            self.refused += 1
            raise StoreUnavailableError("down")
        self.beats += 1
        self.urls[replica_id] = url

    async def replica_url(self, replica_id: str) -> str | None:
        self.lookups += 1
        if self.down:
            raise StoreUnavailableError("down")
        return self.urls.get(replica_id)

    async def forget_replica(self, replica_id: str) -> None:
        self.urls.pop(replica_id, None)


async def test_heartbeats_continue_through_an_outage_and_stop_at_close():
    """Listed at start, renewed several times per TTL (also after the store was down), removed at close."""
    directory = Directory()
    member = Membership(directory, "r1", "http://10.0.0.1:8000", ttl_seconds=0.3)
    await member.start()
    assert directory.urls == {"r1": "http://10.0.0.1:8000"}
    await apoll_until(lambda: directory.beats >= 3, "renewed heartbeats")
    directory.down = True
    await apoll_until(lambda: directory.refused >= 2, "heartbeats refused by the store")
    beats = directory.beats
    directory.down = False
    await apoll_until(lambda: directory.beats > beats + 1, "heartbeats after an outage")
    await member.close()
    assert directory.urls == {}


async def test_peer_addresses_are_reused_for_one_heartbeat_period_only():
    """A live peer's address is looked up once per period; a stopped one is never remembered."""
    directory = Directory()
    directory.urls["r2"] = "http://10.0.0.2:8000"
    member = Membership(directory, "r1", "http://10.0.0.1:8000", ttl_seconds=60)
    assert await member.peer_url("r2") == "http://10.0.0.2:8000"
    assert await member.peer_url("r2") == "http://10.0.0.2:8000"
    assert directory.lookups == 1
    member.forget_peer("r2")
    del directory.urls["r2"]
    assert await member.peer_url("r2") is None
    assert await member.peer_url("r2") is None
    assert directory.lookups == 3
    directory.down = True
    with pytest.raises(StoreUnavailableError):
        await member.peer_url("r3")
