"""The relay streams: an answer reaches the caller chunk by chunk as the holder sends it (event
streams), and a caller who leaves stops the relay and closes the connection to the holder."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from service.cluster.identity import cell_id_prefix
from service.cluster.peers import FORWARDED_HEADER, PeerClient
from service.http.replica_routing import ReplicaRouting

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


class StreamingHolder:
    """A stand-in for the holding replica: answers one chunked stream whose chunks the test releases."""

    def __init__(self) -> None:
        self.release = asyncio.Queue[bytes | None]()
        self.request_head = b""
        self.closed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.request_head = await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        peer_closed = asyncio.ensure_future(reader.read())  # b"" once the relay closes its side
        try:
            while True:
                next_chunk = asyncio.ensure_future(self.release.get())
                await asyncio.wait({next_chunk, peer_closed}, return_when=asyncio.FIRST_COMPLETED)
                if peer_closed.done():
                    next_chunk.cancel()
                    break
                chunk = next_chunk.result()
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunk is not None else b"0\r\n\r\n")
                await writer.drain()
                if chunk is None:
                    await peer_closed
                    break
        except ConnectionError:
            pass
        finally:
            writer.close()
            self.closed.set()


async def _setup() -> tuple[StreamingHolder, asyncio.Server, ReplicaRouting, dict[str, Any]]:
    holder = StreamingHolder()
    server = await asyncio.start_server(holder.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    peers = PeerClient("aaaaaaaaaaaa", read_timeout_seconds=10)

    async def peer_url(replica_id: str) -> str | None:
        return f"http://127.0.0.1:{port}" if replica_id == "bbbbbbbbbbbb" else None

    replica = SimpleNamespace(
        replica_id="aaaaaaaaaaaa", ttl_seconds=2, peers=peers, membership=SimpleNamespace(peer_url=peer_url)
    )

    async def never_local(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a cell of another replica was served locally")

    routing = ReplicaRouting(never_local, replica=replica)  # type: ignore[arg-type]
    cell = cell_id_prefix("bbbbbbbbbbbb") + str(uuid.uuid4())
    scope = {
        "type": "http",
        "method": "GET",
        "path": f"/v1/cells/{cell}/events",
        "raw_path": None,
        "query_string": b"",
        "headers": [(b"authorization", b"Bearer k"), (b"last-event-id", b"7")],
    }
    return holder, server, routing, scope


class Caller:
    """The ASGI caller's side of the relay: what was sent to it, a chunk arrived, and whether it left."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.got_chunk = asyncio.Event()
        self.left = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        if message.get("body"):
            self.got_chunk.set()

    async def receive(self) -> dict[str, Any]:
        await self.left.wait()
        return {"type": "http.disconnect"}


async def test_chunks_reach_the_caller_as_the_holder_sends_them():
    """Each chunk is passed on before the holder sends the next; the caller's headers reach the holder."""
    holder, server, routing, scope = await _setup()
    caller = Caller()
    sent = caller.sent
    relay = asyncio.ensure_future(routing(scope, caller.receive, caller.send))
    for chunk in (b"event: output\n\n", b"event: status\n\n"):
        caller.got_chunk.clear()
        await holder.release.put(chunk)
        await asyncio.wait_for(caller.got_chunk.wait(), 10)
        assert sent[-1]["body"] == chunk and sent[-1]["more_body"] is True
    await holder.release.put(None)
    await asyncio.wait_for(relay, 10)
    assert sent[0]["status"] == 200 and (b"content-type", b"text/event-stream") in sent[0]["headers"]
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    head = holder.request_head.lower()
    assert b"authorization: bearer k" in head and b"last-event-id: 7" in head
    assert FORWARDED_HEADER.encode() + b": aaaaaaaaaaaa" in head
    await routing.replica.peers.close()
    await asyncio.wait_for(holder.closed.wait(), 10)
    server.close()


async def test_a_caller_who_leaves_stops_the_relay():
    """When the caller disconnects mid-stream the relay returns and its connection to the holder closes."""
    holder, server, routing, scope = await _setup()
    caller = Caller()
    relay = asyncio.ensure_future(routing(scope, caller.receive, caller.send))
    await holder.release.put(b"event: output\n\n")
    await asyncio.wait_for(caller.got_chunk.wait(), 10)
    caller.left.set()
    await asyncio.wait_for(relay, 10)
    await asyncio.wait_for(holder.closed.wait(), 10)
    await routing.replica.peers.close()
    server.close()


@pytest.mark.parametrize("tail", ["/../../metrics", "/wait/extra", "/%2e%2e", "/WAIT"])
async def test_only_cell_routes_are_relayed(tail):
    """A path that is not /v1/cells/{id}[/action] is answered here (404), never passed to a peer."""
    holder, server, routing, scope = await _setup()
    served_here: list[str] = []

    async def local(scope: Any, receive: Any, send: Any) -> None:
        served_here.append(scope["path"])

    routing.app = local
    scope["path"] += tail
    await routing(scope, None, None)
    assert served_here == [scope["path"]] and holder.request_head == b""
    await routing.replica.peers.close()
    server.close()
