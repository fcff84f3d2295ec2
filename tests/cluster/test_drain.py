"""SIGTERM drains a replica behind HAProxy: it stops admitting, serves waits and lets running legs finish,
records the cells it still held, leaves, and from then on every replica answers for those cells with
404 ``cell_drained`` ("start the cell again"), never a bare ``cell_not_found``.

Running legs are held open by the ``hold`` tool of tests/support/gate_plugin.py until the test opens a
gate file, so every step waits on an event the test can see, not on time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.conftest import REPLICA_TTL_SECONDS
from tests.cluster.test_replicas import answer, exec_parked, post
from tests.support.cluster import Cluster, running_cluster
from tests.support.gate_plugin import started
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow

CONFIG = '[tools]\nplugins = ["tests.support.gate_plugin"]\n'
ENV = {"CODEMODE_REPLICA_TTL_SECONDS": str(REPLICA_TTL_SECONDS), "CODEMODE_DRAIN_SECONDS": "120"}


@pytest.fixture(scope="module")
def drain_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("drain"), 3, env=ENV, config=CONFIG) as c:
        yield c


def held_exec(base: str, gate: Path, answers: list[httpx.Response]) -> threading.Thread:
    """An exec whose leg runs until ``gate`` opens (its answer goes to ``answers``); returns once it runs."""
    code = f"return (await hold({{gate: {str(gate)!r}}})).opened ? 7 : 0"
    body = {"code": code, "timeout_ms": 60000}
    thread = threading.Thread(target=lambda: answers.append(httpx.post(f"{base}/v1/exec", json=body, timeout=120)))
    thread.start()
    poll_until(started(gate).exists, "the held leg runs")
    return thread


def draining(base: str) -> dict[str, Any] | None:
    r = httpx.get(base + "/readyz", timeout=10)
    return r.json() if r.status_code == 503 and "drain" in r.json()["checks"] else None


def assert_drained(r: httpx.Response) -> None:
    assert r.status_code == 404, r.text
    error = r.json()["error"]
    assert error["code"] == "cell_drained", error
    assert "shut down (drained" in error["message"] and "Start the cell again" in error["message"], error


def test_sigterm_drains_the_replica_and_its_parked_cells_answer_cell_drained(drain_cluster: Cluster, tmp_path: Path):
    """On C: a parked cell, a parked cell answered during the drain, a finished cell and a running leg.
    After SIGTERM C reports draining and refuses new cells (503 replica_draining), a wait relayed from A
    still completes one of its cells, and the running leg finishes; C then exits by itself.  Its other
    parked cell answers 404 cell_drained through A, B and HAProxy; its finished cell stays cell_not_found;
    new cells through HAProxy run."""
    a, b, c = drain_cluster.replicas
    parked = exec_parked(c.base)
    answered_during_drain = exec_parked(c.base)
    finished = post(c.base, "/v1/exec", {"code": "return 1"}).json()
    assert finished["status"] == "completed", finished
    answers: list[httpx.Response] = []
    holder = held_exec(c.base, tmp_path / "gate", answers)

    c.terminate()
    report = poll_until(lambda: draining(c.base), "C reports draining on /readyz")
    assert report["status"] == "unavailable" and report["checks"]["drain"].startswith("draining"), report
    refused = post(c.base, "/v1/exec", {"code": "return 1"})
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "replica_draining"
    assert refused.headers["retry-after"] == "1"
    done = answer(a.base, answered_during_drain, 5)  # relayed to C, which still serves its cells
    assert (done["status"], done["value"]) == ("completed", 5)
    assert not answers and c.process.poll() is None  # the running leg holds the drain open

    (tmp_path / "gate").touch()
    holder.join(60)
    assert answers and answers[0].status_code == 200, answers
    assert (answers[0].json()["status"], answers[0].json()["value"]) == ("completed", 7)
    c.process.wait(60)  # it stops on its own once nothing runs

    for base in (a.base, b.base, drain_cluster.front):
        assert_drained(post(base, f"/v1/cells/{parked['cell_id']}/wait"))
    assert_drained(httpx.get(f"{a.base}/v1/cells/{parked['cell_id']}", timeout=10))
    before = httpx.get(f"{b.base}/v1/cells/{finished['cell_id']}", timeout=10)
    assert before.status_code == 404 and before.json()["error"]["code"] == "cell_not_found", before.text
    fresh = post(drain_cluster.front, "/v1/exec", {"code": "return 1 + 1"})
    assert fresh.status_code == 200 and fresh.json()["value"] == 2, fresh.text


def test_a_leg_still_running_at_drain_seconds_ends_with_an_envelope_and_answers_cell_drained(
    drain_cluster: Cluster, tmp_path: Path
):
    """A replica with drain_seconds = 1 whose leg never finishes: after SIGTERM the leg's request gets a
    failed envelope naming the shutdown (not a dropped connection), and its cell answers cell_drained."""
    a = drain_cluster.replicas[0]
    brief = drain_cluster.add_replica(tmp_path / "brief", env={"CODEMODE_DRAIN_SECONDS": "1"})
    answers: list[httpx.Response] = []
    holder = held_exec(brief.base, tmp_path / "never", answers)
    brief.terminate()
    holder.join(60)
    assert answers and answers[0].status_code == 200, answers
    envelope = answers[0].json()
    assert envelope["status"] == "failed" and "shutting down" in envelope["error"], envelope
    brief.process.wait(60)
    assert_drained(httpx.get(f"{a.base}/v1/cells/{envelope['cell_id']}", timeout=10))
