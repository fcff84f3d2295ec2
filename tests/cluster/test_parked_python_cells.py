"""A parked Python cell outlives the replica holding it: kill -9 the holder while the cell waits for a
person's approval, approve through another replica, and the cell finishes there with the value the holder
would have given.  One real redis-server, real `codemode serve` replicas (tests/support/cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service.cluster.identity import holder_of
from tests.cluster.conftest import REPLICA_TTL_SECONDS
from tests.support.cluster import Cluster, running_cluster
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow

CONFIG = """
[tools]
plugins = ["service.demo.shipping"]
approve = ["quote_shipping"]
"""
#: Two approvals in a row, with state of its own across both pauses.
QUOTES = """
seen = ["start"]
q = await quote_shipping(origin="DE", destination="FR", weight_kg=2)
seen.append(q["carrier"])
r = await quote_shipping(origin="DE", destination="IT", weight_kg=3)
[seen, q["carrier"], r["carrier"]]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("cluster")
    env = {"CODEMODE_REPLICA_TTL_SECONDS": str(REPLICA_TTL_SECONDS)}
    with running_cluster(workdir, 2, env=env, config=CONFIG) as c:
        yield c


def post(base: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(base + path, json=body, timeout=60.0)


def approval(env: dict[str, Any]) -> dict[str, Any]:
    [entry] = env["pending_tool_calls"]
    assert entry["method"] == "approval", entry
    return {"approvals": [{"id": entry["id"], "approve": True}]}


def test_a_parked_python_cell_resumes_on_another_replica_after_its_holder_is_killed(cluster: Cluster, tmp_path):
    doomed = cluster.add_replica(tmp_path / "doomed", env={"CODEMODE_REPLICA_TTL_SECONDS": str(REPLICA_TTL_SECONDS)})
    r = post(doomed.base, "/v1/exec", {"code": QUOTES, "language": "python"})
    env = r.json()
    assert env["status"] == "waiting", env
    cell_id = env["cell_id"]
    # What the holder would answer: the same cell run to its end on a live replica.
    a, b = (replica.base for replica in cluster.replicas)
    control = post(a, "/v1/exec", {"code": QUOTES, "language": "python"}).json()
    control = post(a, f"/v1/cells/{control['cell_id']}/wait", approval(control)).json()
    expected = post(a, f"/v1/cells/{control['cell_id']}/wait", approval(control)).json()
    assert expected["status"] == "completed", expected

    doomed.kill()

    def taken_up() -> httpx.Response | None:
        # Until the doomed replica's heartbeat expires it is only unreachable (503, retry).
        r = post(b, f"/v1/cells/{cell_id}/wait", approval(env))
        assert r.status_code in (200, 503), r.text
        return r if r.status_code == 200 else None

    second = poll_until(taken_up, "another replica takes the cell up", timeout_s=30).json()
    assert second["status"] == "waiting" and second["cell_id"] == cell_id, second
    # Parked again on B; the next approval goes through A, which relays it to B (the cell's id still names
    # the dead replica: the store says who took it up).
    assert holder_of(cell_id) not in {holder_of(control["cell_id"])}
    done = post(a, f"/v1/cells/{cell_id}/wait", approval(second)).json()
    assert done["status"] == "completed", done
    assert done["value"] == expected["value"] and done["value"][0] == ["start", expected["value"][1]], done
    # Used once: a replayed approval finds the cell finished, wherever it is sent.
    again = post(b, f"/v1/cells/{cell_id}/wait", approval(env))
    assert again.status_code == 404, again.text
