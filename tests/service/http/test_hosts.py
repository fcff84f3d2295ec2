"""Host and Origin on a server without API keys (DNS rebinding): one check in the request gate, on
every route, the MCP facade's included; loopback names and addresses with any port, plus
``allowed_hosts``.  With keys nothing is checked (a page cannot send a key it does not know)."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.errors import ConfigError
from service.hosts import MAX_AUTHORITY_CHARS, Authority, HostCheck, parse_authority, parse_origin
from service.settings_load import load_settings
from tests.conftest import make_client
from tests.support.live_server import free_port, live_process

EVIL = {"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}},
}
#: Every route the app serves, with a request that would succeed from a loopback page (no route is exempt).
ROUTES = [
    ("POST", "/v1/exec", {"code": "return 1"}),
    ("GET", "/v1/catalog", None),
    ("GET", "/v1/api/files", None),
    ("GET", "/v1/api/files/results.d.ts", None),
    ("GET", "/v1/cells/cell_0/events", None),
    ("POST", "/v1/cells/cell_0/wait", {}),
    ("GET", "/v1/sessions/s1/store", None),
    ("POST", "/mcp", INITIALIZE),
    ("GET", "/docs", None),
    ("GET", "/openapi.json", None),
    ("GET", "/metrics", None),
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
    ("GET", "/no/such/route", None),
]


@pytest.mark.parametrize(
    "text, parsed",
    [
        ("localhost", Authority("localhost", None)),
        ("LOCALHOST:8000", Authority("localhost", 8000)),
        ("localhost.:8000", Authority("localhost", 8000)),
        ("127.0.0.1", Authority("127.0.0.1", None)),
        ("[::1]:8000", Authority("::1", 8000)),
        ("[0:0:0:0:0:0:0:1]", Authority("::1", None)),
        ("[::FFFF:127.0.0.1]:1", Authority("::ffff:7f00:1", 1)),
        ("Codemode.Internal.:443", Authority("codemode.internal", 443)),
        ("host:", Authority("host", None)),
    ],
)
def test_authorities_are_read_in_one_spelling(text: str, parsed: Authority) -> None:
    """Case, a trailing dot, IPv6 brackets and spellings of one address do not change what a Host names."""
    assert parse_authority(text) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "",
        "::1",  # IPv6 without brackets
        "[::1",
        "[::1]x",
        "[fe80::1%25eth0]",
        "[not-v6]",
        "localhost:80:80",
        "localhost:99999",
        "localhost:8o",
        "local host",
        "a..b",
        "evil.example@127.0.0.1",
        "127.0.0.1/x",
        "x" * (MAX_AUTHORITY_CHARS + 1),
    ],
)
def test_malformed_authorities_are_refused(text: str) -> None:
    """Anything that is not host[:port] parses to None (and so is never allowed)."""
    assert parse_authority(text) is None


@pytest.mark.parametrize(
    "host, allowed",
    [
        ("localhost", True),
        ("localhost.:1", True),
        ("127.0.0.1:8000", True),
        ("127.9.9.9", True),
        ("[::1]:8000", True),
        ("[::ffff:127.0.0.1]", True),
        ("codemode.internal", True),  # listed without a port: any port
        ("CODEMODE.INTERNAL.:9", True),
        ("dev.example:8000", True),  # listed with its port
        ("dev.example:8001", False),
        ("dev.example", False),
        ("evil.example", False),
        ("localhost.evil.example", False),
        ("evil.localhost", False),  # not listed; only the name localhost itself is taken as loopback
        ("127.0.0.1.evil.example", False),
        ("2130706433", False),  # a decimal IPv4 spelling: browsers send dotted quads
        ("10.0.0.1", False),
        ("[fd00::1]", False),
    ],
)
def test_hosts_allowed_are_loopback_or_listed(host: str, allowed: bool) -> None:
    """Loopback names and addresses on any port, and allowed_hosts entries (with their port, if given)."""
    check = HostCheck(["codemode.internal", "dev.example:8000"])
    parsed = parse_authority(host)
    assert (parsed is not None and check.allows(parsed)) is allowed


def test_origins_must_name_an_allowed_host_over_http() -> None:
    """A present Origin names an allowed host with http or https; null and other schemes are refused."""
    check = HostCheck(["app.example:443"])
    assert check.refusal(["localhost:8000"], ["http://localhost:3000"]) is None
    assert check.refusal(["localhost:8000"], ["https://app.example"]) is None  # https's own port
    assert check.refusal(["localhost:8000"], []) is None
    assert parse_origin("http://app.example") == Authority("app.example", 80)
    for origin in ("null", "http://evil.example", "chrome-extension://abc", "http://localhost:3000/x", "localhost"):
        reason = check.refusal(["localhost:8000"], [origin])
        assert reason is not None and "Origin" in reason and "allowed_hosts" in reason, origin


def test_more_than_one_host_or_origin_is_refused() -> None:
    """Two Host (or Origin) headers are refused, whichever one a later reader would take."""
    check = HostCheck([])
    assert check.refusal(["localhost", "evil.example"], []) is not None
    assert check.refusal(["localhost"], ["http://localhost", "http://evil.example"]) is not None


def test_bad_allowed_hosts_entries_stop_the_start(tmp_path: Path) -> None:
    """An allowed_hosts entry that is no host[:port], or a value that is no list, is a ConfigError naming
    the setting; the environment's comma-separated form is read as a list."""
    with pytest.raises(ConfigError) as raised:
        load_settings(environ={"CODEMODE_ALLOWED_HOSTS": "good.example,http://bad.example/"})
    assert raised.value.need_param == "allowed_hosts" and "http://bad.example/" in raised.value.message
    config = tmp_path / "codemode.toml"
    config.write_text("[server]\nallowed_hosts = 5\n", encoding="utf-8")
    with pytest.raises(ConfigError) as not_a_list:
        load_settings(environ={}, config_path=str(config))
    assert "server.allowed_hosts" in not_a_list.value.message and "a list of strings" in not_a_list.value.message
    assert load_settings(environ={"CODEMODE_ALLOWED_HOSTS": "a.example, [fd00::5]:8000"}).allowed_hosts == (
        "a.example",
        "[fd00::5]:8000",
    )


