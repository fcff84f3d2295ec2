"""Background cells and their event stream on a real `codemode serve` (uvicorn, worker processes, SSE over a socket).

One server for the module: three tenants, the test tools as a plugin, a 1 s heartbeat and at most
two event streams per tenant.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.support.live_server import codemode_serve
from tests.support.polling import poll_until
from tests.support.sse import SseEvent, events, read_until

pytestmark = pytest.mark.slow

KEYS = {
    "alpha": "ck_test_bg_alpha_0123456789",
    "beta": "ck_test_bg_beta_0123456789",
    "gamma": "ck_test_bg_gamma_0123456789",
}
CONFIG = "\n".join(
    ["[tools]", 'plugins = ["tests.support.echo_plugin"]', ""]
    + [line for tenant, key in KEYS.items() for line in ("[[api_keys]]", f'key = "{key}"', f'tenant = "{tenant}"', "")]
)
ENV = {"CODEMODE_EVENTS_HEARTBEAT_SECONDS": "1", "CODEMODE_TENANT_MAX_EVENT_STREAMS": "2"}
ASK = [{"name": "ask", "description": "Ask the caller"}]


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[tenant]}"}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with codemode_serve(tmp_path_factory.mktemp("background"), env=ENV, config=CONFIG) as url:
        yield url


@pytest.fixture
def http(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, headers=auth("alpha"), timeout=httpx.Timeout(30.0)) as client:
        yield client


def start(http: httpx.Client, code: str, **fields: Any) -> str:
    r = http.post("/v1/exec", json={"code": code, "background": True, **fields})
    assert r.status_code == 200, r.text
    envelope = r.json()
    assert envelope["status"] == "running" and envelope["output"] == [], envelope
    return envelope["cell_id"]  # type: ignore[no-any-return]


def wait(http: httpx.Client, cell_id: str, **body: Any) -> dict[str, Any]:
    r = http.post(f"/v1/cells/{cell_id}/wait", json={"timeout_ms": 20000, **body})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def texts(seen: list[SseEvent]) -> list[str]:
    return [e.data["text"] for e in seen if e.kind == "output"]


def test_output_streams_while_the_cell_sleeps_on_a_timer_and_a_tool(http):
    """Each output entry arrives as its own event when produced (the timer's gap shows between them); the
    cell stops for its client tool with a pending event; the wait that answers it repeats none of that output."""
    cell_id = start(
        http,
        'text("before"); await new Promise(r => setTimeout(r, 800)); text("after timer");'
        'await echo({x: 1, delay: 0.3}); text("after tool"); return await ask({q: 1});',
        client_tools=ASK,
    )
    with http.stream("GET", f"/v1/cells/{cell_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = events(response)
        seen = read_until(stream, "pending")
        assert [e.kind for e in seen] == ["status", "output", "output", "output", "status", "pending"], seen
        assert [e.id for e in seen] == [1, 2, 3, 4, 5, 6]
        assert texts(seen) == ["before", "after timer", "after tool"]
        assert [e.data["status"] for e in seen if e.kind == "status"] == ["running", "waiting"]
        before, after_timer = seen[1], seen[2]
        assert after_timer.at - before.at >= 0.4, "output was held back until later instead of streamed"
        pending = seen[-1].data
        assert pending["reason"] == "pending_tools"
        [call] = pending["pending_tool_calls"]
        assert call["tool"] == "ask" and call["input"] == {"q": 1}
        assert http.get(f"/v1/cells/{cell_id}").json()["status"] == "waiting"

        answered = wait(http, cell_id, tool_results=[{"id": call["id"], "ok": True, "value": 42}])
        assert answered["status"] == "completed" and answered["value"] == 42
        assert answered["output"] == [], "output the stream delivered came again in the envelope"

        rest = read_until(stream, "envelope")
        assert [e.kind for e in rest] == ["status", "status", "envelope"], rest
        assert rest[-1].data["status"] == "completed" and rest[-1].data["value"] == 42
        assert rest[-1].data["output"] == []
        assert list(stream) == [], "the stream goes on after the envelope event"


def test_last_event_id_resumes_without_duplicates(http):
    """A reader that drops mid-cell reconnects with Last-Event-ID and gets exactly the events after it."""
    cell_id = start(
        http,
        'for (let i = 0; i < 3; i++) { text("tick " + i); await new Promise(r => setTimeout(r, 50)); }'
        "return await ask({});",
        client_tools=ASK,
    )
    with http.stream("GET", f"/v1/cells/{cell_id}/events") as response:
        first = read_until(events(response), "pending")
    assert texts(first) == ["tick 0", "tick 1", "tick 2"]
    resume_after = first[1].id  # the first output event
    with http.stream("GET", f"/v1/cells/{cell_id}/events", headers={"Last-Event-ID": str(resume_after)}) as response:
        again = read_until(events(response), "pending")
    assert [(e.id, e.kind, e.data) for e in again] == [(e.id, e.kind, e.data) for e in first[2:]]

    call_id = first[-1].data["pending_tool_calls"][0]["id"]
    assert wait(http, cell_id, tool_results=[{"id": call_id, "ok": True, "value": "done"}])["status"] == "completed"
    last = first[-1].id
    with http.stream("GET", f"/v1/cells/{cell_id}/events", headers={"Last-Event-ID": str(last)}) as response:
        tail = [e for e in events(response) if e.kind != ":"]
    assert [e.kind for e in tail] == ["status", "status", "envelope"] and tail[0].id == last + 1
    with http.stream("GET", f"/v1/cells/{cell_id}/events", headers={"Last-Event-ID": str(tail[-1].id)}) as response:
        assert [e for e in events(response) if e.kind != ":"] == []  # nothing after the envelope: closes at once
    r = http.get(f"/v1/cells/{cell_id}/events", headers={"Last-Event-ID": str(tail[-1].id + 1)})
    assert r.status_code == 422 and r.json()["error"]["need_param"] == "Last-Event-ID", r.text


def test_idle_stream_sends_heartbeat_comments(http):
    """A cell parked on its caller sends nothing; the stream sends `: keep-alive` every heartbeat (1 s here)."""
    cell_id = start(http, "return await ask({});", client_tools=ASK)
    with http.stream("GET", f"/v1/cells/{cell_id}/events") as response:
        stream = events(response)
        read_until(stream, "pending")
        started = time.monotonic()
        comment = next(stream)
        assert comment.kind == ":" and comment.data == "keep-alive", comment
        # Half the default heartbeat (15 s): only a stream that ignored its 1 s setting reaches it, not load.
        assert comment.at - started < Settings().events_heartbeat_seconds / 2
    http.post(f"/v1/cells/{cell_id}/cancel")


def test_another_tenant_cannot_read_the_events(http, base):
    """Beta gets 404 for alpha's cell's events (the same answer as for an unknown cell), and alpha's key works."""
    cell_id = start(http, "return await ask({});", client_tools=ASK)
    with httpx.Client(base_url=base, headers=auth("beta")) as beta:
        r = beta.get(f"/v1/cells/{cell_id}/events")
        assert r.status_code == 404 and r.json()["error"]["code"] == "cell_not_found", r.text
        assert beta.get("/v1/cells/cell_unknown/events").json()["error"]["code"] == "cell_not_found"
    assert http.post(f"/v1/cells/{cell_id}/cancel").json()["code"] == "aborted"


def test_streams_per_tenant_are_capped_and_a_closed_stream_frees_its_slot(base):
    """Gamma's third concurrent stream is 429 naming tenant_max_event_streams; after one closes, a new one opens;
    other tenants are not affected."""
    with httpx.Client(base_url=base, headers=auth("gamma"), timeout=30.0) as gamma:
        cell_id = start(gamma, "return await ask({});", client_tools=ASK)
        path = f"/v1/cells/{cell_id}/events"
        with gamma.stream("GET", path) as one, gamma.stream("GET", path) as two:
            assert one.status_code == two.status_code == 200
            refused = gamma.get(path)
            assert refused.status_code == 429, refused.text
            assert "tenant_max_event_streams" in refused.json()["error"]["message"]
            assert refused.headers["Retry-After"].isdigit()
        # Both readers went away: their slots come back once the server notices the disconnects.

        def reopens() -> bool:
            with gamma.stream("GET", path) as again:
                return again.status_code == 200

        poll_until(reopens, "a stream slot is free again after the readers disconnected")
        gamma.post(f"/v1/cells/{cell_id}/cancel")


def test_a_stalled_reader_does_not_hold_the_cell(http, base):
    """A reader that never reads (its socket buffers fill) does not slow the cell: it completes with its
    8 MiB of output, and the wait answers it (nothing was delivered to that reader)."""
    cell_id = start(
        http,
        'const line = "x".repeat(1000); for (let i = 0; i < 8000; i++) text(line);'
        'await new Promise(r => setTimeout(r, 10)); return "done"',
        max_output_bytes=10 * 1024 * 1024,
        timeout_ms=60000,  # 8 MiB of output can take over the default 10 s on a loaded machine; a held cell never ends
    )
    host, port = base.removeprefix("http://").split(":")
    with socket.socket() as stalled:
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: no autotuning
        stalled.connect((host, int(port)))
        stalled.sendall(
            f"GET /v1/cells/{cell_id}/events HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {KEYS['alpha']}\r\n\r\n".encode()
        )
        envelope = wait(http, cell_id)
        if envelope["status"] == "running":  # the wait's 20 s ran out first on a loaded machine: wait again
            envelope = wait(http, cell_id)
        assert envelope["status"] == "completed" and envelope["value"] == "done", envelope.get("error")
        assert len(envelope["output"]) > 1000


def test_a_background_cell_that_yields_stops_until_a_wait(http):
    """yield_control stops the run (status waiting, reason yield, no further legs) until a wait resumes it."""
    cell_id = start(http, 'text("one"); await yield_control("checkpoint"); text("two"); return 2')
    stopped = poll_until(
        lambda: (s := http.get(f"/v1/cells/{cell_id}").json())["status"] == "waiting" and s,
        "the cell stops at its yield",
    )
    assert stopped["reason"] == "yield"
    legs = stopped["telemetry"]["legs"]
    with http.stream("GET", f"/v1/cells/{cell_id}/events") as response:
        seen = read_until(events(response), "pending")
    assert texts(seen) == ["one"] and seen[-1].data["reason"] == "yield"
    assert http.get(f"/v1/cells/{cell_id}").json()["telemetry"]["legs"] == legs  # no leg ran meanwhile
    done = wait(http, cell_id)
    assert done["status"] == "completed" and done["value"] == 2
    assert [e["text"] for e in done["output"]] == ["two"]  # "one" went out on the stream


def test_a_foreground_cells_stream_starts_at_its_current_status(http):
    """A cell run by exec/wait gets a log when a reader first asks: its status and pending calls, then what follows."""
    r = http.post(
        "/v1/exec", json={"code": 'text("early"); const v = await ask({}); text("late"); return v', "client_tools": ASK}
    )
    parked = r.json()
    assert parked["status"] == "waiting" and [e["text"] for e in parked["output"]] == ["early"], parked
    cell_id = parked["cell_id"]
    with http.stream("GET", f"/v1/cells/{cell_id}/events") as response:
        stream = events(response)
        opened = read_until(stream, "pending")
        assert [(e.id, e.kind) for e in opened] == [(1, "status"), (2, "pending")]
        assert opened[0].data == {"status": "waiting"}
        call_id = opened[1].data["pending_tool_calls"][0]["id"]
        done = wait(http, cell_id, tool_results=[{"id": call_id, "ok": True, "value": 5}])
        assert done["value"] == 5 and [e["text"] for e in done["output"]] == ["late"]
        rest = read_until(stream, "envelope")
    assert [(e.kind, e.data.get("text", e.data.get("status"))) for e in rest[:-1]] == [
        ("status", "running"),
        ("output", "late"),
        ("status", "completed"),
    ]
