"""Guest hardening through the real service: the hook stays out of reach, guest strings are
well-formed, deep values fail cleanly, caps reject catchably (again on the host), and guest-side
conditions fail only their cell while the worker process lives on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from service.runtime.workers.process import Worker
from tests.conftest import make_client, run, value_of
from tests.support.polling import poll_until
from tests.support.stack_probe import PROBE, check_report

DEEP = "let v = 1; for (let i = 0; i < 254; i++) v = [v];"


def _depth(value: Any) -> tuple[int, Any]:
    depth = 0
    while isinstance(value, list) and value:
        value, depth = value[0], depth + 1
    return depth, value


def _raw(client, code: str, **fields: Any) -> dict[str, Any]:
    """POST /v1/exec; the body must be strict UTF-8 JSON with status 200."""
    r = client.post("/v1/exec", json={"code": code, **fields})
    assert r.status_code == 200, r.text
    r.content.decode("utf-8")  # strict: a lone surrogate could not have been encoded
    return r.json()


def _workers(client) -> tuple[int, int, set[int]]:
    pool = client.app.state.services.pool
    pids = {w.pid for w in pool.workers()}
    return pool.stats()["spawned"], pool.recycled, pids


def test_stack_frame_apis_never_reach_the_host_hook(client):
    """prepareStackTrace/captureStackTrace call sites, caller and callee expose no function, through real host replies."""
    env = _raw(client, PROBE)
    report = value_of(env)["b"]
    check_report(report)


def test_lone_surrogates_become_replacement_characters_everywhere(client):
    """text, json, values, keys, error messages, tool args, saved results and store values: U+FFFD, HTTP 200."""
    sid = "s-" + uuid.uuid4().hex[:16]
    env = _raw(
        client,
        r"""
        text('a\ud800b'); json({['\udc00k']: ['\udfff']}); console.log('c\ud800', {k: '\udc00'});
        const echoed = await echo({x: 'e\ud800'});
        const ref = await results.save({['\ud800']: 's\udfff'});
        const loaded = await results.load(ref.id);
        await store('k', 'v\ud800');
        return {['\udfff']: '\ud800', echoed: echoed.echo, loaded, stored: await load('k'), pair: '\ud83d\ude00'};
    """,
        session_id=sid,
    )
    assert env["output"] == [
        {"type": "text", "text": "a\ufffdb"},
        {"type": "json", "value": {"\ufffdk": ["\ufffd"]}},
        {"type": "text", "text": 'c\ufffd {k: "\ufffd"}'},
    ]
    assert value_of(env) == {
        "\ufffd": "\ufffd",
        "echoed": "e\ufffd",
        "loaded": {"\ufffd": "s\ufffd"},
        "stored": "v\ufffd",
        "pair": "😀",
    }
    failed = _raw(client, r"throw new Error('bad \ud800 message')")
    assert failed["status"] == "failed" and failed["code"] == "uncaught_error"
    assert failed["error"].startswith("Error: bad \ufffd message")


def test_too_deep_values_fail_cleanly(client):
    """254 levels: returned/emitted values carry a bounded marker; tool args, results.save and store reject with TypeError."""
    depth, leaf = _depth(value_of(_raw(client, DEEP + "return v")))
    assert depth == 200 and leaf.startswith("[Nested too deep: values may nest at most 200 levels")
    env = _raw(client, DEEP + "json(v); return 1")
    assert _depth(env["output"][0]["value"])[0] == 200
    refused = value_of(
        _raw(
            client,
            DEEP
            + """
        const out = [];
        for (const call of [() => echo({x: v}), () => results.save(v), () => store('deep', v)]) {
          try { await call(); out.push('accepted'); } catch (e) { out.push(e.name + ': ' + e.message); }
        }
        return out;
    """,
            session_id="s-" + uuid.uuid4().hex[:16],
        )
    )
    assert len(refused) == 3
    for message in refused:
        assert message.startswith("TypeError: value is nested more than 200 levels deep"), message


def test_timers_over_the_cap_throw_and_no_callback_is_lost(client):
    """200 setTimeouts: the 129th throws RangeError; every timer that was made runs its callback."""
    made, ran, thrown = value_of(
        _raw(
            client,
            """
        let made = 0, ran = 0, thrown = null;
        const waits = [];
        try {
          for (let i = 0; i < 200; i++) {
            let done;
            const wait = new Promise(r => { done = r; });
            setTimeout(() => { ran++; done(); }, 10);
            waits.push(wait);
            made++;
          }
        } catch (e) { thrown = e.name + ': ' + e.message; }
        await Promise.all(waits);
        return [made, ran, thrown];
    """,
        )
    )
    assert made == ran == 128
    assert thrown.startswith("RangeError: too many host requests pending (limit 128")


GUEST_SIDE_FAILURES = {
    "burst of 40 x 1 MB results.save": (
        "const s = 'x'.repeat(1e6); const r = await Promise.allSettled(Array.from({length: 40}, () => results.save(s)));"
        "return r.filter(x => x.status === 'rejected').map(x => x.reason.name)",
        "completed",
    ),
    "error message with a lone surrogate": (r"throw new Error('x\ud800')", "failed"),
    "tool arguments nested 254 deep": (DEEP + "return await echo({x: v}).catch(e => e.name)", "completed"),
    "Array.prototype index setter": (
        "Object.defineProperty(Array.prototype, '1', {set(v) { throw new Error('no') }, configurable: true});"
        "text('a'); text('b'); await results.save([1, 2]); return 1",
        "completed",
    ),
    "throwing Promise species in the host's start call": (
        "Object.defineProperty(Promise.prototype, 'constructor', {get() { throw new Error('species') }})",
        "failed",
    ),
    "throwing Object.prototype setter while a rejection is built": (
        "Object.defineProperty(Object.prototype, 'code', {set(v) { throw new Error('no') }, configurable: true});"
        "return await results.load('result_missing').catch(e => e.code)",
        "completed",
    ),
}


@pytest.fixture(scope="module")
def single_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with make_client(tmp_path_factory.mktemp("one-worker"), workers=1) as c:
        yield c


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GUEST_SIDE_FAILURES))
def test_guest_side_failures_fail_only_the_cell(single_worker, name):
    """Each used to kill the worker (runtime_unavailable); now the cell ends cleanly and the same process runs the next cell."""
    code, status = GUEST_SIDE_FAILURES[name]
    run(single_worker, "return 1")  # the one worker is warm and idle
    pool = single_worker.app.state.services.pool
    # Taking the fresh worker started a spare in the background; count from when it is ready.
    poll_until(lambda: pool.stats()["spawning"] == 0, "the spare worker is started")
    spawned, recycled, pids = _workers(single_worker)
    env = _raw(single_worker, code, timeout_ms=10000)
    assert env["status"] == status, env
    assert env.get("code") != "runtime_unavailable"
    assert value_of(run(single_worker, "return 'next'")) == "next"
    assert _workers(single_worker) == (spawned, recycled, pids)


@pytest.mark.slow
def test_burst_over_the_byte_cap_rejects_catchably(client):
    """A synchronous burst past the inbox allowance (10 MiB) rejects the excess with RangeError; the rest is saved."""
    names = value_of(_raw(client, GUEST_SIDE_FAILURES["burst of 40 x 1 MB results.save"][0], timeout_ms=10000))
    assert len(names) == 30 and set(names) == {"RangeError"}  # 10 x 1,000,004 characters fit 10 MiB


@pytest.fixture
def lifted_guest_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulate a guest that got around the prelude: every cap in the guest config is lifted."""
    send = Worker.send

    async def lifted(self: Worker, message: dict[str, Any], attachments: list[bytes] | None = None) -> None:
        if message.get("t") == "run":
            message = {
                **message,
                "config": {
                    **message["config"],
                    "maxRequestBytes": 10**12,
                    "maxPendingRequests": 10**6,
                    "maxQueuedBytes": 10**12,
                    "maxQueuedRequests": 10**6,
                    "maxRequestValues": 10**9,
                },
            }
        await send(self, message, attachments)

    monkeypatch.setattr(Worker, "send", lifted)


