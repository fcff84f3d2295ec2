"""The write side of `codemode serve` on a real socket: peers that do not read lose their connection.

A live service (uvicorn, real workers) with ``response_write_timeout_seconds`` = 1 parks a cell whose
status is 9.6 MB (two pending client-tool calls of 4.8 MB each), then peers ask for that status.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.polling import poll_until
from tests.support.tenant_server import TENANT_KEYS, LiveServer

pytestmark = pytest.mark.timeout(180)

AUTH = "Bearer " + TENANT_KEYS["alpha"]
PARK_BIG = "const s = 'x'.repeat(4_800_000); return await Promise.all([t({s}), t({s})])"
ABORTED = "response_write_timeout_seconds"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(
        tmp_path_factory.mktemp("writes"), workers=1, env={"CODEMODE_RESPONSE_WRITE_TIMEOUT_SECONDS": "1"}
    )
    live.start()
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture
def big_cell(server: LiveServer) -> Iterator[str]:
    r = httpx.post(
        server.base + "/v1/exec",
        json={"code": PARK_BIG, "client_tools": [{"name": "t"}]},
        headers={"authorization": AUTH},
        timeout=60,
    )
    assert r.status_code == 200 and r.json()["status"] == "waiting", r.text[:300]
    cell_id = r.json()["cell_id"]
    try:
        yield cell_id
    finally:
        httpx.post(f"{server.base}/v1/cells/{cell_id}/cancel", headers={"authorization": AUTH}, timeout=30)


def ask_status(server: LiveServer, cell_id: str, receive_buffer: int = 4096) -> socket.socket:
    """A connection that sends GET /v1/cells/{id} with a small receive buffer and reads nothing yet."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(f"GET /v1/cells/{cell_id} HTTP/1.1\r\nHost: x\r\nAuthorization: {AUTH}\r\n\r\n".encode())
    return sock


def read_response(sock: socket.socket, pause_s: float = 0.0) -> tuple[int, bytes]:
    """(Content-Length, the body bytes that arrived) reading until EOF or reset, ``pause_s`` between reads."""
    sock.settimeout(30)
    data = b""
    try:
        while True:
            chunk = sock.recv(256 * 1024)
            if not chunk:
                break
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep and len(body) >= _length(head):
                break
            if pause_s:
                time.sleep(pause_s)  # a slow peer: it reads a little, then a little more
    except ConnectionResetError:
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    return _length(head), body


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise AssertionError(f"no Content-Length in {head[:300]!r}")


def test_peers_that_never_read_are_aborted_after_the_write_timeout(server: LiveServer, big_cell: str) -> None:
    """Four peers ask for the 9.6 MB status and read nothing: each connection is aborted once its unsent
    bytes stop shrinking for the write timeout, so the rest of the answer never arrives."""
    before = server.log_tail(1_000_000).count(ABORTED)
    socks = [ask_status(server, big_cell) for _ in range(4)]
    try:
        poll_until(lambda: server.log_tail(1_000_000).count(ABORTED) >= before + 4, "4 connections aborted", 30)
        for sock in socks:
            length, body = read_response(sock)
            assert length > 9_000_000 and len(body) < length, (length, len(body))
    finally:
        for sock in socks:
            sock.close()
    assert server.answers(2.0)


def test_a_slow_reader_that_keeps_reading_gets_the_whole_answer(server: LiveServer, big_cell: str) -> None:
    """A peer that reads at most 256 KiB every 50 ms gets all 9.6 MB, intact: its writes make progress
    within every timeout window, although the socket is writable again only after megabytes were read."""
    sock = ask_status(server, big_cell, receive_buffer=256 * 1024)
    try:
        length, body = read_response(sock, pause_s=0.05)
    finally:
        sock.close()
    assert len(body) == length > 9_000_000
    status = json.loads(body)
    assert status["status"] == "waiting"
    assert [len(c["input"]["s"]) for c in status["pending_tool_calls"]] == [4_800_000, 4_800_000]
