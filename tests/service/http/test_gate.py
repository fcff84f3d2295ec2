"""The request gate and connection hygiene on a real socket (`codemode serve`, real uvicorn).

Auth before the body, 413 for every oversized body (declared or chunked), 422 for malformed or
too-deep JSON, path ids checked like body ids, read deadlines, the connection cap and /metrics
behind a key without tenant names.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.live_server import answers, codemode_serve, is_200
from tests.support.polling import poll_until

pytestmark = pytest.mark.slow

KEYS = """
[[api_keys]]
key = "key-alpha"
tenant = "alpha-tenant"

[[api_keys]]
key = "key-beta"
tenant = "beta-tenant"
"""
ALPHA = {"authorization": "Bearer key-alpha"}
BETA = {"authorization": "Bearer key-beta"}
JSON = {"content-type": "application/json"}
MAX_CONNECTIONS = 12
READ_TIMEOUT_S = 2


def _serve(tmp_path_factory: pytest.TempPathFactory, read_timeout_s: int, **extra: str) -> Iterator[str]:
    env = {
        "CODEMODE_HEADER_READ_TIMEOUT_SECONDS": str(read_timeout_s),
        "CODEMODE_BODY_READ_TIMEOUT_SECONDS": str(read_timeout_s),
        "CODEMODE_MAX_CONNECTIONS": str(MAX_CONNECTIONS),
        **extra,
    }
    with codemode_serve(tmp_path_factory.mktemp("gate"), env=env, config=KEYS) as url:
        yield url


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _serve(
        tmp_path_factory,
        READ_TIMEOUT_S,
        CODEMODE_KEEP_ALIVE_TIMEOUT_SECONDS="1",
        CODEMODE_METRICS_REQUIRE_KEY="true",
    )


#: The read deadlines of the server the connection-cap tests use: so long that a socket closed within half
#: of it was closed by the cap (evicted or refused), not by a deadline, however loaded the machine.
CAP_READ_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _serve(tmp_path_factory, CAP_READ_TIMEOUT_S, CODEMODE_KEEP_ALIVE_TIMEOUT_SECONDS=str(CAP_READ_TIMEOUT_S))


def _connect(base: str) -> socket.socket:
    parts = urlsplit(base)
    s = socket.create_connection((parts.hostname, parts.port), timeout=10)
    return s


def _read_response(s: socket.socket) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, f"connection closed without an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(rest) < length:
        rest += s.recv(65536)
    return int(head.split(b" ")[1]), json.loads(rest[:length])


def _closed_within(s: socket.socket, seconds: float) -> float:
    """Seconds until the server closed ``s`` (fails if it stays open longer than ``seconds``)."""
    s.settimeout(seconds)
    start = time.monotonic()
    try:
        while s.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"connection still open after {seconds} s")
    return time.monotonic() - start


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    return r.json()["error"]


def test_unauthenticated_body_is_refused_before_it_is_sent(base):
    """401 arrives while a declared 10 MB wait body has not been sent at all: nothing was read or parsed."""
    with _connect(base) as s:
        s.sendall(
            b"POST /v1/cells/cell_x/wait HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10485760\r\n\r\n"
        )
        status, body = _read_response(s)
    assert status == 401 and body["error"]["code"] == "unauthorized"


def test_declared_oversized_body_is_413_before_it_is_sent(base):
    """An authenticated exec declaring 3 MB is refused from its headers alone."""
    with _connect(base) as s:
        s.sendall(
            b"POST /v1/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-alpha\r\n"
            b"Content-Type: application/json\r\nContent-Length: 3145728\r\n\r\n"
        )
        status, body = _read_response(s)
    assert status == 413
    assert body["error"]["error_type"] == "recoverable" and "2097152-byte cap" in body["error"]["message"]


def test_chunked_body_over_the_cap_is_413(base):
    """A 3 MB exec body sent chunked (no Content-Length) is 413, not a 400 'transient'."""
    payload = b'{"code":"return 1 //' + b"a" * (3 * 1024 * 1024) + b'"}'

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(payload), 65536):
            yield payload[i : i + 65536]

    r = httpx.post(base + "/v1/exec", content=chunks(), headers={**ALPHA, **JSON}, timeout=30)
    assert "content-length" not in r.request.headers
    err = _error(r, 413)
    assert err["code"] == "body_too_large" and err["error_type"] == "recoverable"


def test_5000_deep_body_is_422_recoverable(base):
    """A 5000-deep JSON body is 422 naming the nesting, not a 400 'transient'."""
    body = b'{"code":"return 1","client_tools":' + b"[" * 5000 + b"]" * 5000 + b"}"
    err = _error(httpx.post(base + "/v1/exec", content=body, headers={**ALPHA, **JSON}), 422)
    assert err["error_type"] == "recoverable" and err["need_param"] == "body"
    assert "nested more than 128 levels" in err["message"]


@pytest.mark.parametrize("depth, status", [(128, 404), (129, 422)])
def test_body_nesting_cap_is_128(base, depth, status):
    """A wait body nested exactly 128 deep is accepted (the cell is unknown: 404); 129 is 422."""
    inner = depth - 3  # {tool_results: [{value: ...}]}
    body = b'{"tool_results":[{"id":"req_1","ok":true,"value":' + b"[" * inner + b"]" * inner + b"}]}"
    r = httpx.post(base + "/v1/cells/cell_x/wait", content=body, headers={**ALPHA, **JSON})
    assert r.status_code == status, r.text


def test_malformed_json_is_422_naming_the_body(base):
    err = _error(httpx.post(base + "/v1/exec", content=b'{"code":', headers={**ALPHA, **JSON}), 422)
    assert err["need_param"] == "body" and err["error_type"] == "recoverable"
    assert "not valid JSON" in err["message"]


@pytest.mark.parametrize(
    "method, path, param",
    [
        ("GET", "/v1/sessions/abc%0A/store", "session_id"),
        ("DELETE", "/v1/sessions/abc%0A", "session_id"),
        ("DELETE", "/v1/sessions/s1/runs/r%0A", "run_id"),
        ("GET", "/v1/cells/cell%0A", "cell_id"),
        ("POST", "/v1/cells/cell%0A/cancel", "cell_id"),
        ("GET", "/v1/catalog?session_id=abc%0A", "session_id"),
    ],
)
def test_path_ids_are_checked_like_body_ids(base, method, path, param):
    """An id with a trailing newline is 422 in a path or query, as it is in a body."""
    err = _error(httpx.request(method, base + path, headers=ALPHA), 422)
    assert err["need_param"] == param


def test_lone_surrogates_become_replacement_characters(base):
    """A value and an output line with lone surrogates answer 200 with strict UTF-8 and U+FFFD."""
    r = httpx.post(base + "/v1/exec", json={"code": "text('a\\ud800b'); return {'\\udfff': '\\udc00x'}"}, headers=ALPHA)
    assert r.status_code == 200, r.text
    env = json.loads(r.content.decode("utf-8", errors="strict"))
    assert env["status"] == "completed", env
    assert env["output"] == [{"type": "text", "text": "a\ufffdb"}]
    assert env["value"] == {"\ufffd": "\ufffdx"}


def test_half_sent_header_is_closed_within_the_timeout(base):
    with _connect(base) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        assert _closed_within(s, READ_TIMEOUT_S + 5) >= READ_TIMEOUT_S - 0.5


def test_silent_connection_is_closed_within_the_timeout(base):
    with _connect(base) as s:
        _closed_within(s, READ_TIMEOUT_S + 5)


def test_half_sent_body_is_closed_within_the_timeout(base):
    with _connect(base) as s:
        s.sendall(
            b"POST /v1/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-alpha\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"code":'
        )
        _closed_within(s, READ_TIMEOUT_S + 5)


def test_idle_keep_alive_connection_is_closed(base):
    with _connect(base) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _ = _read_response(s)
        assert status == 200
        _closed_within(s, 1 + 5)


def _serves_again(base: str) -> None:
    # The server notices closed sockets, then serves again.
    poll_until(answers(base + "/healthz", is_200), "the server serves again after connections closed", 10)


def test_at_the_cap_a_new_connection_evicts_the_oldest_idle_one(capped):
    """max_connections silent sockets cannot lock others out: a new request is served and the oldest
    silent socket is closed, long before the header timeout, while the others stay open."""
    held = [_connect(capped) for _ in range(MAX_CONNECTIONS)]
    try:
        half = CAP_READ_TIMEOUT_S / 2
        assert httpx.get(capped + "/healthz", timeout=half).status_code == 200
        _closed_within(held[0], half)
        # Only the cap closes one socket and not the rest: a deadline would have closed them all.
        held[-1].setblocking(False)
        with pytest.raises(BlockingIOError):
            held[-1].recv(1)
    finally:
        for s in held:
            s.close()
    _serves_again(capped)


def test_at_the_cap_with_every_connection_in_a_request_new_ones_are_refused(capped):
    """When all max_connections are inside requests (bodies still arriving), a new connection is
    closed at once (long before the body timeout); the server serves again once they end."""
    _serves_again(capped)
    held = [_connect(capped) for _ in range(MAX_CONNECTIONS)]
    try:
        for s in held:
            # "100 Continue" comes back once the server parsed the headers and waits for the body.
            s.sendall(
                b"POST /v1/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-alpha\r\n"
                b"Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"
            )
            assert s.recv(100).startswith(b"HTTP/1.1 100")
        with _connect(capped) as extra:
            _closed_within(extra, CAP_READ_TIMEOUT_S / 2)
    finally:
        for s in held:
            s.close()
    _serves_again(capped)


def test_metrics_require_a_key_and_name_no_tenant(base):
    """With metrics_require_key, /metrics is 401 without a key; with one it shows no tenant names."""
    for headers in (ALPHA, BETA):
        assert httpx.post(base + "/v1/exec", json={"code": "return 1"}, headers=headers).status_code == 200
    err = _error(httpx.get(base + "/metrics"), 401)
    assert err["code"] == "unauthorized"
    r = httpx.get(base + "/metrics", headers=BETA)
    assert r.status_code == 200
    assert "codemode_event_loop_lag_seconds_bucket" in r.text
    assert 'codemode_cells_total{status="completed"}' in r.text
    assert "alpha-tenant" not in r.text and "beta-tenant" not in r.text


def _lag_over(base: str, le: str) -> float:
    """Loop-lag observations above bucket ``le`` so far."""
    text = httpx.get(base + "/metrics", headers=ALPHA).text
    buckets = {}
    for line in text.splitlines():
        if line.startswith("codemode_event_loop_lag_seconds_bucket"):
            buckets[line.split('le="')[1].split('"')[0]] = float(line.split()[-1])
    return buckets["+Inf"] - buckets[le]


def test_large_tool_result_reaches_the_guest_without_holding_the_loop(base):
    """A client tool result of 480,000 small objects (just within max_request_values) arrives intact;
    decoding it never holds the server's event loop for half a second (it is decoded off the loop).
    Twice as many values are refused (413 naming max_request_values) before anything is parsed, and
    the cell stays waiting."""
    tools = [{"name": "rows", "input_schema": {"type": "object"}}]
    code = "const r = await rows({}); return [r.length, r[0].k, r[r.length - 1].k]"
    r = httpx.post(
        base + "/v1/exec",
        json={"code": code, "client_tools": tools, "memory_limit_bytes": 512 * 2**20, "timeout_ms": 20000},
        headers=ALPHA,
        timeout=30,
    )
    env = r.json()
    assert env["status"] == "waiting", env
    call_id = env["pending_tool_calls"][0]["id"]

    def body_of(n: int) -> bytes:
        rows = [{"k": 1}] * (n - 1) + [{"k": 2}]
        result = {"tool_results": [{"id": call_id, "ok": True, "value": rows}], "timeout_ms": 20000}
        return json.dumps(result, separators=(",", ":")).encode()

    r = httpx.post(f"{base}/v1/cells/{env['cell_id']}/wait", content=body_of(960_000), headers={**ALPHA, **JSON})
    assert r.status_code == 413 and "max_request_values" in r.json()["error"]["message"], r.text
    n = 480_000  # two values each: the rows and their numbers
    body = body_of(n)
    before = _lag_over(base, "0.5")
    r = httpx.post(f"{base}/v1/cells/{env['cell_id']}/wait", content=body, headers={**ALPHA, **JSON}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed", r.json()
    assert r.json()["value"] == [n, 1, 2]
    assert _lag_over(base, "0.5") == before
