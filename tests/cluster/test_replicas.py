"""Three replicas behind a round-robin HAProxy behave like one service.

Each request goes to whichever replica the front (or the test) picks; a cell lives on the replica
that started it, and every other replica relays its wait, cancel and status there.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx
import pytest

from service.cluster.identity import holder_of
from tests.cluster.conftest import REPLICA_TTL_SECONDS
from tests.support.cluster import Cluster
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow

WEATHER = {"name": "get_weather", "input_schema": {"type": "object"}}
# Three client-tool calls one after the other: three waits, each through whatever replica answers.
THREE_CALLS = """
let sum = 0;
for (const city of ["Oslo", "Lima", "Pune"]) { sum += (await get_weather({city})).temp; }
return sum;
"""
PARKS = 'return (await get_weather({city: "Oslo"})).temp;'


def post(base: str, path: str, body: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
    return httpx.post(base + path, json=body if body is not None else {}, timeout=30.0, **kw)


def exec_parked(base: str, code: str = PARKS, **fields: Any) -> dict[str, Any]:
    r = post(base, "/v1/exec", {"code": code, "client_tools": [WEATHER], **fields})
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["status"] == "waiting", env
    return env  # type: ignore[no-any-return]


def answer_raw(base: str, env: dict[str, Any], temp: int, timeout_ms: int | None = None) -> httpx.Response:
    """Post the result of the cell's pending client-tool call through ``base``."""
    [call] = env["pending_tool_calls"]
    body: dict[str, Any] = {"tool_results": [{"id": call["id"], "ok": True, "value": {"temp": temp}}]}
    if timeout_ms is not None:
        body["timeout_ms"] = timeout_ms
    return post(base, f"/v1/cells/{env['cell_id']}/wait", body)


def answer(base: str, env: dict[str, Any], temp: int) -> dict[str, Any]:
    """``answer_raw`` that must succeed; returns the next envelope."""
    r = answer_raw(base, env, temp)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_exec_and_every_wait_through_the_front(cluster: Cluster):
    """Cells started through the front finish through the front, whichever replica each wait reaches."""
    cells = [exec_parked(cluster.front, THREE_CALLS) for _ in range(3)]
    assert len({holder_of(env["cell_id"]) for env in cells} - {None}) >= 2  # round robin spread the cells
    for env in cells:
        served_by = set()
        for temp in (1, 10, 100):
            r = answer_raw(cluster.front, env, temp)
            assert r.status_code == 200, r.text
            served_by.add(r.headers["x-served-by"])
            env = r.json()
        assert (env["status"], env["value"]) == ("completed", 111), env
        assert len(served_by) >= 2, served_by  # so at least one wait reached a replica that relayed it