@pytest.mark.slow
def test_host_enforces_request_bytes_when_guest_caps_are_lifted(tmp_path, lifted_guest_caps):
    """With the guest's cap lifted, a 2 MB results.save over max_request_bytes (1 MiB) still rejects catchably."""
    with make_client(tmp_path, max_request_bytes=1024 * 1024) as c:
        message = value_of(
            _raw(c, "return await results.save('x'.repeat(2e6)).then(() => 'saved', e => e.name + ': ' + e.message)")
        )
        assert message.startswith("RangeError: request arguments are 2000004 bytes of JSON, over the 1048576-byte")
        assert value_of(_raw(c, "return (await results.save('x'.repeat(1000))).bytes")) == 1002


@pytest.mark.slow
def test_host_enforces_request_values_when_guest_caps_are_lifted(tmp_path, lifted_guest_caps):
    """With the guest's value cap lifted, arguments of 12,000 values over max_request_values (10,000) still
    reject catchably, counted on the host before they are parsed; the same data as one string goes through."""
    with make_client(tmp_path, max_request_values=10_000) as c:
        code = """
        const pad = []; for (let i = 0; i < 6000; i++) pad.push([i]);
        const refused = await results.save(pad).then(() => 'saved', e => e.name + ': ' + e.message);
        return [refused, (await results.save(JSON.stringify(pad))).bytes > 0];
        """
        refused, saved = value_of(_raw(c, code))
        assert refused.startswith("RangeError: request arguments hold more than 10000 JSON values"), refused
        assert saved is True


@pytest.mark.slow
def test_host_enforces_pending_cap_when_guest_caps_are_lifted(tmp_path, lifted_guest_caps):
    """Lifted guest caps: tool calls past max_pending_requests reject with RangeError; a refused timer fails the cell."""
    with make_client(tmp_path, max_pending_requests=8) as c:
        names = value_of(
            _raw(
                c,
                """
            const r = await Promise.allSettled(Array.from({length: 12}, (_, i) => echo({x: i, delay: 0.05})));
            return r.map(x => x.status === 'fulfilled' ? 'ok' : x.reason.name);
        """,
            )
        )
        assert names.count("ok") == 8 and names.count("RangeError") == 4
        env = _raw(
            c,
            "for (let i = 0; i < 12; i++) setTimeout(() => {}, 20); await new Promise(r => setTimeout(r, 50)); return 1",
        )
        assert env["status"] == "failed", env
        assert "too many host requests in flight (limit 8)" in env["error"]
