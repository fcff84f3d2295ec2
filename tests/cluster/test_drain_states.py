"""The drain inside one replica (its app in process, a real redis-server): what it answers while it drains
and after, before the process has stopped.  The whole story, SIGTERM to exit behind HAProxy, is
tests/cluster/test_drain.py."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.test_replicas import WEATHER
from tests.conftest import make_client
from tests.stores.conftest import redis_url  # noqa: F401 - session fixture


def test_a_drained_replica_answers_its_dropped_cells_itself(redis_url: str, tmp_path: Path):  # noqa: F811
    """After the drain (and before the server stops) the replica refuses new cells, reports ``drained`` on
    /readyz, and answers its own parked cell with cell_drained: the same answer its peers give."""
    with make_client(tmp_path, store_url=redis_url, drain_seconds=5) as c:
        parked = c.post(
            "/v1/exec", json={"code": 'return await get_weather({city: "Oslo"});', "client_tools": [WEATHER]}
        ).json()
        assert parked["status"] == "waiting", parked
        services = c.app.state.services
        assert c.portal is not None
        c.portal.call(services.drain.run)
        assert services.drain.state == "drained"
        status = c.get(f"/v1/cells/{parked['cell_id']}")
        assert status.status_code == 404 and status.json()["error"]["code"] == "cell_drained", status.text
        wait = c.post(f"/v1/cells/{parked['cell_id']}/wait", json={})
        assert wait.status_code == 404 and wait.json()["error"]["code"] == "cell_drained", wait.text
        refused = c.post("/v1/exec", json={"code": "return 1"})
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "replica_draining", refused.text
        ready = c.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["drain"].startswith("drained"), ready.text
        assert c.get("/readyz?store=optional").status_code == 503  # draining is never optional


def test_drain_seconds_zero_records_the_held_cells_without_waiting(redis_url: str, tmp_path: Path):  # noqa: F811
    """With drain_seconds = 0 the drain waits for nothing: the cells are recorded and ended at once."""
    with make_client(tmp_path, store_url=redis_url, drain_seconds=0) as c:
        parked = c.post(
            "/v1/exec", json={"code": 'return await get_weather({city: "Oslo"});', "client_tools": [WEATHER]}
        ).json()
        assert c.portal is not None
        c.portal.call(c.app.state.services.drain.run)
        assert list(c.app.state.services.drain.fates) == [parked["cell_id"]]