def test_status_wait_and_cancel_through_other_replicas(cluster: Cluster):
    """Status and client-tool results through replica B, cancel through C, of cells started on A."""
    a, b, c = (r.base for r in cluster.replicas)
    env = exec_parked(a)
    status = httpx.get(f"{b}/v1/cells/{env['cell_id']}", timeout=10)
    assert status.status_code == 200, status.text
    assert status.json()["status"] == "waiting"
    assert status.json()["pending_tool_calls"] == env["pending_tool_calls"]
    done = answer(c, env, 21)
    assert (done["status"], done["value"]) == ("completed", 21)
    finished = httpx.get(f"{b}/v1/cells/{env['cell_id']}", timeout=10)
    assert finished.status_code == 200 and finished.json()["status"] == "completed", finished.text

    other = exec_parked(a)
    cancelled = post(c, f"/v1/cells/{other['cell_id']}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "failed" and cancelled.json()["code"] == "aborted"
    gone = post(b, f"/v1/cells/{other['cell_id']}/wait")
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "cell_not_found", gone.text


def test_relayed_requests_are_authorised_by_the_holder(cluster: Cluster):
    """A relayed request keeps its caller: another tenant's or no key is refused exactly as on the holder."""
    a, b, _ = (r.base for r in cluster.replicas)
    env = exec_parked(a)
    wrong_session = post(b, f"/v1/cells/{env['cell_id']}/wait", {"session_id": "not-its-session"})
    assert wrong_session.status_code == 403, wrong_session.text
    forged = httpx.get(f"{b}/v1/cells/{env['cell_id']}", headers={"x-codemode-forwarded-by": "x"}, timeout=10)
    assert forged.status_code == 404, forged.text  # a request claiming to be relayed is never relayed again
    post(a, f"/v1/cells/{env['cell_id']}/cancel")


def test_second_concurrent_wait_is_409_across_replicas(cluster: Cluster):
    """While a wait through B runs a cell of A, a wait through C answers 409 wait_in_progress."""
    a, b, c = (r.base for r in cluster.replicas)
    env = exec_parked(a, 'await get_weather({city: "Oslo"}); while (true) {}')
    cell = env["cell_id"]
    first: list[httpx.Response] = []
    holder = threading.Thread(target=lambda: first.append(answer_raw(b, env, 1, timeout_ms=20000)))
    holder.start()
    try:
        poll_until(
            lambda: httpx.get(f"{c}/v1/cells/{cell}", timeout=10).json()["status"] == "running",
            "the first wait reports running",
        )
        second = post(c, f"/v1/cells/{cell}/wait", {"timeout_ms": 1000})
        assert second.status_code == 409, second.text
        assert second.json()["error"]["code"] == "wait_in_progress"
    finally:
        post(a, f"/v1/cells/{cell}/cancel")  # ends the first wait too
        holder.join(30)
    assert first and first[0].status_code == 200 and first[0].json()["code"] == "aborted", first


def test_session_store_is_shared_by_the_replicas(cluster: Cluster):
    """A store write committed by a cell on A is read by a cell on B and listed through C."""
    a, b, c = (r.base for r in cluster.replicas)
    sid = "s-" + uuid.uuid4().hex[:12]
    wrote = post(a, "/v1/exec", {"code": 'await store("k", {n: 7}); return 1', "session_id": sid}).json()
    assert wrote["status"] == "completed", wrote
    read = post(b, "/v1/exec", {"code": 'return await load("k")', "session_id": sid}).json()
    assert read["value"] == {"n": 7}, read
    listed = httpx.get(f"{c}/v1/sessions/{sid}/store", timeout=10).json()
    assert [k["key"] for k in listed["keys"]] == ["k"]


def test_killed_replica_cells_answer_stopped_and_the_others_are_untouched(cluster: Cluster, tmp_path):
    """After kill -9 of a replica, its parked cells answer 404 "stopped" from every other replica once its
    heartbeat expires; another replica's parked cell still resumes."""
    doomed = cluster.add_replica(tmp_path / "doomed", env={"CODEMODE_REPLICA_TTL_SECONDS": str(REPLICA_TTL_SECONDS)})
    lost = [exec_parked(doomed.base) for _ in range(2)]
    kept = exec_parked(cluster.replicas[0].base)
    doomed.kill()
    a, b, _ = (r.base for r in cluster.replicas)

    def stopped() -> httpx.Response | None:
        r = httpx.get(f"{b}/v1/cells/{lost[0]['cell_id']}", timeout=10)
        # Until the heartbeat expires the replica is only unreachable (503, retry); then it has stopped.
        assert r.status_code in (404, 503), r.text
        return r if r.status_code == 404 else None

    # Half the longest replica_ttl_seconds (60 s): the doomed replica's own 2 s TTL ended it, and a loaded
    # machine has the time to see it.
    gone = poll_until(stopped, "the dead replica's cell answers 404", timeout_s=30)
    assert gone.json()["error"]["code"] == "cell_not_found"
    assert "stopped" in gone.json()["error"]["message"]
    for base in (a, cluster.front):
        r = post(base, f"/v1/cells/{lost[1]['cell_id']}/wait")
        assert r.status_code == 404 and "stopped" in r.json()["error"]["message"], r.text
    done = answer(b, kept, 5)
    assert (done["status"], done["value"]) == ("completed", 5)


def test_redis_outage_answers_503_and_local_cells_keep_running(cluster: Cluster):
    """With Redis down: a cell of another replica and the session store answer 503 with Retry-After naming
    the store; a replica's own parked cell still resumes and new cells still run. Redis comes back."""
    a, b, _ = (r.base for r in cluster.replicas)
    local = exec_parked(a)
    remote = exec_parked(b)
    cluster.stop_redis()
    try:
        # Every replica's /readyz now fails; HAProxy keeps sending requests to them ("-open" servers).
        # With store=optional (a Kubernetes readiness probe), the replica stays ready and says why not quite.
        poll_until(lambda: httpx.get(f"{a}/readyz", timeout=10).status_code == 503, "A reports the store down")
        optional = httpx.get(f"{a}/readyz?store=optional", timeout=10)
        assert optional.status_code == 200 and optional.json()["checks"]["store"].startswith("unavailable"), (
            optional.text
        )
        poll_until(
            lambda: httpx.get(f"{cluster.front}/healthz", timeout=10).headers["x-served-by"].endswith("-open"),
            "HAProxy fails open to the replicas",
        )

        def relayed_status() -> httpx.Response | None:
            # A's address book may still hold B for one heartbeat period; then it needs the store.
            r = httpx.get(f"{a}/v1/cells/{remote['cell_id']}", timeout=30)
            assert r.status_code in (200, 503), r.text
            return r if r.status_code == 503 else None

        relayed = poll_until(relayed_status, "a relayed status needs the store")
        for r in (
            relayed,
            post(a, f"/v1/cells/{remote['cell_id']}/wait"),
            httpx.get(f"{cluster.front}/v1/sessions/s1/store", timeout=30),
        ):
            assert r.status_code == 503, r.text
            assert r.headers["retry-after"] == "1"
            assert r.json()["error"]["code"] == "store_unavailable"
            assert "store" in r.json()["error"]["message"] and "unavailable" in r.json()["error"]["message"]
        done = answer(a, local, 3)
        assert (done["status"], done["value"]) == ("completed", 3)
        fresh = post(cluster.front, "/v1/exec", {"code": "return 1 + 1"})
        assert fresh.status_code == 200 and fresh.json()["value"] == 2, fresh.text
    finally:
        cluster.restart_redis()
    # The replicas renew their heartbeats on their own once the store is back.
    poll_until(
        lambda: httpx.get(f"{a}/v1/cells/{remote['cell_id']}", timeout=10).status_code == 200,
        "a relayed status works again after Redis returns",
    )
    assert answer(a, remote, 4)["value"] == 4


def test_background_events_stream_through_another_replica(cluster: Cluster):
    """A background cell started on A streams its events through B (relayed as they come), Last-Event-ID included."""
    from tests.support.sse import events, read_until

    a, b, _ = (r.base for r in cluster.replicas)
    # After a Redis restart (an earlier test) B sees A again only at A's next heartbeat.
    probe = exec_parked(a)
    poll_until(
        lambda: httpx.get(f"{b}/v1/cells/{probe['cell_id']}", timeout=10).status_code == 200,
        "B relays to A again",
        timeout_s=3 * REPLICA_TTL_SECONDS,
    )
    post(a, f"/v1/cells/{probe['cell_id']}/cancel")
    code = 'text("one"); await new Promise(r => setTimeout(r, 300)); text("two"); return 2'
    r = post(a, "/v1/exec", {"code": code, "background": True})
    assert r.status_code == 200 and r.json()["status"] == "running", r.text
    cell_id = r.json()["cell_id"]
    with httpx.stream("GET", f"{b}/v1/cells/{cell_id}/events", timeout=30) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        first = read_until(events(response), "output")
    with httpx.stream(
        "GET", f"{b}/v1/cells/{cell_id}/events", timeout=30, headers={"Last-Event-ID": str(first[-1].id)}
    ) as response:
        rest = read_until(events(response), "envelope")
    texts = [e.data["text"] for e in first + rest if e.kind == "output"]
    assert texts == ["one", "two"], first + rest
    assert rest[-1].data["status"] == "completed" and rest[-1].data["value"] == 2


def test_a_result_saved_on_one_replica_loads_on_another(cluster: Cluster):
    """results.save on A, results.load of the same (session, run) on B: saved results live in Redis."""
    a, b, _ = (r.base for r in cluster.replicas)
    scope = {"session_id": f"s-{uuid.uuid4().hex[:8]}", "run_id": "turn-1"}
    saved = post(a, "/v1/exec", {"code": "return (await results.save([1, 2, 3])).id", **scope}).json()
    assert saved["status"] == "completed", saved
    loaded = post(b, "/v1/exec", {"code": f"return await results.load({saved['value']!r})", **scope}).json()
    assert loaded["status"] == "completed" and loaded["value"] == [1, 2, 3], loaded
    other = post(
        b,
        "/v1/exec",
        {
            "code": f"try {{ return await results.load({saved['value']!r}); }} catch (e) {{ return 'ERR ' + e.code; }}",
            "session_id": scope["session_id"],
            "run_id": "turn-2",
        },
    ).json()
    assert other["status"] == "completed" and str(other["value"]).startswith("ERR "), other  # another run: unseen
