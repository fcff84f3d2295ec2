"""``python -m bench gate``: what the Host and Origin check adds to each request of a server without keys.

The request gate admits a request in-process (``RequestGate.admit`` on a bodiless GET scope, no
socket), in rounds that alternate the gate as built (Host and Origin checked) with the same gate whose
check is switched off on that instance (the gate before the check existed), so machine noise hits
both alike; the median of each side is reported.  Three requests: a browser's loopback GET with an
Origin and a dozen headers, the DNS-rebinding request (refused), and a 1 MiB Host (refused by length).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from service.auth import KeyRing
from service.errors import ServiceError
from service.http.body_limits import BodyCaps
from service.http.request_gate import RequestGate
from service.settings import Settings

ROUNDS = 7
CALLS = 20_000
BROWSER_HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"origin", b"http://localhost:3000"),
    (b"user-agent", b"Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/140.0"),
    (b"accept", b"application/json"),
    (b"accept-language", b"en-US,en;q=0.5"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"referer", b"http://localhost:3000/"),
    (b"connection", b"keep-alive"),
    (b"sec-fetch-dest", b"empty"),
    (b"sec-fetch-mode", b"cors"),
    (b"sec-fetch-site", b"same-site"),
    (b"priority", b"u=0"),
]
REQUESTS = {
    "loopback page": BROWSER_HEADERS,
    "rebound page (421)": [(b"host", b"evil.example:8000"), (b"origin", b"http://evil.example:8000")],
    "1 MiB Host (421)": [(b"host", b"a" * (1024 * 1024))],
}


def _scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": "/healthz", "headers": headers, "client": ("127.0.0.1", 5000)}


async def _per_call_us(gate: RequestGate, headers: list[tuple[bytes, bytes]]) -> float:
    scope = _scope(headers)
    started = time.perf_counter()
    for _ in range(CALLS):
        try:
            await gate.admit(dict(scope), None)
        except ServiceError:
            pass
    return (time.perf_counter() - started) / CALLS * 1e6


def run_gate() -> dict[str, Any]:
    settings = Settings()
    checked = RequestGate(
        None, keys=KeyRing(settings), caps=BodyCaps(settings), decoder=None, metrics_require_key=False
    )  # type: ignore[arg-type]
    unchecked_keys = KeyRing(settings)
    unchecked_keys.check_addressed = lambda headers, client: None  # type: ignore[method-assign]
    unchecked = RequestGate(None, keys=unchecked_keys, caps=BodyCaps(settings), decoder=None, metrics_require_key=False)  # type: ignore[arg-type]
    figures: dict[str, Any] = {}
    for name, headers in REQUESTS.items():
        with_check: list[float] = []
        without: list[float] = []
        for _ in range(ROUNDS):
            with_check.append(asyncio.run(_per_call_us(checked, headers)))
            without.append(asyncio.run(_per_call_us(unchecked, headers)))
        figures[name] = {"checked_us": statistics.median(with_check), "unchecked_us": statistics.median(without)}
    return figures


def main() -> int:
    print(f"gate admission of one bodiless GET, median of {ROUNDS} alternating rounds of {CALLS} calls:")
    for name, f in run_gate().items():
        added = f["checked_us"] - f["unchecked_us"]
        print(
            f"  {name:20} without the check {f['unchecked_us']:6.2f} us, with it {f['checked_us']:6.2f} us ({added:+.2f} us)"
        )
    return 0