@pytest.fixture(scope="module")
def keyless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with make_client(tmp_path_factory.mktemp("hosts"), workers=1, allowed_hosts=("codemode.internal",)) as client:
        yield client


@pytest.mark.parametrize("method, path, body", ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_every_route_refuses_a_foreign_host_or_origin(keyless, method: str, path: str, body) -> None:
    """The DNS-rebinding request (foreign Host and Origin) is 421 naming allowed_hosts on every route; the
    same request addressed to a loopback Host, or to a listed one, is not refused for its Host."""
    headers = MCP_HEADERS if path == "/mcp" else {}
    for bad in (EVIL, {"Host": "127.0.0.1:8000", "Origin": "http://evil.example:8000"}, {"Host": "evil.example"}):
        r = keyless.request(method, path, json=body, headers={**headers, **bad})
        assert r.status_code == 421, (bad, r.text)
        error = r.json()["error"]
        assert error["code"] == "host_not_allowed" and "allowed_hosts" in error["message"], error
    for good in ({"Host": "127.0.0.1:8000"}, {"Host": "localhost:8000", "Origin": "http://localhost:3000"}):
        for host in (good, {"Host": "codemode.internal:8000", "Origin": "http://codemode.internal"}):
            r = keyless.request(method, path, json=body, headers={**headers, **host})
            assert r.status_code != 421, (host, r.text)


def test_the_mcp_facade_answers_a_loopback_page(keyless) -> None:
    """/mcp serves a loopback Host with a loopback Origin (the SDK's own Host check is off: the gate's rules)."""
    r = keyless.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": "[::1]:8000", "Origin": "http://[::1]"})
    assert r.status_code == 200, (r.status_code, r.headers, r.text)
    # A 2025 initialize opens a session whose answers are an event stream (the message is its data line);
    # the SDK may also answer plain JSON: either way the message is the server's initialize result.
    if r.headers["content-type"].startswith("text/event-stream"):
        data = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
        assert data, (r.headers, r.text)
        message = json.loads(data[0])
    else:
        message = r.json()
    assert message["result"]["serverInfo"]["name"] == "codemode", r.text


@pytest.mark.slow
def test_with_api_keys_hosts_are_not_checked(tmp_path: Path) -> None:
    """With keys, a foreign Host is served to a valid key (the key is the protection) and 401 without one."""
    key = "ck_hosts_0123456789"
    with make_client(tmp_path, workers=1, api_keys=({"key": key, "tenant": "t"},)) as client:
        ok = client.post("/v1/exec", json={"code": "return 1"}, headers={**EVIL, "Authorization": f"Bearer {key}"})
        assert ok.status_code == 200 and ok.json()["value"] == 1, ok.text
        assert client.post("/v1/exec", json={"code": "return 1"}, headers=EVIL).status_code == 401


@pytest.fixture(scope="module")
def live_keyless(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`codemode serve` without keys on a real loopback socket."""
    port = free_port()
    argv = [sys.executable, "-m", "service.cli", "serve", "--port", str(port), "--workers", "1"]
    with live_process(argv, f"http://127.0.0.1:{port}/healthz", tmp_path_factory.mktemp("livehosts")):
        yield port


def _raw(port: int, request: bytes) -> bytes:
    """Send ``request`` as is and read the whole answer (the server closes after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_dns_rebinding_reproduction_is_refused(live_keyless: int) -> None:
    """The reported attack: POST /v1/exec and GET /v1/catalog with Host and Origin evil.example:8000 and a
    JSON body are 421 and run nothing; from a loopback page they run."""
    base = f"http://127.0.0.1:{live_keyless}"
    body = {"code": "return 40 + 2"}
    attack = httpx.post(base + "/v1/exec", json=body, headers=EVIL, timeout=30)
    assert attack.status_code == 421 and attack.json()["error"]["code"] == "host_not_allowed", attack.text
    assert httpx.get(base + "/v1/catalog", headers=EVIL, timeout=30).status_code == 421
    local = httpx.post(base + "/v1/exec", json=body, headers={"Origin": f"http://localhost:{live_keyless}"})
    assert local.status_code == 200 and local.json()["value"] == 42, local.text


def test_a_megabyte_host_header_is_refused_unread(live_keyless: int) -> None:
    """A 1 MiB Host header is answered with 421 (length checked before any parse), and the service
    answers the next request as before."""
    host = b"a" * (1024 * 1024)
    answer = _raw(live_keyless, b"GET /healthz HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
    status = answer.split(b"\r\n", 1)[0]
    assert status.startswith(b"HTTP/1.1 421"), answer[:300]
    assert b"host_not_allowed" in answer and len(answer) < 4096  # the message shows 100 characters of it
    assert httpx.get(f"http://127.0.0.1:{live_keyless}/healthz", timeout=30).status_code == 200
