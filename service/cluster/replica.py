"""This process as one replica of a cluster: its id, its heartbeat, its connections to peers."""

from __future__ import annotations

from service.settings import Settings

from .identity import new_replica_id
from .membership import Membership, ReplicaDirectory
from .peers import PeerClient

# Beyond the longest wait the holder may take: time to write the answer back.
_ANSWER_MARGIN_SECONDS = 15.0


class Replica:
    """Made when the store is shared (redis://); absent for one machine's SQLite store."""

    def __init__(self, settings: Settings, directory: ReplicaDirectory) -> None:
        self.replica_id = new_replica_id()
        self.url = settings.resolved_advertise_url
        self.ttl_seconds = settings.replica_ttl_seconds
        self.membership = Membership(directory, self.replica_id, self.url, settings.replica_ttl_seconds)
        self.peers = PeerClient(self.replica_id, settings.max_timeout_ms / 1000 + _ANSWER_MARGIN_SECONDS)

    async def start(self) -> None:
        await self.membership.start()

    async def close(self) -> None:
        await self.membership.close()
        await self.peers.close()


def replica_for(settings: Settings, store: object) -> Replica | None:
    """A replica when ``store`` can list replicas (Redis), else None (cells are reached only here)."""
    if not isinstance(store, ReplicaDirectory):
        return None
    return Replica(settings, store)
