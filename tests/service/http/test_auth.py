"""Auth wherever a request enters: without keys only loopback peers, whatever server runs the app;
keys compared in constant time."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator

import httpx
import pytest

import service.auth
from service.auth import KeyRing, is_loopback_peer
from service.errors import Forbidden, Unauthorized
from service.settings import ApiKey, Settings
from tests.support.live_server import free_port, live_process

pytestmark = pytest.mark.slow


def _non_loopback_address() -> str | None:
    """An address of this machine that is not loopback (the route to a documentation network)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.fixture(scope="module")
def uvicorn_on_all_interfaces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """Plain `uvicorn --factory service.app:app_factory --host 0.0.0.0`, no API keys (serving every interface without keys)."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "service.app:app_factory",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    with live_process(
        argv, f"http://127.0.0.1:{port}/healthz", tmp_path_factory.mktemp("peer"), env={"CODEMODE_WORKERS": "1"}
    ):
        yield port


def test_without_keys_a_non_loopback_peer_is_refused_by_the_app(uvicorn_on_all_interfaces):
    """An exec from a non-loopback address is 403 naming api_keys; from 127.0.0.1 it runs."""
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    port = uvicorn_on_all_interfaces
    r = httpx.post(f"http://{address}:{port}/v1/exec", json={"code": "return 40 + 2"})
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "forbidden" and "api_keys" in r.json()["error"]["message"]
    assert httpx.get(f"http://{address}:{port}/metrics").status_code == 403
    ok = httpx.post(f"http://127.0.0.1:{port}/v1/exec", json={"code": "return 40 + 2"})
    assert ok.status_code == 200 and ok.json()["value"] == 42


@pytest.mark.parametrize(
    "client, loopback",
    [
        (("127.0.0.1", 1), True),
        (("127.8.9.1", 1), True),
        (("::1", 1), True),
        (("::ffff:127.0.0.1", 1), True),
        (None, True),
        (("192.0.2.2", 1), False),
        (("10.0.0.1", 1), False),
        (("::ffff:10.0.0.1", 1), False),
        (("fd00::2", 1), False),
        (("not-an-address", 1), False),
    ],
)
def test_loopback_peer_classification(client, loopback):
    assert is_loopback_peer(client) is loopback


def test_keys_configured_serve_any_peer():
    """With keys the peer check passes for any address (the key decides)."""
    ring = KeyRing(Settings(api_keys=(ApiKey("k1", "t1"),)))
    ring.check_peer(("192.0.2.2", 1))
    with pytest.raises(Forbidden):
        KeyRing(Settings()).check_peer(("192.0.2.2", 1))


def test_every_key_is_compared_whichever_matches(monkeypatch):
    """No early exit: resolving the first, the last or an unknown key makes one comparison per key."""
    keys = tuple(ApiKey(f"key-{i}", f"tenant-{i}") for i in range(5))
    ring = KeyRing(Settings(api_keys=keys))
    calls: list[bytes] = []
    real = service.auth.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(a)
        return real(a, b)

    monkeypatch.setattr(service.auth.hmac, "compare_digest", counting)
    assert ring.resolve("Bearer key-0").tenant == "tenant-0"
    assert len(calls) == 5
    calls.clear()
    assert ring.resolve("Bearer key-4").tenant == "tenant-4"
    assert len(calls) == 5
    calls.clear()
    with pytest.raises(Unauthorized):
        ring.resolve("Bearer nope")
    assert len(calls) == 5
