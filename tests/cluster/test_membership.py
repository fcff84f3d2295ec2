"""A replica's heartbeat and its address book of peers, against an in-memory directory."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from service.cluster.drained import DROPPED, Fate
from service.cluster.identity import holder_of
from service.cluster.membership import Membership
from service.cluster.relay import open_on_holder
from service.cluster.replica import Replica
from service.errors import CellDrained, CellNotFound, ReplicaUnavailable, StoreUnavailable
from service.settings import Settings
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
        self.drained: dict[str, dict[str, str]] = {}

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

    async def record_drained(self, replica_id: str, fates: Mapping[str, str], ttl_ms: int) -> None:
        self.drained.setdefault(replica_id, {}).update(fates)

    async def drained_cell(self, replica_id: str, cell_id: str) -> str | None:
        if self.down:
            raise StoreUnavailableError("down")
        return self.drained.get(replica_id, {}).get(cell_id)

    async def adopter_of(self, cell_id: str) -> str | None:
        return None  # no parked cell of a stopped replica was taken up here

    async def has_parked(self, cell_id: str) -> bool:
        return False


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


async def _relay(replica: Replica, cell_id: str) -> None:
    await open_on_holder(
        replica, holder_of(cell_id) or "", cell_id, "GET", f"/v1/cells/{cell_id}", [], b"", relayed_here=False
    )


async def test_a_heartbeat_missing_right_after_a_store_outage_is_retry_not_stopped():
    """Right after the store failed this replica, a peer whose heartbeat is gone answers 503 (it may only
    have lapsed while nobody could renew it); once a heartbeat period has passed with the store up, the
    same cell answers 404 "stopped".  A cell the peer's drain recorded answers cell_drained either way."""
    directory = Directory()
    replica = Replica(Settings(replica_ttl_seconds=2), directory)
    cell = "cell_aaaaaaaaaaaa.00000000-0000-4000-8000-000000000000"
    drained = "cell_aaaaaaaaaaaa.00000000-0000-4000-8000-000000000001"
    directory.drained["aaaaaaaaaaaa"] = {drained: Fate(DROPPED, 1.0).text()}
    try:
        directory.down = True
        with pytest.raises(StoreUnavailable):
            await _relay(replica, cell)
        directory.down = False
        assert replica.membership.unsure()
        with pytest.raises(ReplicaUnavailable, match="not known yet") as unsure:
            await _relay(replica, cell)
        assert unsure.value.retry_after == 1
        with pytest.raises(CellDrained):
            await _relay(replica, drained)
        await apoll_until(lambda: not replica.membership.unsure(), "a heartbeat period with the store up")
        with pytest.raises(CellNotFound, match="stopped"):
            await _relay(replica, cell)
        with pytest.raises(CellDrained, match="Start the cell again"):
            await _relay(replica, drained)
    finally:
        await replica.peers.close()
