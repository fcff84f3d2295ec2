"""One real cluster per module: redis-server, three `codemode serve` replicas, HAProxy round robin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.cluster import Cluster, running_cluster

#: Replicas declare a peer stopped this long after its last heartbeat (the default is 6 s).
REPLICA_TTL_SECONDS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(
        tmp_path_factory.mktemp("cluster"), 3, env={"CODEMODE_REPLICA_TTL_SECONDS": str(REPLICA_TTL_SECONDS)}
    ) as c:
        yield c
