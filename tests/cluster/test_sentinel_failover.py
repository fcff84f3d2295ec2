"""Two replicas behind HAProxy on a Sentinel-managed Redis (a primary, two replicas, three Sentinels, all
real): the primary is SIGKILLed while cells store entries, save results and are resumed through the
other replica.  Within the stated bound everything works again, and every cell that completed before,
during or after the failover without a warning (a cell whose commit could not be confirmed completes
with one: "… may not have been saved") still has its store writes and saved results.

The bound (docs/operations/deploy.md): Sentinel's down-after-milliseconds (1 s in this test) plus its
vote and promotion plus one store call (store_timeout_ms); RECOVERY_BOUND_S adds room for a loaded
machine.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster.conftest import REPLICA_TTL_SECONDS
from tests.cluster.test_replicas import WEATHER, post
from tests.support.cluster import Cluster, running_cluster
from tests.support.sentinels import SentinelGroup, sentinel_group

pytestmark = pytest.mark.slow

RECOVERY_BOUND_S = 45.0
BEFORE, AFTER = 12, 12  # completed operations before the kill, and after the first one that follows it
WRITE = "await store({key}, {n}); return (await results.save([{n}])).id;"


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, SentinelGroup]]:
    workdir = tmp_path_factory.mktemp("failover")
    with sentinel_group(workdir / "redis") as group:
        env = {"CODEMODE_REPLICA_TTL_SECONDS": str(REPLICA_TTL_SECONDS)}
        with running_cluster(workdir, 2, env=env, sentinels=group) as cluster:
            yield cluster, group


class Load:
    """Threads that keep writing through the front and resuming cells across replicas, recording what
    was acknowledged (a completed envelope) and every other answer."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.written: list[tuple[str, str, str, int, str]] = []  # session, run, key, value, result id
        self.resumed = 0
        self.refusals: list[str] = []
        self.killed_at: float | None = None
        self.back_at: float | None = None
        self.after_kill = 0

    def _done(self) -> None:
        with self.lock:
            if self.killed_at is not None:
                self.after_kill += 1
                if self.back_at is None:
                    self.back_at = time.monotonic()

    def _refused(self, r: httpx.Response) -> None:
        with self.lock:
            self.refusals.append(f"{r.status_code} {r.text[:300]}")

    def writer(self, n: int) -> None:
        session = f"s-{n}-{uuid.uuid4().hex[:6]}"
        i = 0
        while not self.stop.is_set():
            i += 1
            run, key = f"r{i}", f"k{i}"
            body = {"code": WRITE.format(key=repr(key), n=i), "session_id": session, "run_id": run}
            try:
                r = post(self.cluster.front, "/v1/exec", body)
            except httpx.TransportError as exc:
                self.refusals.append(f"transport {exc!r}")
                continue
            env = r.json() if r.status_code == 200 else {}
            # Acknowledged: completed, and no warning that the store writes could not be confirmed (a cell
            # whose commit failed still completes, saying so: its writes may or may not be there).
            if env.get("status") == "completed" and not env.get("warnings"):
                with self.lock:
                    self.written.append((session, run, key, i, env["value"]))
                self._done()
            else:
                self._refused(r)
                time.sleep(0.1)

    def resumer(self) -> None:
        """A cell parked on one replica, its client-tool result sent through the other (a relayed wait)."""
        a, b = (r.base for r in self.cluster.replicas)
        while not self.stop.is_set():
            try:
                r = post(
                    a,
                    "/v1/exec",
                    {"code": 'return (await get_weather({city: "Oslo"})).temp;', "client_tools": [WEATHER]},
                )
                if r.status_code != 200 or r.json()["status"] != "waiting":
                    self._refused(r)
                    time.sleep(0.1)
                    continue
                env = r.json()
                [call] = env["pending_tool_calls"]
                result = {"tool_results": [{"id": call["id"], "ok": True, "value": {"temp": 3}}]}
                done = post(b, f"/v1/cells/{env['cell_id']}/wait", result)
                while done.status_code == 503 and not self.stop.is_set():  # the relay needs the store
                    time.sleep(0.2)
                    done = post(b, f"/v1/cells/{env['cell_id']}/wait", result)
            except httpx.TransportError as exc:
                self.refusals.append(f"transport {exc!r}")
                continue
            if done.status_code == 200 and done.json().get("value") == 3:
                with self.lock:
                    self.resumed += 1
                self._done()
            else:
                self._refused(done)


def test_a_primary_killed_mid_load_loses_nothing_acknowledged(ha: tuple[Cluster, SentinelGroup]):
    cluster, group = ha
    load = Load(cluster)
    threads = [threading.Thread(target=load.writer, args=(n,)) for n in range(2)]
    threads.append(threading.Thread(target=load.resumer))
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 120
        while len(load.written) < BEFORE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(load.written) >= BEFORE, load.refusals[-3:]
        old = group.kill_primary()
        load.killed_at = time.monotonic()
        deadline = load.killed_at + RECOVERY_BOUND_S + 60
        while load.after_kill < AFTER and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        load.stop.set()
        for t in threads:
            t.join(90)
    assert load.after_kill >= AFTER, load.refusals[-5:]
    assert load.back_at is not None and load.back_at - load.killed_at < RECOVERY_BOUND_S
    assert group.wait_for_new_primary(old) != old
    # What failed meanwhile said why: the store or the holder unavailable (503, retried), or a cell whose
    # store call failed (an envelope); never a 500, and a live replica's cell never "stopped" (404) because
    # its heartbeat lapsed while no replica could renew one.
    assert not [r for r in load.refusals if r[:3] in ("500", "404")], load.refusals
    assert load.resumed > 0

    a, b = (r.base for r in cluster.replicas)
    for index, (session, run, key, value, result_id) in enumerate(load.written):
        reader = (a, b)[index % 2]
        code = f"return [await load({key!r}), await results.load({result_id!r})];"
        r = post(reader, "/v1/exec", {"code": code, "session_id": session, "run_id": run})
        assert r.status_code == 200 and r.json()["status"] == "completed", r.text
        assert r.json()["value"] == [value, [value]], (session, key, r.json(), load.refusals)
    listed = httpx.get(f"{cluster.front}/v1/sessions/{load.written[-1][0]}/store", timeout=30)
    assert listed.status_code == 200, listed.text
    assert load.written[-1][2] in [k["key"] for k in listed.json()["keys"]]


def test_every_replica_reads_the_new_primary_after_the_failover(ha: tuple[Cluster, SentinelGroup], tmp_path: Path):
    """After the failover each replica writes and reads through the new primary, and a new replica (started
    only now) finds it through the Sentinels."""
    cluster, _ = ha
    late = cluster.add_replica(tmp_path / "late", env={"CODEMODE_REPLICA_TTL_SECONDS": str(REPLICA_TTL_SECONDS)})
    sid = "after-" + uuid.uuid4().hex[:8]
    bases = [r.base for r in cluster.replicas] + [late.base]
    wrote = post(bases[0], "/v1/exec", {"code": 'await store("k", 1); return 1', "session_id": sid}).json()
    assert wrote["status"] == "completed", wrote
    for base in bases[1:]:
        read: dict[str, Any] = post(base, "/v1/exec", {"code": 'return await load("k")', "session_id": sid}).json()
        assert read.get("value") == 1, read
